"""The demo: ``./tools/demo`` (``python -m devcloud.demo``), the README's
main job.

Migrates a generated qcow2 image between two clouds on this machine.
Each cloud has its own Keystone, a Glance (uwsgi, SQLite, file store),
a DTN agent, a migration engine, the dtn-migrate-api (uwsgi), a staging
directory and a bus of its own: a RabbitMQ vhost when RabbitMQ answers
on 127.0.0.1:5672, otherwise an in-process transport with the agents
and engines inside this process (and no API).  The demo uploads the
image to cloud a and migrates it the way an operator does, with
``openstack dtn migrate <image> --peer <cloud b's DTN> --wait`` as cloud
a's admin (on the in-process transport: over engine a's bus), showing
that command's own progress and result; then it prints the sha512 that
cloud b's Glance holds next to the source's and the generated file's.
"""

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
import warnings

# oslo.service's threading backend is used; eventlet is only installed as
# a transitive dependency and warns when imported (as dtn_migrate.cmd's
# entry points say).
warnings.filterwarnings("ignore", message="(?s).*eventlet")

from oslo_service import backend  # noqa: E402

# Before oslo.messaging is imported: the in-process services need it.
backend.init_backend(backend.BackendType.THREADING)

import oslo_messaging as messaging  # noqa: E402

from devcloud import democlouds  # noqa: E402
from dtn_migrate.client import progress as client_progress  # noqa: E402
import devcloud  # noqa: E402
from dtn_migrate.common import units  # noqa: E402
from dtn_migrate import context  # noqa: E402
from dtn_migrate.common import states
from dtn_migrate.transfer import cli as transfer_cli  # noqa: E402
from dtn_migrate.common import polling  # noqa: E402

#: The context of the demo's requests to engine A over the bus.
CTXT = context.get_service_context("dtn-migrate-demo").to_dict()

GiB = 1 << 30
MiB = 1 << 20
#: The ``openstack`` executable of this virtualenv.
OPENSTACK = os.path.join(os.path.dirname(sys.executable), "openstack")
# What the demo sets on the source image and checks on the peer's.
TAGS = ["demo", "dr"]
MIN_RAM = 512
PROPERTIES = {"os_distro": "debian", "hw_disk_bus": "virtio"}


def _sha512(path):
    h = hashlib.sha512()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(4 * MiB), b""):
            h.update(block)
    return h.hexdigest()


def _human(n):
    return units.human(n).replace(".0 ", " ")


def _data_dir(size):
    """tmpfs when it holds the image's copies with room to spare."""
    try:
        st = os.statvfs("/dev/shm")
        if st.f_bavail * st.f_frsize > 8 * size + 2 * GiB:
            return "/dev/shm"
    except OSError:
        pass
    return tempfile.gettempdir()


class _Background(threading.Thread):
    """FUNC in a thread; ``result()`` waits and returns or raises."""

    def __init__(self, func):
        super().__init__(daemon=True)
        self.func = func
        self.value = self.error = None
        self.start()

    def run(self):
        try:
            self.value = self.func()
        except Exception as exc:  # noqa: B902 - raised by result()
            self.error = exc

    def result(self):
        self.join()
        if self.error is not None:
            raise self.error
        return self.value


