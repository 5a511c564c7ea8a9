"""Two engines (source and peer) with in-memory Glances and fake agents:
the flows, pipelining, dedupe, resume and errors.
"""

import contextlib
import hashlib
import os
import shutil
import tempfile
import time
from unittest import mock
import uuid

import fixtures
from futurist import _thread as futurist_thread
import oslo_messaging as messaging
import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from taskflow import exceptions as tf_exc

from dtn_migrate import context
from dtn_migrate.common import states
from dtn_migrate.coordination import leader
from dtn_migrate.db import models as db_models
from dtn_migrate.engine.flows import incoming as incoming_flow
from dtn_migrate.engine import persistence
from dtn_migrate.engine import resources
from dtn_migrate.engine.tasks import incoming as incoming_tasks
from dtn_migrate import exception
from tests.unit.engine import base
from tests.unit.engine import fakes
from tests.unit import testcase


class TestMigrations(base.EngineTestCase):
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

    def test_a_selector_that_matches_nothing_says_what_it_asked(self):
        self.image(tags=["other"])
        exc = self.assertRaises(exception.InvalidInput, self.a.request, "b",
                                selector={"tag": "dr",
                                          "properties": {"os": "linux",
                                                         "tier": "gold"}})
        self.assertEqual("Invalid input: no active image this project can "
                         "see has tag 'dr' and properties os=linux, "
                         "tier=gold",
                         str(exc))
        exc = self.assertRaises(exception.InvalidInput, self.a.request, "b",
                                selector={"properties": {"os": "linux"}})
        self.assertEqual("Invalid input: no active image this project can "
                         "see has properties os=linux", str(exc))

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

    def test_a_failure_names_the_migration_once(self):
        # The record is the migration's: its error does not say again
        # "Migration <id> failed: ", nor does the peer's in it.
        image = self.image()
        m = self.fail_first_import(image)
        self.assertNotIn("Migration ", m["error"])
        [imp] = self.b.list()
        self.assertNotIn("Migration ", imp["error"])

    def test_cancel_of_a_finished_migration_409(self):
        image = self.image()
        [m] = self.run_request([image["id"]])
        self.assertEqual("complete", m["state"], m["error"])
        exc = self.assertRaises(exception.MigrationStateConflict,
                                self.a.cancel, m["migration_id"])
        self.assertEqual("Migration %s is already complete: cannot cancel "
                         "it." % m["migration_id"], str(exc))
        self.assertEqual("complete", self.a.get(m["migration_id"])["state"])

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
        self.assertIn(rec["state"], states.ACTIVE_STATES)
        self.assertEqual(2, rec["attempt"])
        self.assertRaises(exception.InvalidInput, self.b.incoming, tid,
                          "a", 0)
        self.assertRaises(exception.InvalidInput, self.b.incoming, tid,
                          "a", "2")

    def plant(self, tid, **fields):
        """An image a Glance user made, carrying ``tid``'s marker (and a
        copy of a genuine image's other properties, when ``fields``
        name them): protected, active, with the right data.
        """
        fields.setdefault("protected", True)
        fields["dtn_migrate_transfer_id"] = tid
        return self.glance_b.add(b"planted", **fields)

    def test_planted_markers_are_never_reused_or_deleted(self):
        """Images a Glance user marked with the transfer's id, in another
        project and in the import's own (but not created by this
        service), are left alone: the retry imports into a new image.
        """
        image = self.image()
        first = self.fail_first_import(image)
        tid = first["transfer_id"]
        planted = [self.plant(tid, owner="other"),
                   self.plant(tid, owner="svc", status="queued",
                              size=None),
                   self.plant(tid, owner="svc", status="killed")]
        [m] = self.run_request([image["id"]])
        self.assertEqual("complete", m["state"], m["error"])
        imported = m["peer_image"]["image_id"]
        self.assertNotIn(imported, [p["id"] for p in planted])
        for p in planted:
            self.assertEqual(p, self.glance_b.images[p["id"]])
        self.assertEqual(self.glance_a.data[image["id"]],
                         self.glance_b.data[imported])

    def test_same_transfer_id_from_two_peers(self):
        """Peer c's transfer that reuses peer a's transfer id is an
        import of its own: it neither resumes nor answers a's record.
        """
        tid = "3" * 32
        rec_a = self.b.incoming(tid, "a")
        self.b.cancel(rec_a["migration_id"])
        self.assertTrue(self.b.wait_idle(10))
        rec_c = self.b.incoming(tid, "c", 2)
        self.assertNotEqual(rec_a["migration_id"], rec_c["migration_id"])
        self.assertEqual(("c", 2), (rec_c["peer"], rec_c["attempt"]))
        again = self.b.get(rec_a["migration_id"])
        self.assertEqual(("a", "cancelled", 1),
                         (again["peer"], again["state"], again["attempt"]))
        self.b.cancel(rec_c["migration_id"])

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


