"""Console entry point: dtn-migrate-demo (the README's main job).

Starts two DTN agents as separate processes on this machine, each with
its own staging root and configuration, joined by a shared key; asks
agent A over the message bus to send a generated image to agent B;
draws the progress; and prints the sha512 that agent B verified, next to
one computed independently from B's copy.  Uses RabbitMQ on
127.0.0.1:5672 if it answers; otherwise the sink still runs as an agent
and the source engine is driven in-process (no message bus needed).
"""

import argparse
import hashlib
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

from dtn_migrate.transfer import cli as transfer_cli

AGENT_CONF = """\
[DEFAULT]
host = {host}
transport_url = {transport_url}
log_file = {workdir}/{name}/agent.log
[agent]
listen_address = 127.0.0.1
listen_port = {port}
staging_root = {workdir}/{name}/staging
state_dir = {workdir}/{name}/state
peers = {peer}
[peer:{peer}]
address = 127.0.0.1
port = {peer_port}
key = {key}
"""


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rabbit_reachable(host="127.0.0.1", port=5672):
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def _make_image(path, size):
    """A pseudo-random image, distinct in every MiB."""
    block = os.urandom(1 << 20)
    with open(path, "wb") as f:
        for i in range(size >> 20):
            f.write(i.to_bytes(8, "big") + block[8:])
        f.write(os.urandom(size & ((1 << 20) - 1)))


def _sha512(path):
    h = hashlib.sha512()
    with open(path, "rb") as f:
        while True:
            b = f.read(4 << 20)
            if not b:
                return h.hexdigest()
            h.update(b)


class Demo:
    def __init__(self, args):
        self.args = args
        self.workdir = args.workdir or tempfile.mkdtemp(prefix="dtn-demo-")
        self.key = secrets.token_hex(32)
        self.procs = []
        tag = "%d" % os.getpid()
        self.names = {"a": "demo-dtn-a-" + tag, "b": "demo-dtn-b-" + tag}
        self.ports = {"a": _free_port(), "b": _free_port()}
        self.bus = args.transport_url or (
            "rabbit://guest:guest@127.0.0.1:5672/"
            if _rabbit_reachable() else None)

    def say(self, text):
        print(text, flush=True)

    def write_config(self, side):
        other = "b" if side == "a" else "a"
        for sub in ("staging", "state"):
            os.makedirs(os.path.join(self.workdir, side, sub), exist_ok=True)
        path = os.path.join(self.workdir, side, "agent.conf")
        with open(path, "w") as f:
            f.write(AGENT_CONF.format(
                host=self.names[side], transport_url=self.bus or "fake://",
                workdir=self.workdir, name=side, port=self.ports[side],
                peer=self.names[other], peer_port=self.ports[other],
                key=self.key))
        return path

    def start_agent(self, side):
        conf = self.write_config(side)
        exe = shutil.which("dtn-migrate-agent") or os.path.join(
            os.path.dirname(sys.executable), "dtn-migrate-agent")
        proc = subprocess.Popen([exe, "--config-file", conf],
                                stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        self.procs.append(proc)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise SystemExit("agent %s exited; see %s/%s/agent.log"
                                 % (self.names[side], self.workdir, side))
            try:
                socket.create_connection(("127.0.0.1", self.ports[side]),
                                         timeout=0.5).close()
                return conf
            except OSError:
                time.sleep(0.2)
        raise SystemExit("agent %s did not start" % self.names[side])

    def run(self):
        size = transfer_cli.size(self.args.size)
        self.say("workspace: %s" % self.workdir)
        self.say("message bus: %s" % (self.bus or "none reachable; the "
                                      "source engine runs in-process"))
        image = os.path.join(self.workdir, "a", "staging", "demo.img")
        os.makedirs(os.path.dirname(image), exist_ok=True)
        self.say("generating a %s image on DTN A ..." % transfer_cli.human(
            size))
        _make_image(image, size)
        self.say("starting agents %s (port %d) and %s (port %d)"
                 % (self.names["a"], self.ports["a"], self.names["b"],
                    self.ports["b"]))
        conf_b = self.start_agent("b")
        if self.bus:
            conf_a = self.start_agent("a")
            status = self.via_rpc(conf_a)
        else:
            status = self.direct(image)
        if status["state"] != "complete":
            self.say("transfer %s: %s" % (status["state"], status["error"]))
            return 1
        received = os.path.join(self.workdir, "b", "staging", "demo.img")
        verified = status["files"][0].get("sha512")
        self.say("sink-verified sha512: %s" % verified)
        independent = _sha512(received)
        self.say("recomputed on B:      %s" % independent)
        same = independent == verified == _sha512(image)
        self.say("%s in %.2f s (%s/s), %d resent bytes"
                 % ("bit-identical" if same else "MISMATCH",
                    status["elapsed"], transfer_cli.human(
                        status["bytes_total"] / max(status["elapsed"],
                                                    1e-6)),
                    status["bytes_resent"]))
        del conf_b
        return 0 if same else 1

    def via_rpc(self, conf_a):
        from dtn_migrate.agent import rpcapi
        from dtn_migrate import config
        from dtn_migrate import rpc
        config.parse_args(["demo", "--config-file", conf_a],
                          configure_logging=False)
        rpc.init(config.CONF)
        try:
            api = rpcapi.AgentAPI(timeout=30, retry=3)
            api.ping({}, self.names["a"])
            status = api.start_transfer({}, self.names["a"],
                                        self.names["b"], ["demo.img"])
            tid = status["transfer_id"]
            self.say("transfer %s started over RPC" % tid)
            while status["state"] not in ("complete", "failed", "cancelled"):
                time.sleep(0.3)
                status = api.get_transfer({}, self.names["a"], tid)
                if "bytes_total" in status:
                    sys.stdout.write("\r" + transfer_cli.progress_line(status))
                    sys.stdout.flush()
            sys.stdout.write("\n")
            return status
        finally:
            rpc.cleanup()

    def direct(self, image):
        from dtn_migrate.transfer import config
        from dtn_migrate.transfer import dataset
        from dtn_migrate.transfer import source
        spec = dataset.spec_for_path(image, "demo.img")
        manifest = dataset.Manifest.new(self.names["b"], [spec])
        peer = source.Peer(self.names["b"], "127.0.0.1", self.ports["b"],
                           bytes.fromhex(self.key))
        transfer = source.SourceTransfer(
            manifest, peer, config.TransferConfig(),
            os.path.join(self.workdir, "a", "state"), self.names["a"])
        runner = threading.Thread(target=transfer.run)
        runner.start()
        while runner.is_alive():
            runner.join(0.3)
            sys.stdout.write("\r" + transfer_cli.progress_line(
                transfer.progress.snapshot()))
            sys.stdout.flush()
        sys.stdout.write("\n")
        status = transfer.status()
        transfer.close()
        return status

    def cleanup(self):
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        if not self.args.keep and not self.args.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


def main(argv=None):
    p = argparse.ArgumentParser(prog="dtn-migrate-demo",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--size", default="1G", help="image size (default 1G)")
    p.add_argument("--workdir", help="keep everything here")
    p.add_argument("--transport-url", help="message bus for the agents")
    p.add_argument("--keep", action="store_true",
                   help="keep the temporary workspace")
    args = p.parse_args(argv)
    demo = Demo(args)
    try:
        sys.exit(demo.run())
    finally:
        demo.cleanup()
