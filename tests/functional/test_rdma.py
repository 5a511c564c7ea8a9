"""RDMA data plane between two agents (runs only where a device exists).

Both agents use ``[transfer] transport = rdma``, which refuses to fall
back to TCP, so a pass means the objects really moved by RDMA READ.
"""

import os

from dtn_migrate.transfer.transport import rdma
from tests.functional import base

MiB = base.MiB


class TestRdmaTransfer(base.FunctionalTestCase):
    transfer_conf = {"transport": "rdma", "object_size": 4 * MiB}

    def setUp(self):
        super().setUp()
        device, reason = rdma.probe()
        if device is None:
            self.skipTest("no RDMA: %s" % reason)
        device.close()

    def test_transfer_over_rdma(self):
        src, dst = self.pair()
        path = os.path.join(src.staging, "image.raw")
        base.make_file(path, 512 * MiB + 12345, seed=9)
        tid = self.start_transfer(src, dst, ["image.raw"])
        status = self.wait_for(src, tid)
        self.assertEqual("complete", status["state"], status.get("error"))
        self.assertSame(path, os.path.join(dst.staging, "image.raw"))
        self.assertIn("(RDMA,", src.log_text())
