"""Acceptance 4: a byte is corrupted in flight by a relay between the two
agents; the engine detects it, resends the object, and the file is
correct.  A damaged frame header (rather than object bytes) costs the
connection, which the source re-establishes.  Many damaged objects in
one attempt never leave the source's window full with nothing in flight.

The two agents and the relay between them are shared by the class.
"""

import os

from tests.functional import base
from tests.functional.transfer import shared

MiB = base.MiB


class TestCorruption(shared.SharedPairTestCase):
    names = ("src-corrupt", "dst-corrupt")
    with_relay = True
    # A window of four objects: before the NACK fix, four damaged objects
    # in one attempt hung the transfer for good.
    transfer_conf = {"object_size": MiB, "streams": 2,
                     "window_bytes": 4 * MiB, "max_object_retries": 200,
                     "reconnect_initial_interval": 0.1}

    def setUp(self):
        super().setUp()
        with self.relay.lock:
            self.relay.corrupt_after = None
            self.relay.corrupt_left = 0
            self.relay.corrupted = 0

    def send(self, size, seed):
        name = "image-%d.raw" % seed
        path = os.path.join(self.src.staging, name)
        base.make_file(path, size, seed=seed)
        self.addCleanup(os.unlink, path)
        tid = self.start_transfer(self.src, self.dst, [name])
        status = self.wait_for(self.src, tid, timeout=240)
        self.assertEqual("complete", status["state"], status.get("error"))
        self.assertSame(path, os.path.join(self.dst.staging, name))
        return tid, status

    def test_corrupted_object_bytes_are_resent(self):
        # Well inside the object bytes of the first data stream to carry
        # 5 MiB (frames are 16 + 48 bytes per MiB of payload).
        self.relay.corrupt_once(5 * MiB + 4321)
        tid, status = self.send(64 * MiB, 5)
        self.assertEqual(1, self.relay.corrupted)
        incoming = self.api.get_incoming({}, self.dst.name, tid)
        self.assertEqual(1, incoming["objects_corrupt"])
        self.assertEqual(1, status["objects_corrupt"])
        self.assertEqual(1, status["objects_resent"])
        self.assertEqual(1, status["attempts"])
        self.assertIn("failed its checksum", self.dst.log_text())

    def test_corrupted_frame_header_costs_only_a_reconnect(self):
        # Byte 20 of the first connection is inside its CONNECT body: the
        # frame fails its CRC and the sink drops that connection.
        self.relay.corrupt_once(20)
        tid, status = self.send(16 * MiB, 6)
        self.assertEqual(1, self.relay.corrupted)
        self.assertGreaterEqual(status["attempts"], 2)
        self.assertIn("fails its CRC", self.dst.log_text())

    def test_a_hundred_damaged_objects_never_hang_the_window(self):
        # One flip per object copy on both data streams: every copy sent
        # while the fault lasts is damaged, 100 in all, many of them
        # resends, far more than the window holds.
        self.relay.corrupt_many(MiB + 4099, 100)
        tid, status = self.send(64 * MiB, 7)
        self.assertEqual(100, self.relay.corrupted)
        incoming = self.api.get_incoming({}, self.dst.name, tid)
        # A flip that lands in a frame header costs a connection instead.
        self.assertGreaterEqual(incoming["objects_corrupt"], 90)
        self.assertGreaterEqual(status["objects_corrupt"], 90)
        self.assertGreaterEqual(status["objects_resent"], 90)
