"""The playground: ``./tools/demo --serve`` (``python -m devcloud.demo
--serve``).

Brings up the demo's two clouds (devcloud.democlouds: a Keystone, a
Glance, a DTN agent, an engine and the dtn-migrate-api each, on a
RabbitMQ vhost per cloud) with a Horizon and the dtn-migrate panel in
front of each, the personas of :func:`devcloud.api.personas` in both
Keystones, a small qcow2 and a small raw image in cloud a (project
``demo``, tagged for a protection policy's selector) and an openrc file
per cloud and persona; prints how to use them and keeps everything
running until Ctrl-C (SIGINT, SIGTERM or SIGHUP), then removes it all:
processes, vhosts and the work directory (databases, images, logs).

Both clouds are set up as the runbooks (doc/source/admin/runbooks/)
expect: each Glance publishes its notifications on its cloud's bus, the
engines follow protection policies within seconds, and cloud a accepts
the metadata of a failback from cloud b while its administrator has one
open.
"""

import os
import sys
import tempfile
import time

import devcloud
from devcloud import _base
from devcloud import api as devcloud_api
from devcloud import demo
from devcloud import democlouds
from devcloud import horizon as devcloud_horizon
from devcloud import openrc

MiB = 1 << 20
GiB = 1 << 30
#: (name, disk format, bytes of data, virtual size) of cloud a's images.
IMAGES = (("playground-qcow2", "qcow2", 8 * MiB, GiB),
          ("playground-raw", "raw", 4 * MiB, None))
#: The persona that owns the images (a member of project ``demo``).
OWNER = "alice"
#: Engine options of both clouds: policies act within seconds.
ENGINE = {
    "protection": {"scan_interval": 300, "rpo_interval": 5,
                   "retry_interval": 30},
    "engine": {"stall_timeout": 300},
    "oslo_messaging_notifications": {"driver": "messagingv2",
                                     "topics": "notifications"},
}
#: Seconds between two looks at the playground's processes.
CHECK_INTERVAL = 2


