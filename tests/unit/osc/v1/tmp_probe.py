from osc_lib import exceptions
from dtn_migrate.osc.v1 import migrations, peers, protection_policies as pp
from tests.unit.osc.v1 import test_real_api
L = "n" * 5000
class T(test_real_api.TestCommandsOnRealApi):
    def test_x(self):
        for cls, argv in ((migrations.Migrate, [L, "--peer", "b"]),
                          (migrations.Migrate, ["cirros", "--peer", L]),
                          (migrations.Migrate, ["--tag", L, "--peer", "b"]),
                          (migrations.Migrate, ["--property", L + "=1", "--peer", "b"]),
                          (migrations.Migrate, ["--property", "a=" + L, "--peer", "b"]),
                          (migrations.Migrate, ["cirros", "--peer", "b", "--request-id", "r"]),
                          (migrations.Migrate, ["cirros", "--peer", "b", "--request-id", "r"*40]),
                          (migrations.ListMigration, ["--request-id", "r"]),
                          (migrations.ListMigration, ["--peer", L]),
                          (migrations.ListMigration, ["--image", L]),
                          (migrations.ShowMigration, [L]),
                          (peers.ShowPeer, [L]),
                          (pp.CreatePolicy if hasattr(pp, "CreatePolicy") else pp.CreateProtectionPolicy, [L, "--peer", "b", "--tag", "x"]),
                          ):
            try:
                print(cls.__name__, argv[:1][0][:10], "->", self.run_command(cls, argv))
            except Exception as e:
                s = str(e)
                print(cls.__name__, argv[0][:10], "EXC", type(e).__name__, len(s), s.count(L[:100]), s[:300])
