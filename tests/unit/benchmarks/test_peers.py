"""benchmarks.peers: the tools' command lines, and servers that bind a
port of their own."""

import os
import shutil
import socket
import sys
import tempfile
from unittest import mock

from benchmarks import peers
from tests.unit.benchmarks import SERVER
from tests.unit import testcase


class FakeServer(peers.Peer):
    name = "fake"

    def start_server(self):
        self.spawn_server([sys.executable, "-c", SERVER, self.port])
        self.wait_server()


class CommandLineTest(testcase.TestCase):
    def test_verified_mode_checks_sha512_after_the_copy(self):
        peer = peers.make_peer('gridftp-verify', parallel=2)
        argv = [str(a) for a in peer._base()]
        self.assertEqual('gridftp-verify', peer.name)
        self.assertEqual(['-verify-checksum', '-checksum-alg', 'SHA512'],
                         argv[-3:])
        self.assertEqual(['-p', '2'], argv[2:4])
        plain = [str(a) for a in
                 peers.make_peer('gridftp', parallel=2)._base()]
        self.assertNotIn('-verify-checksum', plain)
        self.assertEqual(plain, argv[:len(plain)])


class OwnPortTest(testcase.TestCase):
    """A tool's server on loopback gets a port nobody else holds: when
    the port it was given is taken meanwhile (here by a socket of this
    test), it runs on another, and the client reaches that server.
    """

    def setUp(self):
        super().setUp()
        self.work = tempfile.mkdtemp(prefix="dtnm-bt-")
        self.addCleanup(shutil.rmtree, self.work, True)
        self.blocker = socket.socket()
        self.blocker.bind(("127.0.0.1", 0))
        self.blocker.listen()
        self.addCleanup(self.blocker.close)
        self.taken = self.blocker.getsockname()[1]

    def test_a_taken_port_is_not_the_servers(self):
        free = socket.socket()
        free.bind(("127.0.0.1", 0))
        other = free.getsockname()[1]
        free.close()
        peer = FakeServer()
        self.addCleanup(peer.teardown)
        # The port handed over is taken: by a race, or on purpose here.
        with mock.patch.object(peers.netns, "free_port",
                               return_value=self.taken), \
                mock.patch("random.randrange",
                           side_effect=[self.taken, other]):
            peer.setup(None, self.work, os.path.join(self.work, "dst"))
        self.assertNotEqual(self.taken, peer.port)
        self.assertIsNone(peer.server.poll())
        with socket.create_connection(("127.0.0.1", peer.port), 5) as c:
            self.assertEqual(str(peer.server.pid).encode(), c.recv(32))
