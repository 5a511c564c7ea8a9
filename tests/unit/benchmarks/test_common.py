"""benchmarks.common: processes' CPU and memory, and servers on ports
of their own."""

import os
import socket
import subprocess
import sys
import tempfile
from unittest import mock

from benchmarks import common
from tests.unit.benchmarks import SERVER
from tests.unit import testcase


class ProcessTest(testcase.TestCase):
    def test_this_process(self):
        stats = common.proc_stats()
        me = os.getpid()
        self.assertIn(me, common.tree(me, stats))
        # The interpreter's start and imports took some.
        self.assertGreater(common.tree_cpu(me, stats), 0)
        self.assertGreater(common.group_cpu(os.getpgid(me), stats), 0)
        self.assertIsNone(common.tree_cpu(-1, stats))
        self.assertGreater(common.peak_rss(me), 1 << 20)
        self.assertIsNone(common.peak_rss(-1))

    def test_the_port_a_dtn_migrate_server_took(self):
        self.assertEqual(40123, common.listening_port(
            "listening on 192.0.2.2:40123\n"))
        self.assertIsNone(common.listening_port("starting\n"))
        self.assertIsNone(common.listening_port("listening on x:y"))


class OwnPortTest(testcase.TestCase):
    """A server that cannot listen on port 0 runs on a port it bound
    itself: when another process took the port first, on another one.
    """

    def blocker(self):
        """A socket listening on a port of its own: (socket, port)."""
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen()
        self.addCleanup(s.close)
        return s, s.getsockname()[1]

    def server(self, port):
        log = tempfile.NamedTemporaryFile("w+", prefix="dtnm-bt-",
                                          delete=False)
        self.addCleanup(os.unlink, log.name)
        proc = subprocess.Popen([sys.executable, "-c", SERVER, str(port)],
                                stdout=log, stderr=subprocess.STDOUT)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        return proc, log.name

    def test_retried_on_another_port_while_taken(self):
        tried = []

        def start(port):
            tried.append(port)
            if len(tried) < 3:
                raise common.AddressInUse("taken")
            return "server"
        rng = mock.Mock(randrange=mock.Mock(side_effect=[21000, 22000]))
        self.assertEqual(("server", 22000),
                         common.on_own_port(start, first=5201, rng=rng))
        self.assertEqual([5201, 21000, 22000], tried)
        tried[:] = []
        rng = mock.Mock(randrange=mock.Mock(return_value=21000))
        self.assertRaises(common.AddressInUse, common.on_own_port, start,
                          attempts=2, rng=rng)
        self.assertEqual([21000, 21000], tried)

    def test_a_server_that_lost_its_port_is_told_apart(self):
        _, taken = self.blocker()
        proc, log = self.server(taken)
        # Another process's socket accepts on the port all along.
        with self.assertRaises(common.AddressInUse) as got:
            common.wait_listening(proc, taken, log, timeout=20)
        self.assertIn("Address already in use", str(got.exception))

    def test_a_server_on_its_own_port(self):
        s, port = self.blocker()
        s.close()
        proc, log = self.server(port)
        common.wait_listening(proc, port, [log], timeout=20)
        self.assertTrue(common.listens(proc.pid, port))
        _, other = self.blocker()
        self.assertFalse(common.listens(proc.pid, other))

    def test_a_server_that_never_listens(self):
        proc = subprocess.Popen([sys.executable, "-c",
                                 "import time; time.sleep(60)"])
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        _, taken = self.blocker()
        with self.assertRaises(common.ServerError) as got:
            common.wait_listening(proc, taken, timeout=0.3)
        self.assertNotIsInstance(got.exception, common.AddressInUse)
        proc.kill()
        proc.wait()
        with self.assertRaises(common.ServerError) as got:
            common.wait_listening(proc, taken)
        self.assertIn("exited", str(got.exception))
