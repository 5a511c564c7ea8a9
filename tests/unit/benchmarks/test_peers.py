"""benchmarks.peers: the tools' command lines."""

import unittest

from benchmarks import peers


class CommandLineTest(unittest.TestCase):
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
