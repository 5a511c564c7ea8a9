"""Acceptance 4: a byte is corrupted in flight by a relay between the two
agents; the engine detects it, resends the object, and the file is
correct.  A damaged frame header (rather than object bytes) costs the
connection, which the source re-establishes.
"""

import os

from tests.functional import base
from tests import relay as relay_mod

MiB = base.MiB


class TestCorruption(base.FunctionalTestCase):
    transfer_conf = {"object_size": MiB, "streams": 2,
                     "reconnect_initial_interval": 0.1}

    def _pair_through_relay(self):
        src_name, dst_name = "src-corrupt", "dst-corrupt"
        dst_port = base.free_port()
        relay = relay_mod.Relay(("127.0.0.1", dst_port))
        self.addCleanup(relay.close)
        src = self.agent(src_name, {dst_name: ("127.0.0.1", relay.port)})
        dst = self.agent(dst_name, {src_name: ("127.0.0.1", src.port)},
                         port=dst_port)
        for a in (dst, src):
            a.start()
        for a in (dst, src):
            a.wait_ready(self.api)
        return src, dst, relay

    def test_corrupted_object_bytes_are_resent(self):
        src, dst, relay = self._pair_through_relay()
        path = os.path.join(src.staging, "image.raw")
        base.make_file(path, 64 * MiB, seed=5)
        # Well inside the object bytes of the first data stream to carry
        # 5 MiB (frames are 16 + 48 bytes per MiB of payload).
        relay.corrupt_once(5 * MiB + 4321)
        tid = self.start_transfer(src, dst, ["image.raw"])
        status = self.wait_for(src, tid)
        self.assertEqual("complete", status["state"], status.get("error"))
        self.assertEqual(1, relay.corrupted)
        incoming = self.api.get_incoming({}, dst.name, tid)
        self.assertEqual(1, incoming["objects_corrupt"])
        self.assertEqual(1, status["objects_corrupt"])
        self.assertEqual(1, status["objects_resent"])
        self.assertEqual(1, status["attempts"])
        self.assertSame(path, os.path.join(dst.staging, "image.raw"))
        self.assertIn("failed its checksum", dst.log_text())

    def test_corrupted_frame_header_costs_only_a_reconnect(self):
        src, dst, relay = self._pair_through_relay()
        path = os.path.join(src.staging, "image.raw")
        base.make_file(path, 16 * MiB, seed=6)
        # Byte 20 of the first connection is inside its CONNECT body: the
        # frame fails its CRC and the sink drops that connection.
        relay.corrupt_once(20)
        tid = self.start_transfer(src, dst, ["image.raw"])
        status = self.wait_for(src, tid)
        self.assertEqual("complete", status["state"], status.get("error"))
        self.assertEqual(1, relay.corrupted)
        self.assertGreaterEqual(status["attempts"], 2)
        self.assertSame(path, os.path.join(dst.staging, "image.raw"))
        self.assertIn("fails its CRC", dst.log_text())