class Playground(demo.Demo):
    """``./tools/demo --serve``: the clouds of the demo, kept running."""

    def __init__(self, args):
        super().__init__(args)
        self.horizons = []
        self.users = {}
        self.openrc_dir = None
        self.ready = False

    def check_prerequisites(self):
        super().check_prerequisites()
        try:
            import openstack_dashboard  # noqa: F401
        except ImportError:
            raise democlouds.DemoError(
                "Horizon is not installed in this virtualenv: pip install "
                "-e '.[dashboard]' (tools/bootstrap.sh does)")
        if not democlouds.rabbit_reachable():
            raise democlouds.DemoError(
                "--serve needs RabbitMQ on 127.0.0.1:5672 (the APIs and "
                "Horizon reach each cloud's engine over its vhost)")

    def generate(self):
        """The images' files (in a thread while the clouds start)."""
        files = []
        seed = int(time.time())
        for name, disk_format, size, virtual in IMAGES:
            path = os.path.join(self.workdir, "%s.%s" % (name, disk_format))
            if disk_format == "qcow2":
                devcloud.make_qcow2(path, size, seed=seed,
                                    virtual_size=virtual)
            else:
                with open(path, "wb") as f:
                    f.write(os.urandom(size))
            files.append((name, disk_format, path))
        return files

    def configure_engines(self):
        """Protection options, the service user's Glance credentials
        (the engine reads and writes every project's images), and cloud
        a's acceptance of cloud b's failback metadata.
        """
        a, b = self.clouds.a, self.clouds.b
        for cloud in (a, b):
            user = cloud.keystone.service_user(devcloud_api.SERVICE_USER)
            cloud.engine_extra = _base.merge(
                {section: dict(values) for section, values in
                 ENGINE.items()},
                {"glance": {"username": user["username"],
                            "password": user["password"],
                            "project_name": user["project_name"]}})
        a.engine_extra["peer:%s" % b.agent_name] = {
            "accept_metadata_updates": True}

    def launch_horizons(self):
        """A Horizon per cloud, loading while the rest starts (each needs
        only its Keystone); :meth:`wait_horizons` waits for them.
        """
        for cloud in self.clouds.clouds:
            # The plugin is installed into Horizon once, for both.
            horizon = devcloud_horizon.HorizonServer(
                cloud.dir, cloud.keystone, name=cloud.name,
                plugin=not self.horizons)
            self.horizons.append(horizon)
            horizon.launch()

    def wait_horizons(self, timeout=180):
        """Each Horizon answers its login page (compiled once); one
        that failed (a port lost to another process) is started again.
        """
        for cloud, horizon in zip(self.clouds.clouds, self.horizons):
            try:
                horizon.wait_ready(timeout)
                horizon.warm(timeout=timeout)
            except devcloud.ServerFailed:
                horizon.stop(kill=True)
                horizon.start(timeout)
            self.say("cloud %s: Horizon %s with the dtn-migrate panel" % (
                cloud.name, horizon.endpoint))

    def upload(self, files):
        """Cloud a's images, owned by alice's project; their records."""
        a = self.clouds.a
        client = a.glance.client(session=self.users["a"][OWNER].session())
        images = []
        for name, disk_format, path in files:
            image = client.images.create(
                name=name, disk_format=disk_format, container_format="bare",
                tags=[openrc.TAG], min_disk=1, hw_disk_bus="virtio")
            with open(path, "rb") as f:
                client.images.upload(image["id"], f)
            os.unlink(path)
            image = dict(devcloud.wait_image(client, image["id"]))
            images.append(image)
            self.say("image on cloud a: %s %s (%s, %s, tag %s, project "
                     "demo of %s)" % (image["name"], image["id"],
                                      disk_format,
                                      demo._human(image["size"]), openrc.TAG,
                                      OWNER))
        return images

    def write_openrcs(self):
        """An openrc per cloud and persona, in the work directory."""
        self.openrc_dir = os.path.join(self.workdir, "openrc")
        os.makedirs(self.openrc_dir, exist_ok=True)
        bin_dir = os.path.dirname(demo.OPENSTACK)
        for cloud, peer in ((self.clouds.a, self.clouds.b),
                            (self.clouds.b, self.clouds.a)):
            for persona in openrc.ORDER:
                env = cloud.api.openstack_env(self.users[cloud.name][persona],
                                              base_env={})
                path = os.path.join(self.openrc_dir, "%s-%s.openrc" % (
                    cloud.name, persona))
                with open(path, "w") as f:
                    f.write(openrc.openrc_text(cloud.name, persona, env,
                                               peer.agent_name, bin_dir))

    def run(self):
        t_start = time.monotonic()
        self.check_prerequisites()
        parent = self.args.workdir or demo._data_dir(GiB)
        os.makedirs(parent, exist_ok=True)
        self.workdir = tempfile.mkdtemp(prefix="dtn-playground-",
                                        dir=parent)
        democlouds.log_to(os.path.join(self.workdir, democlouds.LOG))
        self.say("dtn-migrate playground: two clouds with Horizon, kept "
                 "running until Ctrl-C")
        self.say("work directory: %s" % self.workdir)
        self.image = demo._Background(self.generate)
        self.clouds = democlouds.Clouds(self.workdir, "rabbit")
        self.vhosts = demo._Background(self.clouds.make_vhosts)
        for cloud in self.clouds.clouds:
            cloud.keystone.start()
        self.vhosts.result()
        # Glance publishes on its cloud's bus (continuous policies).
        for cloud in self.clouds.clouds:
            cloud.glance.notifications_url = self.clouds.urls[cloud.name]
        self.clouds.start_glances()
        for cloud in self.clouds.clouds:
            self.users[cloud.name] = devcloud_api.personas(cloud.keystone)
        self.launch_horizons()
        # The images go up while the agents, engines and APIs start.
        uploads = demo._Background(lambda: self.upload(self.image.result()))
        self.configure_engines()
        self.make_buses(None, None)
        self.clouds.start_services()
        self.clouds.start_apis()
        for c in self.clouds.clouds:
            self.say("cloud %s: Keystone %s, Glance %s, dtn-migrate-api "
                     "%s, DTN agent %s on port %d, engine %s" % (
                         c.name, c.keystone.endpoint, c.glance.endpoint,
                         c.api.endpoint, c.agent_name, c.port,
                         c.engine_name))
        self.wait_horizons()
        images = uploads.result()
        self.write_openrcs()
        self.say(openrc.usage(self.openrc_dir, self.clouds.clouds,
                              self.horizons, images))
        self.ready = True
        self.say("%s %s (up in %.1f s); Ctrl-C stops the playground and "
                 "removes everything" % (openrc.READY, self.openrc_dir,
                                         time.monotonic() - t_start))
        self.serve()
        return 0

    def serve(self):
        """Until a signal: say once when one of the processes exits."""
        told = set()
        while True:
            time.sleep(CHECK_INTERVAL)
            for what in self.exited():
                if what not in told:
                    told.add(what)
                    self.say("warning: %s exited (its log is under %s)"
                             % (what, self.workdir))

    def exited(self):
        """What of the playground no longer runs."""
        gone = ["%s (%s)" % (exe, conf) for exe, conf, proc in
                self.clouds.services.procs if proc.poll() is not None]
        for cloud, horizon in zip(self.clouds.clouds, self.horizons):
            for server in (cloud.keystone, cloud.glance, cloud.api,
                           horizon):
                if not server.running:
                    gone.append("%s %s" % (server.kind, server.name))
        return gone

    def cleanup(self):
        problems = []
        for horizon in self.horizons:
            try:
                if self.args.keep:
                    horizon.stop(kill=True)
                else:
                    horizon.close()
            except Exception as exc:  # noqa: B902 - clean up the rest
                problems.append("stopping Horizon %s: %s" % (
                    horizon.name, exc))
        for problem in problems:
            print("cleanup: %s" % problem, file=sys.stderr, flush=True)
        super().cleanup()
        if self.ready:
            self.say("playground stopped: its processes and RabbitMQ "
                     "vhosts removed, %s" % (
                         "its work directory kept" if self.args.keep
                         else "and its work directory"))
