"""A migration between two clouds whose Glances sit behind their own
real Keystone (fernet tokens), with tokens short enough to be renewed
during the migration: a fault proxy in front of each Keystone counts the
tokens its engine asks for.
"""

import os

from tests.functional.migration import harness as migration

#: The context of the tests' requests over the bus.
ADMIN = migration.ADMIN

MiB = 1 << 20
#: keystoneauth1 renews a token with less than 120 s left
#: (MIN_TOKEN_LIFE_SECONDS): a 125 s token ([token] expiration of the
#: devcloud Keystone) serves about 5 s, then the next request renews it.
TOKEN_SECONDS = 125
TOKEN_SERVES = TOKEN_SECONDS - 120
SIZE = 120 * MiB
#: The DTN link's rate limit: the transfer, and engine B's upload that
#: follows it, take at least SIZE / RATE = 15 s, well over TOKEN_SERVES
#: even when the import starts late (reconcile_interval = 5 s).
RATE = 8 * MiB
#: Engine A reads the image when the request comes (its first token),
#: then its download is answered 503 with Retry-After: 3, three times:
#: the data is read >= 9 s later, with a renewed token.
HELD = 3
RETRY_AFTER = 3


class TestKeystoneClouds(migration.MigrationTestCase):

    def test_migration_behind_keystone(self):
        self.assertGreater(SIZE / RATE, 2 * TOKEN_SERVES)
        self.assertGreater(HELD * RETRY_AFTER, TOKEN_SERVES)
        ks_a = self.keystone(name="ks-a", region="RegionA",
                             token_expiration=TOKEN_SECONDS)
        ks_b = self.keystone(name="ks-b", region="RegionB",
                             token_expiration=TOKEN_SECONDS)
        a, b = self.clouds(keystone=(ks_a, ks_b), keystone_proxy=True,
                           proxy_a=True)
        source = self.upload(a, data=os.urandom(SIZE), name="ks-image",
                             tags=["dr", "keystone"], x_kind="keystone")

        def tokens(cloud):
            return cloud.keystone_proxy.count(method="POST")
        # The engines have not authenticated yet.
        self.assertEqual((0, 0), (tokens(a), tokens(b)))
        a.proxy.fail(503, count=HELD, retry_after=RETRY_AFTER,
                     method="GET", path=r"/file$")
        req = a.bus.engine.migrate(
            ADMIN, b.agent_name, images=[source["id"]],
            options={"transfer_options": {"rate_limit": RATE}})
        rec = self.wait_migration(req["migrations"][0]["migration_id"])
        peer = self.assertMigrated(rec, source)
        self.assertEqual(["dr", "keystone"], sorted(peer["tags"]))
        self.assertEqual("keystone", peer["x_kind"])
        # The image belongs to cloud B's project, from B's own Keystone.
        self.assertEqual(b.glance.default_user()["project_id"],
                         peer["owner"])
        self.assertEqual(HELD, a.proxy.count("fail", "GET"))
        # Each engine authenticated, then renewed its token during the
        # migration; every token request went through (none refused).
        for cloud in (a, b):
            issued = [(m, p, action) for m, p, action
                      in list(cloud.keystone_proxy.log) if m == "POST"]
            self.assertGreater(len(issued), 1, (cloud.name, issued))
            self.assertEqual({("POST", "/v3/auth/tokens", "pass")},
                             set(issued), cloud.name)
