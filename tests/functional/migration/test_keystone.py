"""A migration between two clouds whose Glances sit behind their own
real Keystone (fernet tokens), with tokens short enough to be renewed
during the migration.
"""

import os
import time

from tests.functional import migration

MiB = 1 << 20
#: keystoneauth renews a token with less than 120 s left: 125 s tokens
#: are replaced 5 s after they were issued, mid-migration.
TOKEN_SECONDS = 125


class TestKeystoneClouds(migration.MigrationTestCase):

    def test_migration_behind_keystone(self):
        ks_a = self.keystone(name="ks-a", region="RegionA",
                             token_expiration=TOKEN_SECONDS)
        ks_b = self.keystone(name="ks-b", region="RegionB",
                             token_expiration=TOKEN_SECONDS)
        a, b = self.clouds(keystone=(ks_a, ks_b))
        source = self.upload(a, data=os.urandom(96 * MiB), name="ks-image",
                             tags=["dr"], x_kind="keystone")
        began = time.monotonic()
        req = a.bus.engine.migrate(
            {}, b.agent_name, images=[source["id"]],
            options={"transfer_options": {"rate_limit": 12 * MiB}})
        rec = self.wait_migration(req["migrations"][0]["migration_id"])
        took = time.monotonic() - began
        self.assertEqual("complete", rec["state"], rec.get("error"))
        peer = self.peer_image(source, rec["transfer_id"])
        self.assertEqual(source["os_hash_value"], peer["os_hash_value"])
        self.assertEqual("keystone", peer["x_kind"])
        # The image belongs to cloud B's project, from B's own Keystone.
        self.assertEqual(b.glance.default_user()["project_id"],
                         peer["owner"])
        self.assertGreater(took, TOKEN_SECONDS - 120)
