"""Two engines (source and peer) with in-memory Glances and fake agents:
the flows, pipelining, dedupe, resume and errors.
"""

import contextlib
import datetime
import hashlib
import os
import shutil
import tempfile
import threading
import time
from unittest import mock
import uuid

import fixtures
from futurist import _thread as futurist_thread
from oslo_config import cfg
import oslo_messaging as messaging
import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from taskflow import exceptions as tf_exc
import testtools

from dtn_migrate.conf import engine as engine_conf
from dtn_migrate import context
from dtn_migrate.db import models as db_models
from dtn_migrate.conf import staging as staging_conf
from dtn_migrate.engine.flows import incoming as incoming_flow
from dtn_migrate.engine import migrations
from dtn_migrate.engine import persistence
from dtn_migrate.engine import resources
from dtn_migrate.engine.tasks import incoming as incoming_tasks
from dtn_migrate import exception
from dtn_migrate.staging import localfs
from tests.unit.engine import crash_worker
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


class EngineTestCase(testtools.TestCase):
    """Engines ``a`` (source) and ``b`` (peer) on fake agents."""

    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="dtnm-engine-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        roots = {}
        for host in ("dtn-a", "dtn-b"):
            roots[host] = os.path.join(self.tmp, host)
            os.makedirs(roots[host])
        self.agents = fakes.FakeAgents(roots)
        self.addCleanup(self.agents.close)
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

    def engine(self, host, images, db=None, **staging):
        db = db or "sqlite:///%s/%s.sqlite" % (self.tmp, host)
        conf = make_conf(host, db)
        for key, value in staging.items():
            conf.set_override(key, value, "staging")
        store = persistence.Store(db)
        self.addCleanup(store.close)
        res = resources.Resources(
            conf, images, self.agents,
            localfs.LocalBackend(self.agents.roots[host]))
        return migrations.Migrations(conf, store, res)

    def staged(self, host="dtn-a"):
        return sorted(os.path.relpath(os.path.join(d, f),
                                      self.agents.roots[host])
                      for d, _s, fs in os.walk(self.agents.roots[host])
                      for f in fs)

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

    def latest(self, image_id):
        """The latest migration of ``image_id`` to b."""
        return max((r for r in self.a.list() if r["image_id"] == image_id),
                   key=lambda r: r["created_at"])

    def assertImported(self, source):
        found = self.glance_b.find("dtn_migrate_transfer_id",
                                   self.latest(source["id"])["transfer_id"])
        self.assertEqual(1, len(found))
        peer = found[0]
        self.assertEqual(source["os_hash_value"], peer["os_hash_value"])
        self.assertEqual(sorted(source["tags"]), peer["tags"])
        self.assertEqual(source["os_distro"], peer["os_distro"])
        self.assertEqual(self.glance_a.data[source["id"]],
                         self.glance_b.data[peer["id"]])
        return peer


