"""The agent's RDMA probe says loudly when pyverbs is unusable."""

import types


from dtn_migrate.agent import service
from tests.unit.transfer.transport import fakeverbs
from tests.unit import testcase


def conf(gid_index=None):
    return types.SimpleNamespace(rdma=types.SimpleNamespace(
        device=None, port=1, gid_index=gid_index))


class ProbeRdmaTest(testcase.TestCase):

    def setUp(self):
        super().setUp()
        if fakeverbs.REAL_ENUMS is None:         # pragma: no cover
            self.skipTest("pyverbs is not importable")

    def probe(self, transport, **install):
        cfg = types.SimpleNamespace(transport=transport)
        with fakeverbs.install(fakeverbs.Fabric(), **install), \
                self.assertLogs("dtn_migrate.agent.service") as logs:
            dev = service.probe_rdma(conf(), cfg)
        if dev is not None:
            self.addCleanup(dev.close)
        return dev, logs.records

    def test_incompatible_pyverbs_is_a_warning(self):
        dev, records = self.probe("auto", missing=("libibverbs_enums",
                                                   "enums"))
        self.assertIsNone(dev)
        self.assertEqual("WARNING", records[0].levelname)
        self.assertIn("pyverbs incompatible", records[0].getMessage())

    def test_device_found_with_a_roce_v2_gid(self):
        dev, records = self.probe("auto")
        self.assertEqual(1, dev.gid_index)
        self.assertIn("RDMA data plane on fake0", records[0].getMessage())
