"""Whole migrations between two real clouds."""

import hashlib
import os

from dtn_migrate import devcloud
from tests.functional import migration

MiB = 1 << 20


def sha512_file(path):
    h = hashlib.sha512()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(MiB), b""):
            h.update(chunk)
    return h.hexdigest()


class TestMigration(migration.MigrationTestCase):

    def assertMigrated(self, rec, source):
        self.assertEqual("complete", rec["state"], rec.get("error"))
        peer = self.peer_image(source, rec["transfer_id"])
        self.assertEqual("active", peer["status"])
        self.assertEqual(source["os_hash_value"], peer["os_hash_value"])
        self.assertEqual(source["size"], peer["size"])
        for key in ("disk_format", "container_format", "min_disk",
                    "min_ram"):
            self.assertEqual(source[key], peer[key], key)
        self.assertEqual(sorted(source["tags"]), sorted(peer["tags"]))
        for key, value in source.items():
            if key.startswith("x_"):
                self.assertEqual(value, peer.get(key), key)
        self.assertEqual(peer["id"], rec["peer_image"]["image_id"])
        return peer

    def test_qcow2_image_over_nfs(self):
        a, b = self.clouds(nfs=True)
        path = devcloud.make_qcow2(os.path.join(self.workdir, "disk.qcow2"),
                                   int(os.environ.get("DTNM_QCOW2_MIB",
                                                      "1024")) * MiB,
                                   virtual_size=2 << 30)
        source = self.upload(a, path, name="dr-disk", disk_format="qcow2",
                             container_format="bare", min_disk=2,
                             min_ram=512, tags=["dr", "gold"],
                             x_os_distro="debian", x_hw_disk_bus="virtio")
        self.assertEqual(sha512_file(path), source["os_hash_value"])
        req = self.migrate(images=[source["id"]])
        [m] = req["migrations"]
        rec = self.wait_migration(m["migration_id"])
        self.assertMigrated(rec, source)
        events = a.bus.events(m["migration_id"])
        self.assertIn("dtn_migrate.migration.start", events)
        self.assertIn("dtn_migrate.migration.end", events)
        # Staged files are gone on both exports.
        for cloud in (a, b):
            left = [f for _d, _s, fs in os.walk(cloud.staging_dir)
                    for f in fs if not f.startswith(".")]
            self.assertEqual([], left, cloud.name)

    def test_twenty_images_by_tag_on_mariadb(self):
        a, b = self.clouds(persistence=(self.mariadb("a"),
                                        self.mariadb("b")))
        sources = []
        for i in range(20):
            data = os.urandom((1 + i % 4) * MiB + i)
            sources.append(self.upload(
                a, data=data, name="small-%02d" % i, tags=["dr-set"],
                min_ram=64 * (i % 3), x_index=str(i)))
        self.upload(a, data=b"not me", name="other", tags=["keep-here"])
        req = self.a.bus.engine.migrate({}, b.agent_name,
                                        selector={"tag": "dr-set"})
        self.assertEqual(20, len(req["migrations"]))
        recs = self.wait_request(req["request_id"])
        by_image = {r["image_id"]: r for r in recs}
        for source in sources:
            self.assertMigrated(by_image[source["id"]], source)
        names = sorted(i["name"] for i in b.admin().images.list())
        self.assertEqual(["small-%02d" % i for i in range(20)], names)
        # The same request again runs nothing twice.
        again = self.a.bus.engine.migrate({}, b.agent_name,
                                          selector={"tag": "dr-set"})
        self.assertTrue(all(m.get("reused") for m in again["migrations"]))
        self.assertEqual(20, len(list(b.admin().images.list())))

    def test_serial_keep_id_visibility(self):
        a, b = self.clouds()
        source = self.upload(a, data=os.urandom(24 * MiB), name="serial",
                             tags=["x"], visibility="shared")
        req = self.a.bus.engine.migrate(
            {}, b.agent_name, images=[source["id"]],
            options={"mode": "serial", "keep_id": True,
                     "visibility": "private"})
        rec = self.wait_migration(req["migrations"][0]["migration_id"])
        peer = self.assertMigrated(rec, source)
        self.assertEqual(source["id"], peer["id"])
        self.assertEqual("private", peer["visibility"])
        self.assertEqual("serial", rec["mode"])
