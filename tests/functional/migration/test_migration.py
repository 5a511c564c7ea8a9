"""Whole migrations between two real clouds."""

import hashlib
import os
import re
import sys

from testtools import content

import devcloud
from tests.functional.migration import harness as migration

#: The context of the tests' requests over the bus.
ADMIN = migration.ADMIN

MiB = 1 << 20
#: The size test_qcow2_image_over_nfs is about; DTNM_QCOW2_MIB shrinks it
#: for a quick local run (the test says so in its output).
QCOW2_MIB = 1024


def sha512_file(path):
    h = hashlib.sha512()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(MiB), b""):
            h.update(chunk)
    return h.hexdigest()


class TestMigration(migration.MigrationTestCase):

    def test_qcow2_image_over_nfs(self):
        a, b = self.clouds(nfs=True)
        mib = int(os.environ.get("DTNM_QCOW2_MIB", QCOW2_MIB))
        path = devcloud.make_qcow2(os.path.join(self.workdir, "disk.qcow2"),
                                   mib * MiB, virtual_size=2 << 30)
        size = os.path.getsize(path)
        note = "qcow2 image: %d bytes (%.1f MiB)" % (size, size / MiB)
        if mib != QCOW2_MIB:
            note += ", shrunk by DTNM_QCOW2_MIB=%d from %d MiB" % (
                mib, QCOW2_MIB)
            sys.stderr.write("%s: %s\n" % (self.id(), note))
        self.addDetail("image-size", content.text_content(note))
        source = self.upload(a, path, name="dr-disk", disk_format="qcow2",
                             container_format="bare", min_disk=2,
                             min_ram=512, tags=["dr", "gold"],
                             x_os_distro="debian", x_hw_disk_bus="virtio")
        self.assertEqual(size, source["size"])
        self.assertEqual(sha512_file(path), source["os_hash_value"])
        req = self.migrate(images=[source["id"]])
        [m] = req["migrations"]
        rec = self.wait_migration(m["migration_id"])
        self.assertMigrated(rec, source)
        self.assertEqual("pipelined", rec["mode"])
        # The end notification may go out after the record is saved, and
        # B removes its received files after it reported the import (and
        # A completed): wait for both.
        self.wait_until(lambda: "dtn_migrate.migration.end" in
                        a.bus.events(m["migration_id"]),
                        "the end notification", timeout=60)
        self.assertIn("dtn_migrate.migration.start",
                      a.bus.events(m["migration_id"]))
        self.wait_until(lambda: not a.staged_files() and
                        not b.staged_files(),
                        "both exports to be empty", timeout=60)

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
        req = self.a.bus.engine.migrate(ADMIN, b.agent_name,
                                        selector={"tag": "dr-set"})
        self.assertEqual(20, len(req["migrations"]))
        recs = self.wait_request(req["request_id"])
        by_image = {r["image_id"]: r for r in recs}
        self.assertEqual(sorted(s["id"] for s in sources), sorted(by_image))
        for source in sources:
            self.assertMigrated(by_image[source["id"]], source)
        names = sorted(i["name"] for i in b.admin().images.list())
        self.assertEqual(["small-%02d" % i for i in range(20)], names)
        # The same request again runs nothing twice: it answers with the
        # 20 migrations that exist.
        again = self.a.bus.engine.migrate(ADMIN, b.agent_name,
                                          selector={"tag": "dr-set"})
        self.assertEqual(20, len(again["migrations"]))
        self.assertEqual([True] * 20,
                         [m.get("reused") for m in again["migrations"]])
        self.assertEqual(sorted(r["migration_id"] for r in recs),
                         sorted(m["migration_id"]
                                for m in again["migrations"]))
        self.assertEqual(20, len(self.a.bus.engine.list_migrations(ADMIN)))
        self.assertEqual(20, len(list(b.admin().images.list())))

    def test_serial_keep_id_visibility(self):
        a, b = self.clouds()
        source = self.upload(a, data=os.urandom(24 * MiB), name="serial",
                             tags=["x"], visibility="shared")
        req = self.a.bus.engine.migrate(
            ADMIN, b.agent_name, images=[source["id"]],
            options={"mode": "serial", "keep_id": True,
                     "visibility": "private"})
        rec = self.wait_migration(req["migrations"][0]["migration_id"])
        self.assertMigrated(rec, source, keep_id=True, visibility="private")
        self.assertEqual("serial", rec["mode"])

    def test_pipelined_stages_follow_pushed_events(self):
        # Agents push watermarks, transfer status and the peer's reports
        # to their engines; the engines' stages ask their agent only
        # for a first value (or when nothing came for a while).
        a, b = self.clouds()
        source = self.upload(a, data=os.urandom(24 * MiB), name="pushed")
        req = self.a.bus.engine.migrate(ADMIN, b.agent_name,
                                        images=[source["id"]],
                                        options={"mode": "pipelined"})
        rec = self.wait_migration(req["migrations"][0]["migration_id"])
        self.assertMigrated(rec, source)
        for cloud in (a, b):
            # B's import ends (and logs its counts) after it reported
            # the image, which is what completed A's migration.
            found = self.wait_until(
                lambda c=cloud: re.findall(
                    r"agent events so far: (\d+) pushed, (\d+) asked for",
                    c.engine.log_text()),
                "%s to log its event counts" % cloud.engine.name,
                timeout=60)
            pushed, asked = map(int, found[-1])
            self.addDetail("events-%s" % cloud.engine.name,
                           content.text_content("%d pushed, %d asked for"
                                                % (pushed, asked)))
            self.assertGreater(pushed, 0)
            # Each engine asks for a first value of the two keys it
            # follows at most (A: the transfer's status and the peer's
            # report; B: the watermarks of the descriptor and the image
            # data), and never again: the migration is shorter than
            # event_fallback_interval.  (Not ``asked < pushed``: on a
            # fast machine the agent may push as few events as the
            # engine asked for.)
            self.assertLessEqual(asked, 2)