class Demo:
    def __init__(self, args):
        self.args = args
        self.size = args.size
        self.workdir = None
        self.clouds = None
        self.image = self.vhosts = None

    def say(self, text=""):
        print(text, flush=True)

    # Steps.
    def check_prerequisites(self):
        ok, why = devcloud.available()
        if not ok:
            raise democlouds.DemoError(why)
        try:
            import glanceclient  # noqa: F401
        except ImportError:
            raise democlouds.DemoError(
                "python-glanceclient is not installed: run "
                "tools/bootstrap-clouds.sh")
        if shutil.which("qemu-img") is None:
            raise democlouds.DemoError(
                "qemu-img not found: run tools/bootstrap-clouds.sh "
                "(installs qemu-utils)")

    def choose_transport(self):
        """("rabbit" or "fake", why fake)."""
        want = self.args.transport
        if want == "fake":
            return "fake", "in-process transport (fake://), as asked"
        if democlouds.rabbit_reachable():
            return "rabbit", None
        if want == "rabbit":
            raise democlouds.DemoError(
                "RabbitMQ does not answer on 127.0.0.1:5672")
        return "fake", ("RabbitMQ does not answer on 127.0.0.1:5672: "
                        "in-process transport (fake://)")

    def make_buses(self, vhosts, why):
        """Wait for the vhosts (VHOSTS, a _Background; None: fake), or
        fall back when they cannot be made; then the transports.
        """
        if vhosts is not None:
            try:
                vhosts.result()
            except democlouds.DemoError as exc:
                if self.args.transport == "rabbit":
                    raise
                self.clouds.vhosts.delete()
                self.clouds.kind = "fake"
                why = ("cannot create RabbitMQ vhosts (%s); falling back "
                       "to the in-process transport (fake://)" % exc)
        self.clouds.make_buses()
        if self.clouds.kind == "rabbit":
            self.say("message bus: RabbitMQ on 127.0.0.1:5672, vhosts %s"
                     % " and ".join(self.clouds.vhosts.names))
        else:
            self.say("message bus: %s; one transport per cloud, agents "
                     "and engines in this process" % why)

    def generate(self):
        """The qcow2 (in a thread while the clouds start)."""
        path = os.path.join(self.workdir, "demo-disk.qcow2")
        virtual = max(GiB, -(-self.size // GiB) * GiB)
        t0 = time.monotonic()
        devcloud.make_qcow2(path, self.size, seed=int(time.time()),
                            virtual_size=virtual)
        return path, virtual, _sha512(path), time.monotonic() - t0

    def upload(self, path, min_disk):
        client = self.clouds.a.admin()
        image = client.images.create(
            name="demo-disk", disk_format="qcow2", container_format="bare",
            min_disk=min_disk, min_ram=MIN_RAM, tags=TAGS, **PROPERTIES)
        t0 = time.monotonic()
        with open(path, "rb") as f:
            client.images.upload(image["id"], f)
        image = dict(devcloud.wait_image(client, image["id"]))
        self.say("uploaded to cloud a's Glance in %.1f s: image %s "
                 "(tags %s, min_disk %d, min_ram %d, %s)" % (
                     time.monotonic() - t0, image["id"],
                     ",".join(sorted(image["tags"])), image["min_disk"],
                     image["min_ram"], ", ".join(
                         "%s=%s" % kv for kv in sorted(PROPERTIES.items()))))
        return image

    def follow(self, api, migration_id, timeout):
        """Poll the migration until it ends, drawing the progress."""
        progress = client_progress.Progress(sys.stdout, label=False)
        seen = {"misses": 0, "state": None}

        def ended():
            self.clouds.services.check()
            try:
                rec = api.get_migration(CTXT, migration_id)
                seen["misses"] = 0
            except messaging.MessagingTimeout:
                seen["misses"] += 1
                if seen["misses"] >= 3:
                    raise democlouds.DemoError(
                        "engine a stopped answering on its bus")
                return None
            progress.draw([rec])
            seen["state"] = rec["state"]
            return rec if rec["state"] in states.FINAL_STATES else None

        rec = polling.poll(ended, timeout, 0.25)
        if not rec:
            raise democlouds.DemoError(
                "migration %s not done after %d s (state %s)" % (
                    migration_id, timeout, seen["state"]))
        return rec

    def openstack(self, cloud, *args, capture=True):
        """Run ``openstack ARGS`` as CLOUD's admin; its output, or (not
        CAPTURE) its exit status with its output on this terminal.
        """
        cmd = [OPENSTACK] + list(args)
        env = cloud.openstack_env()
        if not capture:
            # Its progress (on its stderr) and result, in the demo's
            # output; the demo's stderr is for the demo's own errors.
            self.say("$ openstack %s" % " ".join(args))
            return subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL,
                                  stderr=sys.stdout,
                                  timeout=self.args.timeout).returncode
        done = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=300)
        if done.returncode:
            raise democlouds.DemoError("openstack %s failed (%d): %s" % (
                " ".join(args), done.returncode, done.stderr.strip()))
        return done.stdout

    def migrate_with_openstack(self, source, peer):
        """``openstack dtn migrate --wait`` on cloud a; its record."""
        a = self.clouds.a
        request_id = uuid.uuid4().hex
        code = self.openstack(a, "dtn", "migrate", source["id"], "--peer",
                              peer, "--request-id", request_id, "--wait",
                              capture=False)
        rows = json.loads(self.openstack(
            a, "dtn", "migration", "list", "--request-id", request_id,
            "-f", "json"))
        if len(rows) != 1:
            raise democlouds.DemoError(
                "request %s has %d migrations, not 1" % (request_id,
                                                         len(rows)))
        rec = json.loads(self.openstack(
            a, "dtn", "migration", "show", rows[0]["ID"], "-f", "json"))
        if code or rec.get("state") != "complete":
            raise democlouds.DemoError(
                "openstack dtn migrate exited %d: migration %s %s: %s" % (
                    code, rec.get("id"), rec.get("state"), rec.get("error")))
        return rec

    def migrate_over_bus(self, source, peer):
        """Ask engine a over its bus (the in-process transport, where no
        API can run); follow the migration; its record.
        """
        api = self.clouds.a.engine_api()
        req = api.migrate(CTXT, peer, images=[source["id"]])
        [mig] = req["migrations"]
        migration_id = mig.get("id") or mig.get("migration_id")
        self.say("migration %s: image %s to %s, asked of engine a over "
                 "its bus" % (migration_id, source["id"], peer))
        rec = self.follow(api, migration_id, self.args.timeout)
        if rec["state"] != "complete":
            raise democlouds.DemoError("migration %s %s: %s" % (
                migration_id, rec["state"], rec.get("error")))
        return rec

    def verify(self, source, file_digest, peer_id):
        """Read the peer's image from cloud b's Glance and compare it
        with the source's (read again) and the file; return problems.
        """
        peer = dict(self.clouds.b.admin().images.get(peer_id))
        source = dict(self.clouds.a.admin().images.get(source["id"]))
        problems = []
        if peer["status"] != "active":
            problems.append("peer image is %s" % peer["status"])
        if peer.get("os_hash_algo") != "sha512":
            problems.append("peer os_hash_algo is %s" % peer.get(
                "os_hash_algo"))
        for key in ("size", "disk_format", "container_format", "min_disk",
                    "min_ram") + tuple(PROPERTIES):
            if peer.get(key) != source.get(key):
                problems.append("%s: %r on a, %r on b" % (
                    key, source.get(key), peer.get(key)))
        if sorted(peer.get("tags") or ()) != sorted(source["tags"]):
            problems.append("tags: %s on a, %s on b" % (
                source["tags"], peer.get("tags")))
        verified = peer.get("os_hash_value")
        self.say("peer image: %s on cloud b, %s, %s, tags %s, min_disk "
                 "%s, min_ram %s, %s" % (
                     peer_id, peer["status"], _human(peer["size"] or 0),
                     ",".join(sorted(peer.get("tags") or ())),
                     peer.get("min_disk"), peer.get("min_ram"),
                     ", ".join("%s=%s" % (k, peer.get(k))
                               for k in sorted(PROPERTIES))))
        self.say("sha512 verified on cloud b: %s" % verified)
        self.say("  os_hash_value of the source image on cloud a: %s" % (
            "same" if source["os_hash_value"] == verified
            else source["os_hash_value"]))
        self.say("  sha512 of the generated file:                %s" % (
            "same" if file_digest == verified else file_digest))
        if not (verified == source["os_hash_value"] == file_digest):
            problems.append("checksums differ")
        return problems

    def run(self):
        t_start = time.monotonic()
        self.check_prerequisites()
        kind, why = self.choose_transport()
        parent = self.args.workdir or _data_dir(self.size)
        os.makedirs(parent, exist_ok=True)
        self.workdir = tempfile.mkdtemp(prefix="dtn-demo-", dir=parent)
        democlouds.log_to(os.path.join(self.workdir, democlouds.LOG))
        self.say("dtn-migrate demo: migrate a %s qcow2 image from cloud a "
                 "to cloud b" % _human(self.size))
        self.say("work directory: %s" % self.workdir)
        # The image and the vhosts are made while the Glances start.
        self.image = _Background(self.generate)
        self.clouds = democlouds.Clouds(self.workdir, kind)
        if kind == "rabbit":
            self.vhosts = _Background(self.clouds.make_vhosts)
        self.clouds.start_glances()
        self.make_buses(self.vhosts, why)
        a, b = self.clouds.a, self.clouds.b
        self.clouds.start_services()
        for c in (a, b):
            self.say("cloud %s: Keystone %s (uwsgi, SQLite, fernet "
                     "tokens), Glance %s (uwsgi, SQLite, file store), DTN "
                     "agent %s on port %d, engine %s" % (
                         c.name, c.keystone.endpoint, c.glance.endpoint,
                         c.agent_name, c.port, c.engine_name))
        self.say("agents and engines answer on their buses (%s)" % (
            "processes" if self.clouds.kind == "rabbit" else "in-process"))
        if self.clouds.kind == "rabbit":
            self.clouds.start_apis()
            for c in (a, b):
                self.say("cloud %s: dtn-migrate-api %s (uwsgi), service "
                         "type dtn-migration in Keystone %s" % (
                             c.name, c.api.endpoint, c.keystone.endpoint))
        path, virtual, file_digest, seconds = self.image.result()
        self.say("image: generated a qcow2 with qemu-img in %.1f s (%s of "
                 "data, %s virtual, file %s)" % (
                     seconds, _human(self.size), _human(virtual),
                     _human(os.path.getsize(path))))
        source = self.upload(path, virtual // GiB)
        if source["os_hash_value"] != file_digest:
            raise democlouds.DemoError(
                "cloud a's Glance computed %s, the file's sha512 is %s" % (
                    source["os_hash_value"], file_digest))
        t0 = time.monotonic()
        if self.clouds.kind == "rabbit":
            rec = self.migrate_with_openstack(source, b.agent_name)
        else:
            rec = self.migrate_over_bus(source, b.agent_name)
        elapsed = time.monotonic() - t0
        peer_id = rec.get("peer_image_id")
        if not peer_id:
            raise democlouds.DemoError("migration complete but no peer "
                                       "image id in %s" % rec)
        problems = self.verify(source, file_digest, peer_id)
        if problems:
            raise democlouds.DemoError("verification failed: %s"
                                       % "; ".join(problems))
        self.say("migrated %s in %.1f s (%s/s end to end: export, "
                 "transfer, import into cloud b's Glance); demo total "
                 "%.1f s" % (_human(source["size"]), elapsed,
                             _human(source["size"] / max(elapsed, 1e-3)),
                             time.monotonic() - t_start))
        return 0

    def cleanup(self):
        """Stop everything; remove the work directory unless --keep."""
        keep = self.args.keep
        problems = []
        if self.vhosts is not None:
            self.vhosts.join(120)
        if self.clouds is not None:
            problems = self.clouds.stop(keep=keep)
        if self.image is not None:
            self.image.join(300)
        for problem in problems:
            print("cleanup: %s" % problem, file=sys.stderr, flush=True)
        if self.workdir is None:
            return
        if keep:
            self.say("kept %s (logs: demo.log, cloud-*/agent.log, "
                     "cloud-*/engine.log, cloud-*/glance-*/glance-api.log)"
                     % self.workdir)
        else:
            shutil.rmtree(self.workdir, ignore_errors=True)


class _Interrupted(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def _interrupt(signum, frame):
    raise _Interrupted(signum)


def main(argv=None):
    p = argparse.ArgumentParser(prog="tools/demo",
                                description=__doc__.split("\n\n")[1])
    p.add_argument("--serve", action="store_true",
                   help="the playground instead of the main job: both "
                        "clouds with a Horizon each, a few images and an "
                        "openrc per cloud and persona, kept running until "
                        "Ctrl-C, then removed (needs RabbitMQ)")
    p.add_argument("--size", type=transfer_cli.size, default="256M",
                   help="data in the generated image (default 256M; not "
                        "with --serve)")
    p.add_argument("--transport", choices=("auto", "rabbit", "fake"),
                   default=os.environ.get("DTN_DEMO_TRANSPORT", "auto"),
                   help="message buses: RabbitMQ vhosts, the in-process "
                        "fake:// transport, or RabbitMQ when it answers "
                        "(default auto; $DTN_DEMO_TRANSPORT)")
    p.add_argument("--workdir", help="make the work directory in this "
                   "directory (default: /dev/shm if roomy, else $TMPDIR)")
    p.add_argument("--keep", action="store_true",
                   help="keep the work directory (configs, logs, data)")
    p.add_argument("--timeout", type=int, default=1800,
                   help="longest wait for the migration, in seconds")
    args = p.parse_args(argv)
    if args.size < MiB:
        p.error("--size must be at least 1M")
    if args.serve and args.transport == "fake":
        p.error("--serve needs RabbitMQ (--transport rabbit or auto): "
                "no API nor Horizon can reach an in-process bus")
    # SIGINT too: a shell starts a background job with SIGINT ignored,
    # and Python then leaves it ignored.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)
    if args.serve:
        from devcloud import playground
        demo = playground.Playground(args)
    else:
        demo = Demo(args)
    code = 1
    try:
        code = demo.run()
    except KeyboardInterrupt as exc:
        if getattr(demo, "ready", False):
            # How a playground ends.
            print("\nstopping the playground: removing everything",
                  flush=True)
            code = 0
        else:
            print("\ninterrupted: cleaning up", file=sys.stderr,
                  flush=True)
            code = 128 + getattr(exc, "signum", signal.SIGINT)
    except (democlouds.DemoError, devcloud.CloudsNotInstalled,
            devcloud.ServerFailed) as exc:
        print("\ndemo failed: %s" % exc, file=sys.stderr, flush=True)
    except Exception:  # noqa: B902 - reported, then cleaned up
        traceback.print_exc()
        print("\ndemo failed (unexpected error above)", file=sys.stderr,
              flush=True)
    finally:
        # Cleaning up (a few seconds) is not interrupted.
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        demo.cleanup()
    if code == 1 and not args.keep and demo.workdir:
        print("(rerun with --keep to inspect the logs)", file=sys.stderr)
    sys.exit(code)


if __name__ == "__main__":
    main()
