"""Outcomes of migrations (``engine/outcomes.py``): the staged files go
after the outcome is saved and told, and an outcome a database outage
kept from being saved is settled once the database answers.
"""

import threading
import time
from unittest import mock

from dtn_migrate.common import states
from dtn_migrate.engine.flows import incoming as incoming_flow
from dtn_migrate.engine import persistence
from dtn_migrate.engine import resources
from dtn_migrate import exception
from tests.unit.engine import base


class TestStagedRemoval(base.EngineTestCase):
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


class TestDatabaseOutage(base.EngineTestCase):
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
                    states.FINAL_STATES)
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
                        states.FINAL_STATES)
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
