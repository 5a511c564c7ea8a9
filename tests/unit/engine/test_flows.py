"""The outgoing flow under TaskFlow's parallel engine: in pipelined mode a
stage that fails stops its siblings within seconds (rather than letting
them run on until ``stall_timeout``).
"""

import os
import shutil
import tempfile
import time


from dtn_migrate.common import states
from dtn_migrate.engine import migrations
from dtn_migrate.engine import persistence
from dtn_migrate.engine import resources
from dtn_migrate import exception
from dtn_migrate.staging import localfs
from tests.unit.engine import base
from tests.unit.engine import fakes
from tests.unit import testcase

MiB = 1 << 20
SIZE = 8 * MiB
#: Far longer than any test may wait: a stage that only stops when it
#: stalls makes the test fail.
STALL = 120
#: Generous bound on the time a failure takes to end the migration.
WITHIN = 30


class SlowImages(fakes.FakeImages):
    """Downloads at about 1.3 MB/s: the export runs for seconds."""

    def download(self, image_id, offset=0, stop=None):
        for chunk in super().download(image_id, offset, stop):
            time.sleep(0.05)
            yield chunk


class BackingOffImages(fakes.FakeImages):
    """Gives one MiB, then waits to retry (as ImageService does after a
    503) for longer than any test: only ``stop`` ends the wait.
    """

    def download(self, image_id, offset=0, stop=None):
        data = self.data[image_id]
        with self.lock:
            self.downloaded += MiB
        yield data[offset:offset + MiB]
        if stop is None:
            time.sleep(STALL)
        else:
            stop.wait(STALL)
        raise exception.ImageServiceUnavailable(cloud="a",
                                                reason="stopped")


class RefusingAgents(fakes.FakeAgents):
    """``start_transfer`` refused (the agent or its peer said no)."""

    def start_transfer(self, *args, **kwargs):
        raise exception.InvalidInput(reason="the peer refuses the transfer")


class FailingAgents(fakes.FakeAgents):
    """The transfer starts, then fails after its first MiB."""

    def _send(self, src, dst, files, tid):
        time.sleep(0.3)
        self._set(tid, state="failed", error="connection refused by peer")


class TestSiblingsStop(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="dtnm-flows-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def engine(self, agents_cls, images_cls=SlowImages):
        roots = {h: os.path.join(self.tmp, h) for h in ("dtn-a", "dtn-b")}
        for root in roots.values():
            os.makedirs(root, exist_ok=True)
        self.agents = agents_cls(roots)
        self.addCleanup(self.agents.close)
        self.images = images_cls("a")
        db = "sqlite:///%s/a-%s.sqlite" % (self.tmp, agents_cls.__name__)
        conf = base.make_conf("dtn-a", db)
        conf.set_override("stall_timeout", STALL, "engine")
        store = persistence.Store(db)
        self.addCleanup(store.close)
        res = resources.Resources(conf, self.images, self.agents,
                                  localfs.LocalBackend(roots["dtn-a"]))
        self.engine_a = migrations.Migrations(conf, store, res)
        self.addCleanup(self.stop_all)
        return self.engine_a

    def stop_all(self):
        for rec in self.engine_a.list():
            if rec["state"] in states.ACTIVE_STATES:
                base.cancel(self.engine_a, rec["migration_id"])
        self.engine_a.wait_idle(STALL)

    def migrate(self, engine, on_start=None):
        image = self.images.add(os.urandom(SIZE))
        t0 = time.monotonic()
        req = engine.request("b", images=[image["id"]],
                             options={"mode": "pipelined"})
        m = req["migrations"][0]
        if on_start is not None:
            on_start(m)
        self.assertTrue(engine.wait_idle(WITHIN),
                        "the migration ran on after a stage failed: %s"
                        % engine.get(m["migration_id"])["stages"])
        rec = engine.get(m["migration_id"])
        self.assertLess(time.monotonic() - t0, WITHIN)
        self.assertEqual("failed", rec["state"])
        return rec

    def assertExportStopped(self, rec):
        self.assertEqual("stopped", rec["stages"]["export"]["state"],
                         rec["stages"])
        self.assertLess(self.images.downloaded, SIZE)

    def test_start_transfer_refused(self):
        rec = self.migrate(self.engine(RefusingAgents))
        self.assertIn("the peer refuses the transfer", rec["error"])
        self.assertExportStopped(rec)
        self.assertEqual("failed", rec["stages"]["transfer"]["state"])

    def test_export_waiting_to_retry_stops(self):
        rec = self.migrate(self.engine(RefusingAgents, BackingOffImages))
        self.assertIn("the peer refuses the transfer", rec["error"])
        self.assertExportStopped(rec)

    def test_transfer_fails_later(self):
        rec = self.migrate(self.engine(FailingAgents))
        self.assertIn("connection refused by peer", rec["error"])
        self.assertExportStopped(rec)

    def test_peer_import_fails(self):
        engine = self.engine(fakes.FakeAgents)
        self.agents.rate = MiB

        def import_fails(m):
            self.agents.reports[("dtn-b", m["transfer_id"])] = {
                "state": "failed", "error": "glance b refused the image",
                "attempt": 1}
        rec = self.migrate(engine, import_fails)
        self.assertIn("glance b refused the image", rec["error"])
        self.assertExportStopped(rec)
        self.assertNotEqual("complete", (rec["stages"].get("transfer") or
                                         {}).get("state"))

    def test_many_migrations_each_fail_fast(self):
        """The repeated form: eight migrations at once, all refused."""
        engine = self.engine(RefusingAgents)
        engine.conf.set_override("max_concurrent_migrations", 8, "engine")
        images = [self.images.add(os.urandom(MiB * 2)) for _ in range(8)]
        t0 = time.monotonic()
        req = engine.request("b", images=[i["id"] for i in images])
        self.assertTrue(engine.wait_idle(WITHIN))
        self.assertLess(time.monotonic() - t0, WITHIN)
        recs = [engine.get(m["migration_id"]) for m in req["migrations"]]
        self.assertEqual(["failed"] * 8, [r["state"] for r in recs])
        self.assertLess(self.images.downloaded, 8 * 2 * MiB)