class TestMigrations(EngineTestCase):
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

    def test_a_flow_ends_with_its_last_task(self):
        # TaskFlow's own thread pool ("threaded": futurist's) is joined at
        # the end of every run, and an idle futurist worker looks for the
        # order to stop only every MAX_IDLE_FOR seconds (1): every
        # migration ended up to a second after its last task, on both
        # clouds.  At 120 s here, a run that waits for it cannot pass.
        self.patch(futurist_thread.ThreadWorker, "MAX_IDLE_FOR", 120)
        image = self.image()
        began = time.monotonic()
        [m] = self.run_request([image["id"]])
        self.assertEqual("complete", m["state"], m["error"])
        self.assertImported(image)
        self.assertLess(time.monotonic() - began, 60)

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

    def test_the_policy_served_reaches_the_peer(self):
        # A protection policy's migration: its import's record (and what
        # the finished callbacks get) carries the policy.
        ended = []
        self.b.finished.append(ended.append)
        served = {"policy_id": uuid.uuid4().hex, "name": "gold",
                  "rpo_minutes": 15, "selector": {"tags": ["gold"]}}
        protected = self.image(size=70000)
        plain = self.image(size=70001)
        [m] = self.run_request([protected["id"]], protection=served)
        self.assertEqual("complete", m["state"], m["error"])
        self.assertEqual(served, m["options"]["protection"])
        [m] = self.run_request([plain["id"]])
        self.assertEqual("complete", m["state"], m["error"])
        got = {r["source_image_id"]: r
               for r in self.b.list(direction="incoming")}
        self.assertEqual(served, got[protected["id"]]["protection"])
        self.assertIsNone(got[plain["id"]]["protection"])
        self.assertEqual({protected["id"]: served, plain["id"]: None},
                         {r["source_image_id"]: r["protection"]
                          for r in ended})
        self.assertEqual(["complete", "complete"],
                         [r["state"] for r in ended])

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
        """Engine A's process is killed (SIGKILL) mid-flow, twice: in
        the transfer, after the export; then, resumed, while it waits
        for the peer, after the transfer.  Each resume from the persisted
        flow skips the finished tasks and runs the interrupted one again;
        a last engine, in this process, finishes the migration.
        """
        db = "sqlite:///%s/crashed-a.sqlite" % self.tmp
        size = len(crash_worker.image_data(7))
        mid, exported = crash_worker.crash(self.tmp, db, 7, "transfer")
        self.assertEqual(size, exported)
        states = crash_worker.task_states(db, mid)
        self.assertEqual(("SUCCESS", "RUNNING", "PENDING"), (
            states["stage-image"], states["transfer-image"],
            states["await-peer-import"]))
        # Killed again while it recovers: nothing exported this time.
        self.assertEqual((mid, 0), crash_worker.crash(
            self.tmp, db, 7, "report", mid))
        states = crash_worker.task_states(db, mid)
        self.assertEqual(("SUCCESS", "SUCCESS", "RUNNING"), (
            states["stage-image"], states["transfer-image"],
            states["await-peer-import"]))
        image = crash_worker.add_image(self.glance_a, 7)
        a2 = self.engine("dtn-a", self.glance_a, db)
        self.assertEqual("running", a2.get(mid)["state"])
        self.assertEqual([mid], a2.resume_unfinished())
        # What the killed process sent is at dtn-b: B's agent tells it.
        tid = a2.get(mid)["transfer_id"]
        self.b.incoming(tid, "a")
        self.assertTrue(a2.wait_idle(60))
        self.assertTrue(self.b.wait_idle(60))
        rec = a2.get(mid)
        self.assertEqual("complete", rec["state"], rec["error"])
        # Neither exported nor sent again by this engine.
        self.assertEqual(0, self.glance_a.downloaded)
        self.assertEqual({}, self.agents.transfers)
        [peer] = self.glance_b.find("dtn_migrate_transfer_id", tid)
        self.assertEqual(peer["id"], rec["peer_image"]["image_id"])
        self.assertEqual(image["os_hash_value"], peer["os_hash_value"])
        self.assertEqual(crash_worker.image_data(7),
                         self.glance_b.data[peer["id"]])

    def test_peer_upload_retried(self):
        image = self.image()
        self.glance_b.fail_uploads = 2
        [m] = self.run_request([image["id"]])
        self.assertEqual("complete", m["state"], m["error"])
        self.assertImported(image)

    def test_import_attempted_again_with_a_new_image(self):
        log = self.useFixture(fixtures.FakeLogger(
            name="dtn_migrate.engine.flows.incoming"))
        image = self.image()
        self.glance_b.break_uploads = 1
        [m] = self.run_request([image["id"]])
        self.assertEqual("complete", m["state"], m["error"])
        self.assertImported(image)
        self.assertEqual(1, len(self.glance_b.images))
        [imported] = self.b.list()
        self.assertIn("import %s: attempt 1 of 3 failed: upload-image: "
                      % imported["migration_id"], log.output)

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

    def fail_first_import(self, image):
        """Migrate ``image`` with every upload of its import failing."""
        self.glance_b.break_uploads = incoming_flow.IMPORT_ATTEMPTS
        [m] = self.run_request([image["id"]])
        self.assertEqual("failed", m["state"])
        self.assertIn("import at b failed", m["error"])
        [imp] = self.b.list()
        self.assertEqual(("failed", 1), (imp["state"], imp["attempt"]))
        return m

    def test_retry_after_a_failed_import(self):
        """The retry reuses the transfer, which the peer already holds
        with the first attempt's descriptor: the peer learns of attempt
        2 from the source's report request and imports again.
        """
        image = self.image()
        first = self.fail_first_import(image)
        [m] = self.run_request([image["id"]])
        self.assertEqual("complete", m["state"], m["error"])
        self.assertEqual((first["transfer_id"], 2),
                         (m["transfer_id"], m["attempt"]))
        self.assertImported(image)
        [imp] = self.b.list()
        self.assertEqual(("complete", 2), (imp["state"], imp["attempt"]))
        # A complete import is never redone.
        self.assertEqual("complete",
                         self.b.incoming(first["transfer_id"], "a", 3)
                         ["state"])
        self.assertTrue(self.b.wait_idle(10))
        self.assertEqual(1, len(self.glance_b.images))

    def test_retry_found_by_reconcile(self):
        image = self.image()
        self.fail_first_import(image)
        self.agents.cast_wanted = False         # the cast is lost
        req = self.a.request("b", images=[image["id"]])
        mid = req["migrations"][0]["migration_id"]
        for _ in range(200):
            if 2 in self.agents.wanted.values():
                break
            time.sleep(0.05)
        self.assertEqual("failed", self.b.list()[0]["state"])
        self.b.reconcile()
        self.assertTrue(self.a.wait_idle(60))
        self.assertTrue(self.b.wait_idle(60))
        self.assertEqual("complete", self.a.get(mid)["state"])
        self.assertEqual(2, self.b.list()[0]["attempt"])

    def test_incoming_attempts(self):
        tid = "3" * 32
        # Nothing arrives: the import stalls... unless cancelled.
        rec = self.b.incoming(tid, "a")
        self.assertEqual(1, rec["attempt"])
        self.b.cancel(rec["migration_id"])
        self.assertTrue(self.b.wait_idle(10))
        self.assertEqual("cancelled", self.b.get(rec["migration_id"])
                         ["state"])
        # No later attempt asked: left as it is.
        for attempt in (None, 1):
            self.assertEqual("cancelled",
                             self.b.incoming(tid, "a", attempt)["state"])
        # A later one: imported again.
        rec = self.b.incoming(tid, "a", 2)
        self.assertIn(rec["state"], migrations.ACTIVE_STATES)
        self.assertEqual(2, rec["attempt"])
        self.assertRaises(exception.InvalidInput, self.b.incoming, tid,
                          "a", 0)
        self.assertRaises(exception.InvalidInput, self.b.incoming, tid,
                          "a", "2")

    def test_report_failure_keeps_the_verified_image(self):
        image = self.image()
        with mock.patch.object(incoming_tasks.ReportImport, "execute",
                               side_effect=RuntimeError("agent gone")):
            [m] = self.run_request([image["id"]])
        self.assertEqual("failed", m["state"])
        [imp] = self.b.list()
        self.assertEqual("failed", imp["state"])
        self.assertIn("agent gone", imp["error"])
        peer = self.assertImported(image)
        self.assertEqual("active", peer["status"])

    def test_cleanup_failure_does_not_fail_the_import(self):
        image = self.image()
        with mock.patch.object(resources.Resources, "remove_staged",
                               side_effect=OSError("stale handle")):
            [m] = self.run_request([image["id"]])
        self.assertEqual("complete", m["state"], m["error"])
        self.assertEqual("complete", self.b.list()[0]["state"])
        self.assertImported(image)

    def test_no_space_before_the_file_exists(self):
        """Staging refuses before creating the data file: the pipelined
        stages waiting for it end at once, with staging's reason.
        """
        self.a = self.engine("dtn-a", self.glance_a,
                             free_space_margin="100%")
        image = self.image()
        t0 = time.monotonic()
        [m] = self.run_request([image["id"]])
        self.assertLess(time.monotonic() - t0, 10)
        self.assertEqual("failed", m["state"])
        self.assertIn("not enough space", m["error"])

    def test_transient_rpc_errors(self):
        image = self.image()
        real = {n: getattr(self.agents, n)
                for n in ("get_transfer", "get_peer_report",
                          "get_watermark")}
        errors = {n: 3 for n in real}

        def flaky(name):
            def call(*args, **kwargs):
                if errors[name]:
                    errors[name] -= 1
                    raise messaging.MessagingTimeout("agent restarts")
                return real[name](*args, **kwargs)
            return call
        for name in real:
            setattr(self.agents, name, flaky(name))
        self.agents.rate = 8 << 20
        [m] = self.run_request([image["id"]])
        self.assertEqual("complete", m["state"], m["error"])
        self.assertEqual({n: 0 for n in real}, errors)
        self.assertImported(image)

    def test_new_transfer_removes_the_stale_staged_files(self):
        image = self.image()
        first = self.fail_first_import(image)
        self.assertIn("%s/image.data" % first["transfer_id"], self.staged())
        [m] = self.run_request([image["id"]], visibility="private")
        self.assertEqual("complete", m["state"], m["error"])
        self.assertNotEqual(first["transfer_id"], m["transfer_id"])
        self.assertEqual([], self.staged())

    def test_keep_failed_off(self):
        self.a = self.engine("dtn-a", self.glance_a, keep_failed=False)
        image = self.image()
        self.fail_first_import(image)
        self.assertEqual([], self.staged())
        # The retry exports the image again and completes.
        [m] = self.run_request([image["id"]])
        self.assertEqual("complete", m["state"], m["error"])
        self.assertEqual(2, m["attempt"])

    def test_selected_images_are_not_fetched_again(self):
        self.image(tags=["dr"])
        self.glance_a.get = mock.Mock(side_effect=AssertionError("GET"))
        req = self.a.request("b", selector={"tag": "dr"})
        self.assertEqual(1, len(req["migrations"]))

    def test_progress_of_running_migrations(self):
        image = self.image(size=4 << 20)
        self.agents.rate = 2 << 20
        req = self.a.request("b", images=[image["id"]])
        mid = req["migrations"][0]["migration_id"]
        for _ in range(100):
            if mid in self.a.running:
                break
            time.sleep(0.02)
        notified = []
        self.a.notifier = mock.Mock()
        self.a.notifier.info.side_effect = \
            lambda ctxt, event, payload: notified.append(payload) \
            if event.endswith(".progress") else None
        with mock.patch.object(self.a.store, "load",
                               side_effect=AssertionError("load")):
            self.a.report_progress()
        self.assertEqual([mid], [p["migration_id"] for p in notified])
        self.assertTrue(self.a.wait_idle(60))
        # The flow's own state was not written back stale.
        book, detail, record = self.a.store.load(mid)
        self.assertEqual("SUCCESS", detail.state)
        self.assertEqual("complete", record["state"])


