"""Acceptance 1: agents in separate processes move a 2 GiB file, and
separately 1000 x 1 MiB files, bit-identical (sha512).
"""

import os

from tests.functional import base

MiB = base.MiB


class TestTransfer(base.FunctionalTestCase):
    def test_2gib_file(self):
        src, dst = self.pair()
        path = os.path.join(src.staging, "image.raw")
        base.make_file(path, 2048 * MiB, seed=1)
        tid = self.start_transfer(src, dst, ["image.raw"])
        status = self.wait_for(src, tid)
        self.assertEqual("complete", status["state"], status.get("error"))
        self.assertEqual(2048 * MiB, status["bytes_done"])
        self.assertEqual(0, status["bytes_resent"])
        received = os.path.join(dst.staging, "image.raw")
        self.assertSame(path, received)
        # The sha512 the sink verified is the real one.
        self.assertEqual(base.sha512(path), status["files"][0]["sha512"])
        incoming = self.api.get_incoming({}, dst.name, tid)
        self.assertEqual(1, incoming["files_done"])
        self.assertEqual(2048 * MiB, incoming["bytes_received"])
        self.assertEqual("done", incoming["files"]["image.raw"]["state"])

    def test_1000_small_files(self):
        src, dst = self.pair()
        for i in range(1000):
            base.make_file(os.path.join(src.staging, "set", "f%04d" % i),
                           MiB, seed=i)
        tid = self.start_transfer(src, dst, ["set"])
        status = self.wait_for(src, tid)
        self.assertEqual("complete", status["state"], status.get("error"))
        self.assertEqual(1000, status["files_done"])
        for i in range(1000):
            name = os.path.join("set", "f%04d" % i)
            self.assertEqual(base.sha512(os.path.join(src.staging, name)),
                             base.sha512(os.path.join(dst.staging, name)),
                             name)
        self.assertEqual([], os.listdir(os.path.join(dst.staging,
                                                     ".dtn-partial")))
