"""RDMA data plane between two agents (runs only where a device exists).

Both agents use ``[transfer] transport = rdma``, which refuses to fall
back to TCP, so a pass means the objects really moved by RDMA READ.

Everywhere: the installed pyverbs, loaded in a fresh agent interpreter,
is compatible with this data plane (a device may be missing, pyverbs may
not be unusable).
"""

import os
import subprocess
import sys

import testtools

from dtn_migrate.transfer.transport import rdma
from tests.functional import base

MiB = base.MiB


class TestRdmaTransfer(base.FunctionalTestCase):
    transfer_conf = {"transport": "rdma", "object_size": 4 * MiB}

    def setUp(self):
        super().setUp()
        device, reason = rdma.probe()
        if device is None:
            # probe's own reason: "no RDMA device: ..." may skip under
            # DTN_REQUIRE_ALL=1, "pyverbs incompatible: ..." may not.
            self.skipTest(reason)
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


class TestInstalledPyverbs(testtools.TestCase):

    def test_agent_interpreter_loads_pyverbs(self):
        # What an agent does at start, in a process of its own.
        out = subprocess.run(
            [sys.executable, "-c",
             "from dtn_migrate.transfer.transport import rdma\n"
             "dev, reason = rdma.probe()\n"
             "print(reason or 'device ' + dev.describe())"],
            capture_output=True, text=True, timeout=60, check=True)
        reason = out.stdout.strip()
        self.assertFalse(reason.startswith("pyverbs incompatible"), reason)
        if reason.startswith("no RDMA device: pyverbs is not installed"):
            self.skipTest(reason)
        self.assertTrue(reason.startswith("device ") or reason.startswith(
            "no RDMA device: pyverbs get_device_list failed") or
            reason.startswith("no RDMA device: the device list is empty"),
            reason)