class TestCallers(EngineTestCase):
    """The caller's context: owner of records, reader of images,
    idempotency of its request ids; retries.
    """

    def ctx(self, project, token=None):
        return context.RequestContext(user_id="u-" + project,
                                      project_id=project,
                                      auth_token=token, is_admin=False)

    def test_records_carry_project_and_user(self):
        image = self.image()
        req = self.a.request("b", images=[image["id"]],
                             context=self.ctx("p1"))
        [m] = req["migrations"]
        self.assertEqual(("p1", "u-p1"), (m["project_id"], m["user_id"]))
        self.assertTrue(self.a.wait_idle(60))
        rec = self.a.store.db.migration_get(m["id"], project_id="p1")
        self.assertEqual(("p1", "u-p1", "complete"),
                         (rec["project_id"], rec["user_id"], rec["state"]))
        self.assertRaises(exception.MigrationNotFound, self.a.get, m["id"],
                          "p2")
        self.assertEqual([], self.a.list(project_id="p2"))
        self.assertEqual([m["id"]],
                         [r["id"] for r in self.a.list(project_id="p1")])

    def test_same_request_id_same_records(self):
        images = [self.image(size=1000 + i) for i in range(2)]
        ids = [i["id"] for i in images]
        rid = uuid.uuid4().hex
        first = self.a.request("b", images=ids, request_id=rid,
                               context=self.ctx("p1"))
        again = self.a.request("b", images=ids, request_id=rid,
                               context=self.ctx("p1"))
        self.assertEqual(sorted(m["id"] for m in first["migrations"]),
                         sorted(m["id"] for m in again["migrations"]))
        self.assertEqual(2, len(self.a.list(request_id=rid)))
        # Another project's request id is its own.
        other = self.a.request("b", images=ids[:1], request_id=rid,
                               context=self.ctx("p2"))
        [m] = other["migrations"]
        self.assertEqual("p2", m["project_id"])
        self.assertNotIn(m["id"], [r["id"] for r in first["migrations"]])
        self.assertTrue(self.a.wait_idle(60))

    def test_caller_must_read_the_image(self):
        self.glance_a.tokens = {"tok1": "p1", "tok2": "p2"}
        own = self.image(owner="p1", visibility="shared")
        private = self.image(owner="p2", visibility="private")
        self.assertRaises(exception.ImageNotReadable, self.a.request, "b",
                          images=[own["id"]],
                          context=self.ctx("p2", "tok2"))
        self.assertRaises(exception.ImageNotFound, self.a.request, "b",
                          images=[private["id"], own["id"]],
                          context=self.ctx("p1", "tok1"))
        self.assertRaises(exception.ImageNotReadable, self.a.request, "b",
                          images=[own["id"]],
                          context=self.ctx("p1", "expired"))
        self.assertEqual([], self.a.list())
        req = self.a.request("b", images=[own["id"]],
                             context=self.ctx("p1", "tok1"))
        self.assertEqual([own["id"]],
                         [m["image_id"] for m in req["migrations"]])
        # A selector finds only what the caller may read.
        self.assertRaises(exception.InvalidInput, self.a.request, "b",
                          selector={"tag": "dr"},
                          context=self.ctx("p3", "tok3"))
        self.assertTrue(self.a.wait_idle(60))

    def test_retry_a_failed_migration(self):
        image = self.image(size=2 << 20)
        self.agents.fail_start = 1
        [m] = self.run_request([image["id"]])
        self.assertEqual("failed", m["state"])
        for state in ("complete", "running"):
            with mock.patch.object(self.a.store, "record",
                                   return_value=dict(m, state=state)):
                self.assertRaises(exception.MigrationStateConflict,
                                  self.a.retry, m["id"])
        rec = self.a.retry(m["id"])
        self.assertEqual((m["id"], 2, m["transfer_id"]),
                         (rec["id"], rec["attempt"], rec["transfer_id"]))
        self.assertTrue(self.a.wait_idle(60))
        self.assertTrue(self.b.wait_idle(60))
        rec = self.a.get(m["id"])
        self.assertEqual("complete", rec["state"], rec["error"])
        self.assertIsNone(rec["error"])
        self.assertImported(image)
        events = [e["event"] for e in self.a.events(m["id"])]
        self.assertEqual(["queued", "started"], events[:2])
        self.assertIn("failed", events)
        after = events[events.index("retried"):]
        self.assertEqual(["retried", "queued", "started"], after[:3])
        self.assertEqual("finished", after[-1])
        self.assertRaises(exception.MigrationStateConflict, self.a.retry,
                          m["id"])
        self.assertRaises(exception.MigrationNotFound, self.a.retry,
                          m["id"], "another-project")

    def test_progress_written_at_a_bounded_rate(self):
        self.a.conf.set_override("progress_interval", 1.0, "engine")
        image = self.image(size=4 << 20)
        self.agents.rate = 1 << 20
        req = self.a.request("b", images=[image["id"]])
        mid = req["migrations"][0]["id"]
        for _ in range(200):
            if mid in self.a.running:
                break
            time.sleep(0.02)
        saves = []
        real = self.a.store.save

        def save(migration_id, **changes):
            if set(changes) == {"stages"}:
                saves.append(time.monotonic())
            return real(migration_id, **changes)
        self.a.store.save = save
        self.addCleanup(setattr, self.a.store, "save", real)
        start = time.monotonic()
        while time.monotonic() - start < 2.5:
            self.a.report_progress()
            time.sleep(0.01)
        # 250 calls, about one write a second (plus stage changes).
        self.assertGreaterEqual(len(saves), 2)
        self.assertLessEqual(len(saves), 8)
        rec = self.a.store.record(mid)
        self.assertGreater(rec["bytes_export"] or 0, 0)
        self.assertTrue(self.a.wait_idle(60))


