"""The playground, ``./tools/demo --serve``, driven as an operator does:
started, waited for, one ``openstack dtn migrate --wait`` from a shell
that sourced the printed openrc of cloud a's admin, the runbooks of
doc/source/admin/runbooks as written (each step from the openrc its
``cloud=X user=Y`` names), Horizon's login pages, Ctrl-C (SIGINT), and
nothing of it left behind.
"""

import json
import os
import queue
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import requests
import testtools
from testtools import content

import devcloud
# Not devcloud.playground: it selects oslo.service's threading backend.
from devcloud import openrc
from tests.functional.api import runbook
from tests.functional import base

MiB = base.MiB
TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
#: Seconds the playground may take to come up (and to go away).
READY_TIMEOUT = 240
STOP_TIMEOUT = 90
RUNBOOKS = ("protect-a-project.rst", "run-a-drill.rst", "fail-over.rst",
            "fail-back.rst")


class _Cloud:
    """A cloud of the playground, as tests.functional.api.runbook sees
    it (the runbook's ``cloud=`` names it).
    """

    def __init__(self, name):
        self.name = name


def _starttime(pid):
    """PID's start time (clock ticks since boot), or None once gone or a
    zombie.
    """
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else fields[19]


def _processes():
    """{pid: (ppid, start time, command line)} of every process."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(
                    "utf-8", "replace")
        except OSError:
            continue
        out[pid] = (int(fields[1]), fields[19], cmdline)
    return out


def descendants(root):
    """{pid: start time} of ROOT's descendants (ROOT included)."""
    procs = _processes()
    found = {root: procs.get(root, (0, None, ""))[1]}
    grew = True
    while grew:
        grew = False
        for pid, (ppid, start, _cmd) in procs.items():
            if ppid in found and pid not in found:
                found[pid] = start
                grew = True
    return found


def vhosts():
    return subprocess.run(["rabbitmqctl", "-q", "list_vhosts"],
                          stdout=subprocess.PIPE, text=True,
                          timeout=60).stdout.split()


def netns():
    proc = subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True, timeout=30)
    return sorted(proc.stdout.split("\n"))


