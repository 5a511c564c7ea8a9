"""Loading pyverbs as rdma-core v44 and v59 lay it out.

rdma-core v59 removed ``pyverbs.enums``; built with Cython 3.1 its
``pyverbs.libibverbs_enums`` has only qualified names.  Both layouts must
give a working device (over the fake pyverbs, which has the real enums),
and a pyverbs that is installed but unusable must say "pyverbs
incompatible: ...", which the functional runs do not let pass as a skip,
never "no RDMA ...".
"""

import sys
from unittest import mock


from dtn_migrate.transfer.transport import rdma
from tests.unit.transfer.transport import fakeverbs
from tests.unit import testcase


class LoadTest(testcase.TestCase):

    def need_pyverbs(self):
        if fakeverbs.REAL_ENUMS is None:         # pragma: no cover
            self.skipTest("pyverbs is not importable")

    def test_v44_and_v59_layouts_probe_alike(self):
        self.need_pyverbs()
        for v59 in (False, True):
            fabric = fakeverbs.Fabric()
            with fakeverbs.install(fabric, v59=v59):
                dev, reason = rdma.probe(gid_index=None)
                self.assertEqual("", reason, "v59=%s" % v59)
                self.assertEqual(1, dev.gid_index)       # RoCE v2
                pool = dev.make_pool(2, 4096)
                self.assertEqual(fakeverbs.REAL_ENUMS.IBV_ACCESS_LOCAL_WRITE
                                 | fakeverbs.REAL_ENUMS.IBV_ACCESS_REMOTE_READ
                                 | fakeverbs.REAL_ENUMS
                                 .IBV_ACCESS_RELAXED_ORDERING,
                                 fabric.mrs[0].access)
                pool.close()
                dev.close()

    def test_incompatible_is_not_no_rdma(self):
        self.need_pyverbs()
        fabric = fakeverbs.Fabric()
        for missing in (("enums", "libibverbs_enums"), ("qp",),
                        ("pyverbs_error",)):
            with fakeverbs.install(fabric, missing=missing):
                dev, reason = rdma.probe()
            self.assertIsNone(dev)
            self.assertTrue(reason.startswith("pyverbs incompatible: "),
                            reason)
            self.assertFalse(reason.startswith("no RDMA"), reason)

    def test_absent_pyverbs_is_no_rdma(self):
        with mock.patch.dict(sys.modules, {"pyverbs": None}):
            dev, reason = rdma.probe()
        self.assertIsNone(dev)
        self.assertTrue(reason.startswith("no RDMA device: pyverbs is not "
                                          "installed"), reason)