class TestStagedRemoval(EngineTestCase):
    """A migration's staged files go after its outcome is saved and
    told; those an engine stopped or failed to remove go at the sweep.
    """

    def test_complete_before_the_files_go(self):
        seen = {}
        real = resources.Resources.remove_staged

        def remove(res, transfer_id):
            engine = self.a if res is self.a.res else self.b
            [rec] = engine.store.records({"transfer_id": transfer_id})
            seen[res.conf.engine.agent_host] = (
                rec["state"], rec["cleanup"], bool(self.staged(
                    res.conf.engine.agent_host)))
            return real(res, transfer_id)

        ended = []
        self.a.finished.append(lambda rec: ended.append(
            (rec["state"], self.staged())))
        image = self.image()
        with mock.patch.object(resources.Resources, "remove_staged",
                               autospec=True, side_effect=remove):
            [m] = self.run_request([image["id"]])
        self.assertEqual("complete", m["state"], m["error"])
        # Saved complete, with its files still to go, before they went;
        # the end was told while they were there.
        self.assertEqual({"dtn-a": ("complete", "pending", True),
                          "dtn-b": ("complete", "pending", True)}, seen)
        self.assertEqual("complete", ended[0][0])
        self.assertNotEqual([], ended[0][1])
        for engine, host in ((self.a, "dtn-a"), (self.b, "dtn-b")):
            self.assertEqual([None], [r["cleanup"] for r in engine.list()])
            self.assertEqual([], self.staged(host))

    def test_a_failed_removal_is_swept(self):
        image = self.image()
        with mock.patch.object(resources.Resources, "remove_staged",
                               side_effect=OSError("stale handle")):
            [m] = self.run_request([image["id"]])
        self.assertEqual(("complete", "pending"),
                         (m["state"], m["cleanup"]))
        self.assertIn("%s/image.data" % m["transfer_id"], self.staged())
        self.assertEqual(1, self.a.sweep_staged())
        self.assertEqual([], self.staged())
        self.assertIsNone(self.a.get(m["migration_id"])["cleanup"])
        self.assertEqual(0, self.a.sweep_staged())
        # B's received files, by its periodic reconcile.
        self.assertNotEqual([], self.staged("dtn-b"))
        self.b.reconcile()
        self.assertEqual([], self.staged("dtn-b"))
        self.assertEqual([None], [r["cleanup"] for r in self.b.list()])

    def test_a_failed_import_keeps_what_it_received(self):
        self.glance_b.break_uploads = incoming_flow.IMPORT_ATTEMPTS
        [m] = self.run_request([self.image()["id"]])
        self.assertEqual("failed", m["state"])
        [imp] = self.b.list()
        self.assertEqual(("failed", None), (imp["state"], imp["cleanup"]))
        self.assertEqual(0, self.b.sweep_staged())
        self.assertIn("%s/image.data" % m["transfer_id"],
                      self.staged("dtn-b"))
        # keep_failed (the default): the source keeps its export too.
        self.assertIsNone(self.a.get(m["migration_id"])["cleanup"])
        self.assertEqual(0, self.a.sweep_staged())
        self.assertIn("%s/image.data" % m["transfer_id"], self.staged())

    def test_a_retry_waits_for_the_sweep(self):
        image, m = self.fail_with_files_left()
        mid = m["migration_id"]
        order = []
        real = self.a.res.remove_staged

        def slow(transfer_id):
            order.append("sweep starts")
            time.sleep(0.5)
            real(transfer_id)
            order.append("sweep ends")

        self.a.res.remove_staged = slow
        sweeper = threading.Thread(target=self.a.sweep_staged)
        sweeper.start()
        while not order:
            time.sleep(0.01)
        self.assertIn(mid, self.a.pending)
        self.a.retry(mid)
        order.append("retried")
        sweeper.join()
        self.assertEqual(["sweep starts", "sweep ends", "retried"], order)
        self.assertTrue(self.a.wait_idle(60))
        self.assertTrue(self.b.wait_idle(60))
        rec = self.a.get(mid)
        self.assertEqual(("complete", 2, None),
                         (rec["state"], rec["attempt"], rec["cleanup"]))
        self.assertImported(image)

    def fail_with_files_left(self):
        """A failed export whose removal failed (keep_failed off): its
        files are left for the sweep.
        """
        self.a = self.engine("dtn-a", self.glance_a, keep_failed=False)
        self.glance_b.break_uploads = incoming_flow.IMPORT_ATTEMPTS
        image = self.image()
        with mock.patch.object(resources.Resources, "remove_staged",
                               side_effect=OSError("stale handle")):
            [m] = self.run_request([image["id"]])
        self.assertEqual(("failed", "pending"), (m["state"], m["cleanup"]))
        return image, m

    def test_a_new_request_takes_over_the_files_left(self):
        image, first = self.fail_with_files_left()
        req = self.a.request("b", images=[image["id"]])
        [m] = req["migrations"]
        # It resumes them: they are its own now, not the sweep's.
        self.assertEqual((first["transfer_id"], 2),
                         (m["transfer_id"], m["attempt"]))
        self.assertIsNone(self.a.get(first["migration_id"])["cleanup"])
        self.assertEqual(0, self.a.sweep_staged())
        self.assertTrue(self.a.wait_idle(60))
        self.assertTrue(self.b.wait_idle(60))
        self.assertEqual("complete", self.a.get(m["migration_id"])["state"])
        self.assertImported(image)

    def test_a_request_while_the_files_go_starts_its_own_transfer(self):
        image, first = self.fail_with_files_left()
        started, release = threading.Event(), threading.Event()
        real = self.a.res.remove_staged

        def slow(transfer_id):
            started.set()
            release.wait(10)
            real(transfer_id)

        self.a.res.remove_staged = slow
        sweeper = threading.Thread(target=self.a.sweep_staged)
        sweeper.start()
        self.assertTrue(started.wait(10))
        [m] = self.a.request("b", images=[image["id"]])["migrations"]
        release.set()
        sweeper.join()
        self.assertNotEqual(first["transfer_id"], m["transfer_id"])
        self.assertEqual(1, m["attempt"])
        self.assertTrue(self.a.wait_idle(60))
        self.assertTrue(self.b.wait_idle(60))
        self.assertEqual("complete", self.a.get(m["migration_id"])["state"])
        self.assertImported(image)
        self.assertEqual([], self.staged())

    def test_killed_between_the_save_and_the_removal(self):
        """The source engine's process is killed (SIGKILL) as it starts
        to remove the staged files of a migration it saved complete; the
        next engine on its database removes them.
        """
        db = "sqlite:///%s/crashed-a.sqlite" % self.tmp
        mid, _exported = crash_worker.crash(self.tmp, db, 11, "cleanup")
        a2 = self.engine("dtn-a", self.glance_a, db)
        rec = a2.get(mid)
        self.assertEqual(("complete", "pending"),
                         (rec["state"], rec["cleanup"]))
        self.assertIn("%s/image.data" % rec["transfer_id"], self.staged())
        self.assertEqual([], a2.resume_unfinished())
        a2.reconcile()
        self.assertEqual([], self.staged())
        self.assertIsNone(a2.get(mid)["cleanup"])