class TestPlayground(testtools.TestCase):

    def setUp(self):
        super().setUp()
        for ok, why in (devcloud.available(), base.Broker.available()):
            if not ok:
                self.skipTest(why)
        try:
            import openstack_dashboard  # noqa: F401
        except ImportError:
            self.skipTest("horizon is not installed")
        if shutil.which("qemu-img") is None:
            self.skipTest("qemu-img is not installed")
        self.parent = tempfile.mkdtemp(prefix="dtnm-playground-test-",
                                       dir=base.data_root())
        self.addCleanup(shutil.rmtree, self.parent, ignore_errors=True)
        self.lines = []

    def start(self):
        """``python -m devcloud.demo --serve`` (what tools/demo runs);
        a thread collects its output lines into a queue.
        """
        self.logs = tempfile.mkdtemp(prefix="dtnm-playground-log-")
        self.addCleanup(shutil.rmtree, self.logs, ignore_errors=True)
        self.stderr_path = os.path.join(self.logs, "stderr")
        stderr = open(self.stderr_path, "w")
        self.addCleanup(stderr.close)
        proc = subprocess.Popen(
            [sys.executable, "-m", "devcloud.demo", "--serve", "--workdir",
             self.parent],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr,
            text=True, cwd=TOP)
        self.addCleanup(self._kill, proc)
        self.addOnException(lambda exc_info: self.addDetail(
            "playground-output", content.text_content(
                "\n".join(self.lines) + "\n--- stderr\n"
                + open(self.stderr_path).read())))
        self.out = queue.Queue()

        def read():
            for line in proc.stdout:
                self.out.put(line.rstrip("\n"))
            self.out.put(None)
        threading.Thread(target=read, daemon=True).start()
        return proc

    def _kill(self, proc):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def wait_line(self, pattern, timeout):
        """The match of the first line that matches PATTERN."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            self.assertGreater(left, 0, "no line matching %r in %d s"
                               % (pattern, timeout))
            try:
                line = self.out.get(timeout=left)
            except queue.Empty:
                continue
            self.assertIsNotNone(line, "the playground exited before a "
                                 "line matching %r" % pattern)
            self.lines.append(line)
            match = re.search(pattern, line)
            if match:
                return match

    def shell(self, openrc, command, timeout=300):
        """COMMAND in a shell that sourced OPENRC (no OS_* inherited)."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("OS_")}
        proc = subprocess.run(
            ["bash", "-c", ". %s && %s" % (openrc, command)], env=env,
            stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=timeout)
        self.addDetail("shell-%d" % len(self.getDetails()),
                       content.text_content(
                           "$ %s\nrc=%d\n%s\n--- stderr\n%s" % (
                               command, proc.returncode, proc.stdout,
                               proc.stderr)))
        return proc

    def openstack(self, persona, *args, cloud=None, check=True):
        """``openstack ARGS`` as PERSONA of CLOUD (a :class:`_Cloud`):
        from a shell that sourced its openrc (what runbook.run calls).
        """
        rc = os.path.join(self.rcdir, "%s-%s.openrc" % (cloud.name, persona))
        proc = self.shell(rc, "openstack %s" % " ".join(
            shlex.quote(a) for a in args))
        if check:
            self.assertEqual(0, proc.returncode, "openstack %s: %s%s" % (
                " ".join(args), proc.stdout, proc.stderr))
        return proc

    def run_runbooks(self, peer):
        """Every runbook, as written; {name: seconds}."""
        self.a, self.b = _Cloud("a"), _Cloud("b")
        tag = "rb-%s" % uuid.uuid4().hex[:6]
        path = os.path.join(self.logs, "web.raw")
        base.make_file(path, MiB + 7)
        values = {"peer": peer, "tag": tag, "policy": "rb-%s" % tag,
                  "file": path}
        took = {}
        for name in RUNBOOKS:
            t0 = time.monotonic()
            self.assertTrue(runbook.run(self, os.path.join(
                TOP, "doc", "source", "admin", "runbooks", name), values))
            took[name] = time.monotonic() - t0
        return took

    def test_serve_migrate_interrupt(self):
        t0 = time.monotonic()
        netns_before = netns()
        proc = self.start()
        rcdir = self.rcdir = self.wait_line(
            r"^%s (\S+) " % re.escape(openrc.READY), READY_TIMEOUT).group(1)
        out = "\n".join(self.lines)
        workdir = re.search(r"(?m)^work directory: (\S+)$", out).group(1)
        names = re.search(r"(?m)vhosts (\S+) and (\S+)$", out).groups()
        horizons = [re.search(r"(?m)^cloud %s: Horizon (http://\S+) " % c,
                              out).group(1) for c in "ab"]
        image = re.search(r"(?m)^image on cloud a: (playground-raw) ",
                          out).group(1)
        up = time.monotonic() - t0
        self.assertEqual(0, proc.poll() or 0)
        self.assertTrue(os.path.isdir(workdir))
        for name in names:
            self.assertIn(name, vhosts())
        for cloud in "ab":
            for persona in openrc.ORDER:
                self.assertTrue(os.path.exists(os.path.join(
                    rcdir, "%s-%s.openrc" % (cloud, persona))))
        running = descendants(proc.pid)

        # The real openstack executable, from the openrc's PATH.
        a_admin = os.path.join(rcdir, "a-admin.openrc")
        done = self.shell(a_admin, 'openstack dtn migrate %s --peer '
                          '"$DTN_PEER" --wait -f value -c ID' % image)
        self.assertEqual(0, done.returncode, done.stderr)
        migration_id = done.stdout.split()[-1]
        shown = self.shell(a_admin, "openstack dtn migration show %s -f "
                           "json" % migration_id)
        self.assertEqual(0, shown.returncode, shown.stderr)
        shown = json.loads(shown.stdout)
        self.assertEqual("complete", shown["state"])
        peer_image = shown["peer_image_id"]
        on_b = self.shell(os.path.join(rcdir, "b-admin.openrc"),
                          "openstack image show %s -f value -c status"
                          % peer_image)
        self.assertEqual("active", on_b.stdout.strip(), on_b.stderr)

        with open(a_admin) as f:
            peer = re.search(r"(?m)^export DTN_PEER=(\S+)$",
                             f.read()).group(1)
        runbooks = self.run_runbooks(peer)

        for url in horizons:
            resp = requests.get(url + "/auth/login/", timeout=60)
            self.assertEqual(200, resp.status_code)
            self.assertIn('id="loginBtn"', resp.text)

        # Ctrl-C: everything goes.
        t1 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        self.assertEqual(0, proc.wait(STOP_TIMEOUT))
        stopped = time.monotonic() - t1
        self.wait_line(r"^playground stopped: ", 10)
        left = [pid for pid, start in running.items()
                if _starttime(pid) == start]
        self.assertEqual([], left)
        self.assertEqual([], [cmd for _ppid, _st, cmd in
                              _processes().values() if workdir in cmd])
        self.assertFalse(os.path.exists(workdir))
        self.assertEqual([], os.listdir(self.parent))
        listed = vhosts()
        for name in names:
            self.assertNotIn(name, listed)
        self.assertEqual(netns_before, netns())
        with open("/proc/mounts") as f:
            self.assertNotIn(workdir, f.read())
        self.addDetail("timings", content.text_content(
            "up in %.1f s, runbooks %s, stopped in %.1f s, test %.1f s (%d "
            "processes)" % (up, ", ".join(
                "%s %.1f s" % kv for kv in sorted(runbooks.items())),
                stopped, time.monotonic() - t0, len(running))))