class TestCallers(base.EngineTestCase):
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

    def test_retry_names_no_other_projects_migration(self):
        # p1's migration of a shared image failed; p2 then migrated the
        # same image.  p1's retry is p1's business: it runs, and never
        # names p2's migration (before, it was "superseded by migration
        # <p2's id>").
        image = self.image(size=2 << 20, visibility="shared")
        self.agents.fail_start = 1
        [mine] = self.a.request("b", images=[image["id"]],
                                context=self.ctx("p1"))["migrations"]
        self.assertTrue(self.a.wait_idle(60))
        self.assertEqual("failed", self.a.get(mine["id"])["state"])
        [theirs] = self.a.request("b", images=[image["id"]],
                                  context=self.ctx("p2"))["migrations"]
        self.assertNotEqual(mine["id"], theirs["id"])
        self.assertTrue(self.a.wait_idle(60))
        self.assertTrue(self.b.wait_idle(60))
        self.assertEqual("complete", self.a.get(theirs["id"])["state"])
        rec = self.a.retry(mine["id"], "p1")
        self.assertEqual((mine["id"], 2), (rec["id"], rec["attempt"]))
        self.assertTrue(self.a.wait_idle(60))
        self.assertTrue(self.b.wait_idle(60))
        rec = self.a.get(mine["id"])
        self.assertEqual("complete", rec["state"], rec["error"])
        # Within a project, a newer migration still supersedes.
        self.agents.fail_start = 1
        [old] = self.a.request("b", images=[image["id"]], options={
            "force": True}, context=self.ctx("p3"))["migrations"]
        self.assertTrue(self.a.wait_idle(60))
        self.assertEqual("failed", self.a.get(old["id"])["state"])
        self.a.request("b", images=[image["id"]], options={"force": True},
                       context=self.ctx("p3"))
        self.assertTrue(self.a.wait_idle(60))
        self.assertTrue(self.b.wait_idle(60))
        exc = self.assertRaises(exception.MigrationStateConflict,
                                self.a.retry, old["id"], "p3")
        self.assertIn("superseded", str(exc))

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
        # 250 calls, about one write a second (plus stage changes: the
        # preflight's running and complete among them).
        self.assertGreaterEqual(len(saves), 2)
        self.assertLessEqual(len(saves), 10)
        # The export's bytes reach the row (on a loaded machine its
        # first bytes may come after the 2.5 s above).
        for _ in range(1500):
            self.a.report_progress()
            if self.a.store.record(mid)["bytes_export"]:
                break
            time.sleep(0.02)
        self.assertGreater(self.a.store.record(mid)["bytes_export"] or 0, 0)
        self.assertTrue(self.a.wait_idle(60))


class TestConf(testcase.TestCase):
    def test_overrides_stay_in_their_configuration(self):
        a = base.make_conf("dtn-a", "sqlite://")
        b = base.make_conf("dtn-b", "sqlite://")
        a.set_override("keep_failed", False, "staging")
        self.assertEqual(("dtn-a", "dtn-b"), (a.engine.agent_host,
                                              b.engine.agent_host))
        self.assertEqual((False, True), (a.staging.keep_failed,
                                         b.staging.keep_failed))


class TestStore(testcase.TestCase):
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
        # No rate known yet: the stage furthest behind (the import), and
        # no ETA; the rate the transfer reports.
        self.assertEqual(0.0, rec["progress"])
        self.assertEqual(100.0, rec["rate"])
        self.assertIsNone(rec["eta"])
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
        store, mid = self.running(direction="incoming", size=10000)
        clock = [100.0]
        with mock.patch.object(store, "clock", lambda: clock[0]):
            for done in range(0, 3200, 400):
                rec = store.save(mid, stages={"import": {
                    "state": "uploading", "done": done}})
                clock[0] += 1.0
        self.assertEqual(400.0, round(rec["rate"], 1))
        self.assertEqual("import", rec["stage"])
        self.assertEqual(0.28, rec["progress"])
        self.assertEqual(18.0, round(rec["eta"], 1))

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


class TestDigest(testcase.TestCase):
    def test_fake_hash(self):
        images = fakes.FakeImages()
        image = images.add(b"abc")
        self.assertEqual(hashlib.sha512(b"abc").hexdigest(),
                         image["os_hash_value"])


class TestAcrossEngines(base.EngineTestCase):
    """With engines that share the work, a request holds the engines'
    lock of its peer: two engines asked for one image at once (a Glance
    event heard by one, a scan of another) start one migration, not two
    (issue 39; before, each engine held only its own lock).
    """

    def setUp(self):
        super().setUp()
        self.held = []

        @contextlib.contextmanager
        def holding(name):
            if self.refuse:
                raise leader.LockUnavailable("lock %s: held by another "
                                             "engine for 10 s" % name)
            self.held.append(name)
            yield

        self.refuse = False
        self.a.holding = holding

    def test_a_request_holds_the_peer_s_lock(self):
        [m] = self.run_request([self.image()["id"]])
        self.assertEqual("complete", m["state"], m["error"])
        self.assertEqual(["request-b"], self.held)

    def test_no_lock_no_migration(self):
        self.refuse = True
        image = self.image()
        err = self.assertRaises(exception.ServiceUnavailable,
                                self.a.request, "b", images=[image["id"]])
        self.assertIn("held by another engine", str(err))
        self.assertEqual([], self.a.list(direction="outgoing"))