class TestDatabaseOutage(EngineTestCase):
    """The persistence database fails while migrations run: a migration
    whose worker ends on the error is stranded, never left for good,
    and a request never reuses a record with no live worker.
    """

    def setUp(self):
        super().setUp()
        self.down = set()           # engines whose database is "down"
        self.addCleanup(self.down.clear)    # before quiesce()

    def outage(self, engine, when, loads=False):
        """While ``engine`` is in ``self.down``, its saves whose changes
        match ``when`` (and its loads, with ``loads``) raise the
        database's error.
        """
        store = engine.store
        save, load = store.save, store.load

        def failing(real, call_when):
            def call(*args, **kwargs):
                if engine in self.down and call_when(kwargs):
                    raise exception.DatabaseUnavailable(
                        reason="(2013, 'Lost connection to MySQL server')")
                return real(*args, **kwargs)
            return call
        store.save = failing(save, when)
        store.load = failing(load, lambda kwargs: loads)

    def finish_unsaved(self, image):
        """Migrate ``image`` with the saving of its outcome failing."""
        self.outage(self.a, lambda c: c.get("state") in
                    migrations.FINAL_STATES)
        self.down.add(self.a)
        [m] = self.run_request([image["id"]])
        # The flow ended but its outcome could not be saved: no worker.
        self.assertEqual("running", m["state"])
        self.assertNotIn(m["migration_id"], self.a.pending)
        return m["migration_id"]

    def test_request_while_the_database_is_down(self):
        image = self.image()
        self.finish_unsaved(image)
        for _ in range(3):
            err = self.assertRaises(exception.DtnMigrateException,
                                    self.a.request, "b",
                                    images=[image["id"]])
            self.assertIn("persistence database is unavailable", str(err))
        self.down.clear()
        [rec] = self.a.request("b", images=[image["id"]])["migrations"]
        self.assertEqual("complete", rec["state"])

    def test_finish_fails_then_a_request_settles_it(self):
        image = self.image()
        mid = self.finish_unsaved(image)
        self.down.clear()
        again = self.a.request("b", images=[image["id"]])
        [rec] = again["migrations"]
        self.assertEqual((mid, "complete", True),
                         (rec["migration_id"], rec["state"],
                          rec.get("reused")))
        self.assertImported(image)
        self.assertEqual({}, self.a.stranded)
        # Saved for good: a new engine on the database sees it complete.
        db = "sqlite:///%s/dtn-a.sqlite" % self.tmp
        self.assertEqual("complete", persistence.Store(db).record(mid)
                         ["state"])

    def test_many_stranded_recovered_on_reconnect(self):
        images = [self.image(size=200000 + i) for i in range(5)]
        for engine in (self.a, self.b):
            self.outage(engine, lambda c: c.get("state") in
                        migrations.FINAL_STATES)
        self.down.update((self.a, self.b))
        done = self.run_request([i["id"] for i in images])
        self.assertEqual(["running"] * 5, [m["state"] for m in done])
        self.assertEqual(5, len(self.a.stranded))
        # The database is still down: nothing is lost, twice over.
        for _ in range(2):
            self.assertEqual(0, self.a.recover())
            self.assertEqual(5, len(self.a.stranded))
        self.down.clear()
        self.assertEqual(5, self.a.recover())
        self.assertEqual(5, self.b.recover())
        self.assertEqual(["complete"] * 5,
                         [self.a.get(m["migration_id"])["state"]
                          for m in done])
        # Their staged files, kept while the outcome waited, go at the
        # next sweep (recover() holds the engine's lock).
        self.assertEqual(sorted(m["transfer_id"] for m in done),
                         sorted({f.split("/")[0] for f in self.staged()}))
        self.assertEqual(["pending"] * 5,
                         [self.a.get(m["migration_id"])["cleanup"]
                          for m in done])
        self.assertEqual(5, self.a.sweep_staged())
        self.assertEqual(5, self.b.sweep_staged())
        self.assertEqual([], self.staged() + self.staged("dtn-b"))
        self.assertEqual(["complete"] * 5,
                         [r["state"] for r in self.b.list()])
        for image in images:
            self.assertImported(image)
        self.assertEqual(0, self.a.recover())

    def test_worker_ends_on_a_database_error_and_runs_again(self):
        image = self.image()
        self.outage(self.a, lambda c: True, loads=True)
        self.down.add(self.a)
        req = self.a.request("b", images=[image["id"]])
        mid = req["migrations"][0]["migration_id"]
        self.assertTrue(self.a.wait_idle(30))
        # Its worker could not even load it: queued, with no worker.
        self.assertEqual("queued", self.a.get(mid)["state"])
        self.assertNotIn(mid, self.a.pending)
        # Not run again while the database is still down.
        for _ in range(3):
            self.assertEqual(0, self.a.recover())
            self.assertRaises(exception.DtnMigrateException,
                              self.a.request, "b", images=[image["id"]])
            self.assertNotIn(mid, self.a.pending)
        self.down.clear()
        # A new request does not reuse a dead record: it runs again.
        [rec] = self.a.request("b", images=[image["id"]])["migrations"]
        self.assertEqual((mid, True), (rec["migration_id"],
                                       rec.get("reused")))
        self.assertTrue(self.a.wait_idle(60))
        self.assertTrue(self.b.wait_idle(60))
        self.assertEqual("complete", self.a.get(mid)["state"])
        self.assertImported(image)
        self.assertEqual({}, self.a.stranded)


