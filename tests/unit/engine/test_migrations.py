"""Two engines (source and peer) with in-memory Glances and fake agents:
the flows, pipelining, dedupe, resume and errors.
"""

import hashlib
import os
import shutil
import tempfile
import time

from oslo_config import cfg
import testtools

from dtn_migrate.conf import engine as engine_conf
from dtn_migrate.conf import staging as staging_conf
from dtn_migrate.engine import migrations
from dtn_migrate.engine import persistence
from dtn_migrate.engine import resources
from dtn_migrate import exception
from dtn_migrate.staging import localfs
from tests.unit.engine import fakes


def make_conf(host, db):
    conf = cfg.ConfigOpts()
    engine_conf.register_opts(conf)
    staging_conf.register_opts(conf)
    conf([], project="dtn-migrate-test")
    conf.set_override("agent_host", host, "engine")
    conf.set_override("persistence_connection", db, "engine")
    conf.set_override("poll_interval", 0.05, "engine")
    conf.set_override("progress_interval", 0.5, "engine")
    conf.set_override("stall_timeout", 20, "engine")
    conf.set_override("block_size", 65536, "staging")
    conf.set_override("commit_interval_bytes", 256 << 10, "staging")
    conf.set_override("free_space_margin", "0", "staging")
    return conf


class TestMigrations(testtools.TestCase):
    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="dtnm-engine-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        roots = {}
        for host in ("dtn-a", "dtn-b"):
            roots[host] = os.path.join(self.tmp, host)
            os.makedirs(roots[host])
        self.agents = fakes.FakeAgents(roots)
        self.glance_a = fakes.FakeImages("a")
        self.glance_b = fakes.FakeImages("b")
        self.a = self.engine("dtn-a", self.glance_a)
        self.b = self.engine("dtn-b", self.glance_b)
        self.agents.engines["dtn-b"] = self.b
        self.addCleanup(self.quiesce)

    def quiesce(self):
        """Leave no flow (and no copy thread) running after a test."""
        # An import may start after the first pass (the fake agent tells
        # engine B late): cancel until both engines are idle.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for engine in (self.a, self.b):
                for rec in engine.list():
                    if rec["state"] in migrations.ACTIVE_STATES:
                        engine.cancel(rec["migration_id"])
            if all(engine.wait_idle(0.5) for engine in (self.a, self.b)):
                return
        self.fail("migrations still running after the test")

    def engine(self, host, images, db=None):
        db = db or "sqlite:///%s/%s.sqlite" % (self.tmp, host)
        conf = make_conf(host, db)
        store = persistence.Store(db)
        self.addCleanup(store.close)
        res = resources.Resources(
            conf, images, self.agents,
            localfs.LocalBackend(self.agents.roots[host]))
        return migrations.Migrations(conf, store, res)

    def image(self, size=3 << 20, **fields):
        data = os.urandom(size)
        fields.setdefault("tags", ["dr", "gold"])
        fields.setdefault("os_distro", "debian")
        return self.glance_a.add(data, **fields)

    def run_request(self, images, **options):
        req = self.a.request("b", images=images, options=options or None)
        self.assertTrue(self.a.wait_idle(60))
        self.assertTrue(self.b.wait_idle(60))
        return [self.a.get(m["migration_id"]) for m in req["migrations"]]

    def assertImported(self, source):
        found = self.glance_b.find("dtn_migrate_transfer_id",
                                   self.a._latest(source["id"],
                                                  "b").meta["transfer_id"])
        self.assertEqual(1, len(found))
        peer = found[0]
        self.assertEqual(source["os_hash_value"], peer["os_hash_value"])
        self.assertEqual(sorted(source["tags"]), peer["tags"])
        self.assertEqual(source["os_distro"], peer["os_distro"])
        self.assertEqual(self.glance_a.data[source["id"]],
                         self.glance_b.data[peer["id"]])
        return peer

    def test_pipelined(self):
        image = self.image(min_ram=512, min_disk=2)
        [m] = self.run_request([image["id"]])
        self.assertEqual("complete", m["state"], m["error"])
        peer = self.assertImported(image)
        self.assertEqual(peer["id"], m["peer_image"]["image_id"])
        self.assertEqual((512, 2), (peer["min_ram"], peer["min_disk"]))
        self.assertEqual(1.0, m["progress"])
        # Staged files are removed on both DTNs.
        for root in self.agents.roots.values():
            self.assertEqual([], [f for _d, _s, fs in os.walk(root)
                                  for f in fs])
        b = self.b.list(direction="incoming")
        self.assertEqual(["complete"], [r["state"] for r in b])
        self.assertEqual(image["id"], b[0]["source_image_id"])

    def test_serial_keep_id(self):
        image = self.image()
        [m] = self.run_request([image["id"]], mode="serial", keep_id=True,
                               visibility="private")
        self.assertEqual("complete", m["state"], m["error"])
        peer = self.assertImported(image)
        self.assertEqual(image["id"], peer["id"])
        self.assertEqual("private", peer["visibility"])

    def test_many_images_and_dedupe(self):
        images = [self.image(size=100000 + i) for i in range(6)]
        ids = [i["id"] for i in images]
        done = self.run_request(ids)
        self.assertEqual(["complete"] * 6, [m["state"] for m in done])
        for image in images:
            self.assertImported(image)
        again = self.a.request("b", images=ids[:2])
        self.assertEqual([True, True],
                         [m.get("reused") for m in again["migrations"]])
        self.assertEqual(6, len(self.a.list()))

    def test_selector(self):
        tagged = self.image(tags=["dr"])
        self.image(tags=["other"])
        req = self.a.request("b", selector={"tag": "dr"})
        self.assertEqual([tagged["id"]],
                         [m["image_id"] for m in req["migrations"]])

    def test_bad_requests_create_nothing(self):
        image = self.image()
        queued = self.glance_a.add(b"", status="queued", size=None)
        self.assertRaises(exception.ImageNotFound, self.a.request, "b",
                          images=["nope"])
        self.assertRaises(exception.ImageNotActive, self.a.request, "b",
                          images=[image["id"], queued["id"]])
        self.assertRaises(exception.PeerNotFound, self.a.request, "zz",
                          images=[image["id"]])
        for bad in ({"images": "x"}, {"images": []},
                    {"images": [image["id"]], "selector": {"tag": "x"}},
                    {"selector": {"owner": "x"}},
                    {"images": [image["id"]], "options": {"keep": 1}},
                    {"images": [image["id"]], "options": {"mode": "fast"}},
                    {"images": [image["id"]],
                     "options": {"visibility": "everyone"}},
                    {"images": [image["id"]], "options": {"verify": "no"}},
                    {"images": [3]}):
            self.assertRaises(exception.InvalidInput, self.a.request, "b",
                              **bad)
        self.assertEqual([], self.a.list())
        self.assertEqual({}, self.glance_b.images)

    def test_resume_from_persisted_state(self):
        """A new engine on the same database finishes a migration whose
        staging was done, without exporting again.
        """
        image = self.image(size=2 << 20)
        self.agents.rate = 4 << 20        # ~0.5 s transfer
        req = self.a.request("b", images=[image["id"]],
                             options={"mode": "serial"})
        mid = req["migrations"][0]["migration_id"]
        # Let staging finish, then "crash": a second engine takes over.
        for _ in range(200):
            stages = self.a.get(mid)["stages"]
            if (stages.get("export") or {}).get("state") == "complete":
                break
            time.sleep(0.05)
        exported = self.glance_a.downloaded
        self.assertEqual(image["size"], exported)
        db = "sqlite:///%s/dtn-a.sqlite" % self.tmp
        a2 = self.engine("dtn-a", self.glance_a, db)
        self.assertTrue(self.a.wait_idle(60))
        # The first engine finished too; the second finds nothing to do
        # or reruns idempotently.  Either way nothing is exported twice.
        a2.resume_unfinished()
        self.assertTrue(a2.wait_idle(60))
        self.assertTrue(self.b.wait_idle(60))
        self.assertEqual("complete", a2.get(mid)["state"])
        self.assertEqual(exported, self.glance_a.downloaded)

    def test_peer_upload_retried(self):
        image = self.image()
        self.glance_b.fail_uploads = 2
        [m] = self.run_request([image["id"]])
        self.assertEqual("complete", m["state"], m["error"])
        self.assertImported(image)

    def test_import_attempted_again_with_a_new_image(self):
        image = self.image()
        self.glance_b.break_uploads = 1
        [m] = self.run_request([image["id"]])
        self.assertEqual("complete", m["state"], m["error"])
        self.assertImported(image)
        self.assertEqual(1, len(self.glance_b.images))

    def test_reconcile_imports_a_lost_notification(self):
        image = self.image()
        del self.agents.engines["dtn-b"]        # the cast is lost
        req = self.a.request("b", images=[image["id"]])
        mid = req["migrations"][0]["migration_id"]
        for _ in range(100):
            if self.agents.incoming:
                break
            time.sleep(0.05)
        self.assertEqual([], self.b.list())
        self.b.reconcile()
        self.assertTrue(self.a.wait_idle(60))
        self.assertTrue(self.b.wait_idle(60))
        self.assertEqual("complete", self.a.get(mid)["state"])
        self.b.reconcile()                      # nothing more to do
        self.assertEqual(1, len(self.b.list()))

    def test_cancel(self):
        image = self.image(size=4 << 20)
        self.agents.rate = 1 << 20
        req = self.a.request("b", images=[image["id"]])
        mid = req["migrations"][0]["migration_id"]
        self.a.cancel(mid)
        self.assertTrue(self.a.wait_idle(60))
        self.assertEqual("cancelled", self.a.get(mid)["state"])


class TestDigest(testtools.TestCase):
    def test_fake_hash(self):
        images = fakes.FakeImages()
        image = images.add(b"abc")
        self.assertEqual(hashlib.sha512(b"abc").hexdigest(),
                         image["os_hash_value"])
