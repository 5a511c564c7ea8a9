"""The operator entry points, run as commands: the demo (the README's
main job, a whole migration between two local clouds),
dtn-migrate-manage against live agents, and the standalone
dtn-migrate-transfer.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import testtools

import devcloud
from tests.functional import base

MiB = base.MiB


def run(argv, **kw):
    return subprocess.run(argv, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=300,
                          **kw)


class TestDemo(testtools.TestCase):
    """The whole demo migration, small, on both kinds of bus."""

    def setUp(self):
        super().setUp()
        ok, why = devcloud.available()
        if not ok:
            self.skipTest(why)
        if shutil.which("qemu-img") is None:
            self.skipTest("qemu-img is not installed")
        try:
            import glanceclient  # noqa: F401
        except ImportError:
            self.skipTest("python-glanceclient is not installed")
        self.parent = tempfile.mkdtemp(prefix="dtnm-demo-test-",
                                       dir=base.data_root())
        self.addCleanup(shutil.rmtree, self.parent, ignore_errors=True)

    def demo(self, transport):
        # As tools/demo runs it.
        proc = run([sys.executable, "-m", "devcloud.demo",
                    "--size", "16M", "--transport", transport,
                    "--workdir", self.parent])
        out = proc.stdout
        self.assertEqual(0, proc.returncode, out + proc.stderr)
        self.assertEqual("", proc.stderr)
        verified = re.search(r"^sha512 verified on cloud b: ([0-9a-f]{128})$",
                             out, re.M)
        self.assertIsNotNone(verified, out)
        self.assertIn("os_hash_value of the source image on cloud a: same",
                      out)
        self.assertIn("sha512 of the generated file:                same",
                      out)
        self.assertRegex(out, r"peer image: [0-9a-f-]{36} on cloud b, "
                              r"active")
        self.assertRegex(out, r"migrated 16.3 MiB in [0-9.]+ s")
        # Each cloud behind a Keystone of its own.
        for name in "ab":
            self.assertRegex(out, r"(?m)^cloud %s: Keystone "
                                  r"http://127.0.0.1:\d+ .*Glance " % name)
        # Everything is gone: work directory, processes (their ports).
        self.assertEqual([], os.listdir(self.parent))
        return out

    def test_rabbitmq(self):
        ok, why = base.Broker.available()
        if not ok:
            self.skipTest(why)
        out = self.demo("rabbit")
        vhosts = re.search(r"vhosts (\S+) and (\S+)", out).groups()
        listed = subprocess.run(["rabbitmqctl", "-q", "list_vhosts"],
                                stdout=subprocess.PIPE, text=True).stdout
        for vhost in vhosts:
            self.assertNotIn(vhost, listed.split())
        # Through each cloud's API, as an operator: the openstack
        # executable's own progress lines and result table.
        for name in "ab":
            self.assertRegex(out, r"(?m)^cloud %s: dtn-migrate-api "
                                  r"http://127.0.0.1:\d+ \(uwsgi\)" % name)
        self.assertRegex(out, r"(?m)^\$ openstack dtn migrate [0-9a-f-]{36} "
                              r"--peer \S+ --request-id [0-9a-f]{32} --wait$")
        self.assertRegex(out, r"(?m)^demo-disk +complete +\[#+\] 100.0%")
        self.assertRegex(out, r"(?m)^\| [0-9a-f]{32} \| [0-9a-f-]{36} \| "
                              r"demo-disk +\| \S+ +\| complete ")

    def test_in_process(self):
        out = self.demo("fake")
        self.assertIn("in-process transport (fake://)", out)
        self.assertIn("agents and engines answer on their buses "
                      "(in-process)", out)


class TestManage(base.FunctionalTestCase):
    def manage(self, agent, *args):
        return run([os.path.join(base.VENV_BIN, "dtn-migrate-manage"),
                    "--config-file", agent.conf] + list(args))

    def test_start_wait_show_list_incoming(self):
        src, dst = self.pair()
        path = os.path.join(src.staging, "images", "a.raw")
        base.make_file(path, 20 * MiB, seed=2)
        proc = self.manage(src, "transfer", "start", "--host", src.name,
                           "--peer", dst.name, "--wait", "--option",
                           "streams=2", "images")
        self.assertEqual(0, proc.returncode, proc.stderr)
        status = json.loads(proc.stdout)
        self.assertEqual("complete", status["state"])
        tid = status["transfer_id"]
        self.assertSame(path, os.path.join(dst.staging, "images", "a.raw"))
        shown = json.loads(self.manage(src, "transfer", "show", "--host",
                                       src.name, tid).stdout)
        self.assertEqual("complete", shown["state"])
        listed = json.loads(self.manage(src, "transfer", "list", "--host",
                                        src.name).stdout)
        self.assertIn(tid, [t["transfer_id"] for t in listed])
        incoming = json.loads(self.manage(dst, "transfer", "incoming",
                                          "--host", dst.name, tid).stdout)
        self.assertEqual(1, incoming["files_done"])

    def test_errors_are_clear(self):
        src, dst = self.pair()
        proc = self.manage(src, "transfer", "start", "--host", src.name,
                           "--peer", "nowhere", "x")
        self.assertEqual(1, proc.returncode)
        self.assertIn("Unknown peer DTN nowhere", proc.stderr)
        proc = self.manage(src, "transfer", "start", "--host", src.name,
                           "--peer", dst.name, "../../etc/passwd")
        self.assertEqual(1, proc.returncode)
        self.assertIn("outside the staging root", proc.stderr)
        proc = self.manage(src, "transfer", "show", "--host", src.name,
                           "0" * 32)
        self.assertIn("could not be found", proc.stderr)
        proc = self.manage(src, "transfer", "show", "--host", "no-such-dtn",
                           "--timeout", "2", "0" * 32)
        self.assertEqual(1, proc.returncode)
        self.assertIn("no answer from the agent on no-such-dtn",
                      proc.stderr)


class TestStandaloneTransfer(base.FunctionalTestCase):
    def test_serve_and_send_resume_by_transfer_id(self):
        root = self.workdir
        src = os.path.join(root, "src")
        dst = os.path.join(root, "dst")
        base.make_file(os.path.join(src, "f"), 8 * MiB, seed=1)
        key = os.path.join(root, "key")
        with open(key, "w") as f:
            f.write(self.key)
        exe = os.path.join(base.VENV_BIN, "dtn-migrate-transfer")
        server = subprocess.Popen(
            [exe, "serve", "--root", dst, "--listen", "127.0.0.1:0",
             "--key-file", key], stdout=subprocess.PIPE, text=True)
        self.addCleanup(server.wait)
        self.addCleanup(server.terminate)
        # It binds a port of its own and says which.
        listening = server.stdout.readline()
        self.assertRegex(listening, r"^listening on 127.0.0.1:\d+$")
        port = int(listening.rsplit(":", 1)[1])
        send = [exe, "send", "--peer", "127.0.0.1:%d" % port, "--key-file",
                key, "--state-dir", os.path.join(root, "state"), "--root",
                src, "--transfer-id", "1" * 32, "--json", "f"]
        proc = run(send)
        self.assertEqual(0, proc.returncode, proc.stderr)
        status = json.loads(proc.stdout.splitlines()[-1])
        self.assertEqual("complete", status["state"])
        self.assertSame(os.path.join(src, "f"), os.path.join(dst, "f"))
        # Rerunning the same command is a no-op: the sink already has it.
        again = json.loads(run(send).stdout.splitlines()[-1])
        self.assertEqual("complete", again["state"])
        bad = run(send[:5] + [os.path.join(root, "wrong")] + send[6:8] +
                  ["--transfer-id", "2" * 32, "--json", "f"])
        self.assertNotEqual(0, bad.returncode)