class TestConf(testtools.TestCase):
    def test_overrides_stay_in_their_configuration(self):
        a = make_conf("dtn-a", "sqlite://")
        b = make_conf("dtn-b", "sqlite://")
        a.set_override("keep_failed", False, "staging")
        self.assertEqual(("dtn-a", "dtn-b"), (a.engine.agent_host,
                                              b.engine.agent_host))
        self.assertEqual((False, True), (a.staging.keep_failed,
                                         b.staging.keep_failed))


class TestStore(testtools.TestCase):
    def setUp(self):
        super().setUp()
        tmp = tempfile.mkdtemp(prefix="dtnm-store-")
        self.addCleanup(shutil.rmtree, tmp, True)
        self.db = "sqlite:///%s/engine.sqlite" % tmp

    def store(self):
        store = persistence.Store(self.db)
        self.addCleanup(store.close)
        return store

    def running(self, **record):
        """A store holding migration "a" * 32, running, with ``record``."""
        store = self.store()
        store.create("a" * 32, dict({"state": "running",
                                     "direction": "outgoing"}, **record))
        return store, "a" * 32

    def test_records_survive_a_restart(self):
        store = self.store()
        store.create("a" * 32, {"state": "queued", "direction": "outgoing",
                                "size": 100})
        store.save("a" * 32, state="running")
        store.new_run("a" * 32, state="queued", n=2)
        store.create("b" * 32, {"state": "complete",
                                "direction": "incoming"})
        again = self.store()
        for s in (store, again):
            rec = s.record("a" * 32)
            self.assertEqual(("queued", 2, "outgoing"),
                             (rec["state"], rec["n"], rec["direction"]))
            self.assertEqual(2, len(s.records()))
            self.assertIsNone(s.record("c" * 32))
            book, detail, _rec = s.load("a" * 32)
            self.assertEqual(["attempt-1", "attempt-2"],
                             sorted(d.name for d in book))
            self.assertEqual("attempt-2", detail.name)
        self.assertEqual(["queued", "started", "queued"],
                         [e["event"] for e in store.events("a" * 32)])

    def test_stages_give_bytes_progress_and_events(self):
        store, mid = self.running(size=1000)
        rec = store.save(mid, stages={
            "export": {"state": "complete", "done": 1000},
            "transfer": {"state": "running", "done": 500, "rate": 100.0},
        })
        self.assertEqual((1000, 500, None), (rec["bytes_export"],
                                             rec["bytes_transfer"],
                                             rec["bytes_import"]))
        self.assertEqual("transfer", rec["stage"])
        self.assertEqual(0.5, rec["progress"])
        self.assertEqual(100.0, rec["rate"])
        self.assertEqual(5.0, rec["eta"])
        rec = store.save(mid, state="failed", error="peer gone",
                         stages=dict(rec["stages"], transfer={
                             "state": "failed", "done": 600}))
        self.assertEqual(("failed", "transfer", None, None),
                         (rec["state"], rec["stage"], rec["rate"],
                          rec["eta"]))
        self.assertEqual([
            (None, "started", None), ("export", "started", 1000),
            ("export", "finished", 1000), ("transfer", "started", 500),
            ("transfer", "failed", 600), ("transfer", "failed", None)],
            [(e["stage"], e["event"], e["bytes"])
             for e in store.events(mid)])
        self.assertEqual("peer gone", store.events(mid)[-1]["message"])

    def test_a_refused_import_has_its_event(self):
        store, mid = self.running(direction="incoming")
        error = str(exception.ImportNotAllowed(
            peer="a", what="visibility public", reason="allowed: private"))
        store.save(mid, state="failed", error=error)
        self.assertEqual([(None, "started", None), (None, "refused", error),
                          (None, "failed", error)],
                         [(e["stage"], e["event"], e["message"])
                          for e in store.events(mid)])

    def test_stages_of_an_earlier_run_are_kept(self):
        store, mid = self.running(size=10)
        store.save(mid, stages={"export": {"state": "complete",
                                           "done": 10}})
        # A resumed run skips the export: it reports the transfer only.
        rec = store.save(mid, stages={"transfer": {"state": "complete",
                                                   "done": 10}})
        self.assertEqual((10, 10), (rec["bytes_export"],
                                    rec["bytes_transfer"]))
        rec = store.new_run(mid, state="queued", stages={})
        self.assertEqual(({}, None), (rec["stages"], rec["bytes_export"]))

    def test_rate_measured_when_a_stage_reports_none(self):
        store, mid = self.running(direction="incoming", size=1000)
        store.save(mid, stages={"import": {"state": "uploading",
                                           "done": 0}})
        time.sleep(0.2)
        rec = store.save(mid, stages={"import": {"state": "uploading",
                                                 "done": 400}})
        self.assertGreater(rec["rate"], 400)
        self.assertLess(rec["rate"], 2000)
        self.assertEqual("import", rec["stage"])
        self.assertEqual(0.4, rec["progress"])

    @contextlib.contextmanager
    def events_fail(self):
        """The database goes away as a migration's events are inserted
        (after its row was updated, in the same call).
        """
        def lost(mapper, connection, target):
            raise sa_exc.OperationalError(
                "INSERT INTO migration_events", {},
                Exception("server closed the connection unexpectedly"))
        sa.event.listen(db_models.MigrationEvent, "before_insert", lost)
        try:
            yield
        finally:
            sa.event.remove(db_models.MigrationEvent, "before_insert", lost)

    def test_the_events_of_a_lost_save_come_with_the_next(self):
        # The database failed as a stage's "finished" event was written:
        # the row must not keep the stage done without its event, or the
        # next save, seeing no change, never writes it (the functional
        # PostgreSQL restart test lost ('transfer', 'finished') so).
        store, mid = self.running(size=10)
        store.save(mid, stages={"transfer": {"state": "running",
                                             "done": 5}})
        with self.events_fail():
            # Again and again while the database stays away.
            for _ in range(3):
                self.assertRaises(persistence.DATABASE_ERRORS, store.save,
                                  mid, stages={"transfer": {
                                      "state": "complete", "done": 10}})
                self.assertRaises(persistence.DATABASE_ERRORS, store.create,
                                  "b" * 32, {"state": "queued",
                                             "direction": "outgoing"})
        # Nothing of either was kept.
        self.assertEqual("running",
                         store.record(mid)["stages"]["transfer"]["state"])
        self.assertIsNone(store.record("b" * 32))
        store.save(mid, state="complete", stages={
            "transfer": {"state": "complete", "done": 10}})
        self.assertEqual([(None, "started"), ("transfer", "started"),
                          ("transfer", "finished"), (None, "finished")],
                         [(e["stage"], e["event"])
                          for e in store.events(mid)])

    def test_a_retry_and_its_event_are_saved_together(self):
        # The "retried" event was written before, and apart from, the
        # retry's save: a database lost in between left the event of a
        # retry that never happened.
        store, mid = self.running()
        store.save(mid, state="failed", error="peer gone")
        with self.events_fail():
            self.assertRaises(persistence.DATABASE_ERRORS, store.new_run,
                              mid, notes=[(None, "retried", "attempt 2",
                                           None)], state="queued")
        self.assertEqual("failed", store.record(mid)["state"])
        self.assertNotIn("retried", [e["event"] for e in store.events(mid)])
        store.new_run(mid, notes=[(None, "retried", "attempt 2", None)],
                      state="queued")
        self.assertEqual([(None, "started"), (None, "failed"),
                          (None, "retried"), (None, "queued")],
                         [(e["stage"], e["event"])
                          for e in store.events(mid)])

    def test_load_raises_database_errors(self):
        store = self.store()
        self.assertIsNone(store.load("a" * 32))
        store.create("a" * 32, {"state": "queued", "direction": "outgoing"})
        with mock.patch.object(store.backend, "get_connection") as conn:
            conn.return_value.get_logbook.side_effect = \
                tf_exc.StorageFailure("database gone")
            self.assertRaises(tf_exc.StorageFailure, store.load, "a" * 32)

    def test_records_of_an_older_engine_are_imported_once(self):
        from taskflow.persistence import backends
        from taskflow.persistence import models as tf_models
        backend = backends.fetch({"connection": self.db})
        with contextlib.closing(backend.get_connection()) as conn:
            conn.upgrade()
            for mid, state, runs in (("a" * 32, "complete", 2),
                                     ("b" * 32, "failed", 1)):
                book = tf_models.LogBook("migration-%s" % mid, uuid=mid)
                for n in range(1, runs + 1):
                    detail = tf_models.FlowDetail(
                        "attempt-%d" % n, uuid="%s-%d" % (mid, n))
                    detail.meta = {
                        "migration_id": mid, "direction": "outgoing",
                        "state": state if n == runs else "failed",
                        "attempt": n, "image_id": "img", "peer": "b",
                        "size": 10, "created_at": "2026-11-01T10:00:00",
                        "updated_at": "2026-11-01T10:05:00",
                        "stages": {"export": {"state": "complete",
                                              "done": 10}},
                        "peer_image": {"image_id": "pimg",
                                       "os_hash_value": "h"},
                        "progress": 0.5}
                    book.add(detail)
                conn.save_logbook(book)
        backend.close()
        store = self.store()
        rec = store.record("a" * 32)
        self.assertEqual(("complete", 2, "pimg", "h", 10, 1.0),
                         (rec["state"], rec["attempt"],
                          rec["peer_image_id"], rec["peer_image_hash"],
                          rec["bytes_export"], rec["progress"]))
        self.assertEqual(datetime.datetime(2026, 11, 1, 10),
                         rec["created_at"])
        self.assertEqual("failed", store.record("b" * 32)["state"])
        self.assertEqual(0, store.import_flow_records())
        self.assertEqual(2, len(store.records()))


class TestDigest(testtools.TestCase):
    def test_fake_hash(self):
        images = fakes.FakeImages()
        image = images.add(b"abc")
        self.assertEqual(hashlib.sha512(b"abc").hexdigest(),
                         image["os_hash_value"])
