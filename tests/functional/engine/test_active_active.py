"""Active/active engines (issue 39): three dtn-migrate-engine processes
of cloud A on one MariaDB share its migrations through a jobboard on a
real ZooKeeper (and, in a second class, a real Redis); cloud B keeps
its single engine.

* A batch of migrations asked for at once runs each migration once (one
  import per image on B), spread over the engines.
* kill -9 of the engine that owns a migration in its export (A's Glance
  slowed by a fault proxy), its transfer and its import (B's engine
  held), in one test: another engine takes it over each time, and it
  completes once, bit-exact; the seconds from each kill to the new
  owner's claim and to its first write are kept.
* SIGSTOP of the owner past its session, then SIGCONT: another engine
  took the migration over, A's agent refuses every command of the
  paused engine's claim (twice over), and the paused one writes
  nothing more.
* The backend cut from the engine that runs a migration, past its
  session, twice: another engine takes it over each time.

The clouds, the MariaDB and the ZooKeeper (Redis) are the class's; each
test has its own jobboard namespace and database.
"""

import collections
import os
import signal
import time
import uuid

from testtools import content

import devcloud
from devcloud import coordination
from devcloud import dbserver
from devcloud import relay
from dtn_migrate.db import api as db_api
from dtn_migrate import exception
from tests.functional import base
from tests.functional.migration import harness as migration
from tests.functional.migration import scope as class_scope

MiB = 1 << 20
ENGINES = 3
#: ZooKeeper's session of an engine (s): how long a dead engine's
#: migrations wait for another.
SESSION = 4.0


def _refusal(call, host, transfer_id, epoch):
    """The StaleEpoch of ``call`` with a stale ``epoch``, or None when
    the agent accepted it (the new owner has not told it yet).
    """
    try:
        call({}, host, transfer_id, epoch=epoch)
    except exception.StaleEpoch as exc:
        return exc
    return None


class TestActiveActive(migration.MigrationTestCase):
    """On ZooKeeper."""

    backend = "zookeeper"
    server_class = coordination.ZooKeeper

    @staticmethod
    def task_flow(server):
        return {"jobboard_backend_driver": "zookeeper_taskflow_driver",
                "jobboard_backend_port": str(server.port),
                "jobboard_zookeeper_session_timeout": str(SESSION)}

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.scope = class_scope.ClassScope.opened(
            "dtnm-aa-", (devcloud.available(), base.Broker.available(),
                         dbserver.available("mariadb"),
                         coordination.available(cls.backend)),
            cls._start_servers)

    @classmethod
    def _start_servers(cls, scope):
        cls.mariadb = scope._started(dbserver.MariaDB())
        cls.server = scope._started(cls.server_class())
        # A's Glance behind a fault proxy: an export slowed down.
        cls.a, cls.b = scope.clouds(proxy_a=True)

    @classmethod
    def tearDownClass(cls):
        cls.scope.close()
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        a = self.a
        a.engine.stop()
        self.persistence = self.mariadb.database(
            "dtnm_aa_%s" % uuid.uuid4().hex[:8])
        namespace = "dtnm-aa-%s" % uuid.uuid4().hex[:8]
        extra = {"task_flow": dict(self.task_flow(self.server),
                                   jobboard_enabled="true",
                                   jobboard_backend_namespace=namespace)}
        self.engines = {}
        #: Each engine reaches the backend through a relay of its own:
        #: the backend cut from one engine (:meth:`relay.Relay.cut`).
        self.links = {}
        for i in range(ENGINES):
            name = "%s-%d" % (a.engine_name, i)
            link = self.links[name] = relay.Relay(
                ("127.0.0.1", self.server.port))
            self.addCleanup(link.close)
            mine = {"task_flow": dict(
                extra["task_flow"], jobboard_backend_port=str(link.port))}
            engine = migration.Engine(
                self.workdir, name, a.broker.url(), a.agent_name,
                a.glance_auth(), a.staging, self.persistence, extra=mine)
            self.addCleanup(engine.discard)
            self.addOnException(
                lambda exc_info, e=engine: self.addDetail(
                    "log-%s" % e.name, content.text_content(e.tail(200))))
            self.engines[name] = engine
        for engine in self.engines.values():
            engine.start()
        for engine in self.engines.values():
            engine.wait_ready(a.bus.engine)
        # The class's single engine comes back for the next test.
        self.addCleanup(self._single_engine)

    def _single_engine(self):
        for engine in self.engines.values():
            engine.discard()
        self.a.engine.start()
        self.a.wait_ready()

    def row(self, migration_id):
        """The migration's row, read from the engines' database."""
        db = db_api.Database(connection=self.persistence)
        try:
            return db.migration_get(migration_id)
        finally:
            db.dispose()

    def under_way(self, migration_id, past=0):
        """The row of ``migration_id`` (read from the engines' database)
        once an engine owns it and more than ``past`` of its bytes
        crossed.
        """
        return self.wait_until(
            lambda: (lambda r: r if r["state"] == "running" and
                     r.get("owner") and
                     (r.get("bytes_transfer") or 0) > past else None)(
                self.row(migration_id)),
            "the migration under way", timeout=120, interval=0.2)

    def test_a_batch_runs_each_migration_once_over_the_engines(self):
        sources = [self.upload(self.a, data=os.urandom(2 * MiB),
                               name="aa-%02d" % i) for i in range(12)]
        req = self.migrate(images=[s["id"] for s in sources])
        recs = [self.wait_migration(m["migration_id"], timeout=300)
                for m in req["migrations"]]
        owners = collections.Counter()
        for source, rec in zip(sources, recs):
            # One import of each on B (assertMigrated: one image of the
            # transfer), and one claim of it on A (epoch 1).
            self.assertMigrated(rec, source)
            self.assertEqual(1, rec["epoch"], rec)
            owners[rec["owner"]] += 1
        self.addDetail("owners", content.text_content(repr(owners)))
        # Spread over every engine: a busy conductor leaves new jobs to
        # the idle ones (conductor.STAGGER).
        self.assertEqual(set(self.engines), set(owners), owners)

    def kill_owner(self, mid, ready, what):
        """Once the row of ``mid`` is ``ready(row)`` (an engine owns it),
        kill -9 its owner; returns (seconds from the kill to the new
        owner's claim, to its first write), the owner killed started
        again.
        """
        first = self.wait_until(
            lambda: (lambda r: r if r.get("owner") and ready(r) else None)(
                self.row(mid)), what, timeout=120, interval=0.1)
        owner = first["owner"]
        t0 = time.monotonic()
        self.engines[owner].kill9()
        taken = self.wait_until(
            lambda: (lambda r: r if r.get("owner") not in (owner, None)
                     else None)(self.row(mid)),
            "another engine to take it", timeout=60, interval=0.1)
        claimed = time.monotonic() - t0
        self.assertGreater(taken["epoch"], first["epoch"])
        self.assertEqual("running", taken["state"])
        # Its first write: the new owner's progress.
        self.wait_until(
            lambda: self.row(mid)["updated_at"] > taken["updated_at"],
            "the new owner's progress", timeout=60, interval=0.1)
        self.engines[owner].start()
        return round(claimed, 2), round(time.monotonic() - t0, 2)

    def test_kill_9_of_the_owner_in_each_stage(self):
        """kill -9 of the engine that owns a migration in its export,
        its transfer and its import, in one test: another engine takes
        it over each time, and it completes once, bit-exact.

        A serial migration, so that each stage runs alone: A's Glance
        sends the image at 2 MiB/s (the fault proxy) until the export's
        takeover; the DTN link carries 4 MiB/s; B's engine is held
        (SIGSTOP) from then on, so that A's migration waits in its
        import stage until it runs again.
        """
        source = self.upload(self.a, data=os.urandom(32 * MiB),
                             name="aa-takeover")
        self.a.proxy.slow(2 * MiB, method="GET", path=r"/file$")
        self.addCleanup(self.a.proxy.clear)
        req = self.migrate(images=[source["id"]], mode="serial",
                           transfer_options={"rate_limit": 4 * MiB})
        mid = req["migrations"][0]["migration_id"]
        takeovers = {"export": self.kill_owner(
            mid, lambda r: r["stage"] == "export" and
            (r.get("bytes_export") or 0) > 0, "the export under way")}
        self.a.proxy.clear()
        # After the preflight (B's engine answers it): B imports nothing
        # until it runs again.
        peer = self.b.engine.proc.pid
        os.kill(peer, signal.SIGSTOP)
        try:
            takeovers["transfer"] = self.kill_owner(
                mid, lambda r: r["stage"] == "transfer" and
                (r.get("bytes_transfer") or 0) > 0, "the transfer under way")
            # Its flow waits for B's import (the stage shows once B
            # reports it).
            takeovers["import"] = self.kill_owner(
                mid, lambda r: (r.get("bytes_transfer") or 0) >=
                source["size"], "the transfer's end")
        finally:
            os.kill(peer, signal.SIGCONT)
        self.addDetail("takeover-seconds",
                       content.text_content(repr(takeovers)))
        rec = self.wait_migration(mid, timeout=300)
        self.assertMigrated(rec, source)
        for _claimed, progress in takeovers.values():
            self.assertLess(progress, SESSION + 10, takeovers)

    def test_sigstop_of_the_owner_past_its_session(self):
        """The owner paused past its session, then resumed: another
        engine took the migration over; the paused one, told its claim
        is gone (or refused its next save), writes nothing more; the
        image is imported once.
        """
        source = self.upload(self.a, data=os.urandom(32 * MiB),
                             name="aa-paused")
        req = self.migrate(images=[source["id"]],
                           transfer_options={"rate_limit": 4 * MiB})
        mid = req["migrations"][0]["migration_id"]
        first = self.under_way(mid)
        paused = self.engines[first["owner"]]
        os.kill(paused.proc.pid, signal.SIGSTOP)
        try:
            # From the database: the bus's calls that the paused engine
            # took wait for it.
            taken = self.wait_until(
                lambda: (lambda r: r if r.get("owner") not in
                         (first["owner"], None) else None)(self.row(mid)),
                "another engine to take it", timeout=60, interval=0.1)
            # The paused engine's claim, at A's real agent over the bus:
            # each of its commands is refused now (the new owner told
            # the agent of its claim), and the transfer runs on.
            self.assertStaleRefused(mid, first)
        finally:
            os.kill(paused.proc.pid, signal.SIGCONT)
        rec = self.wait_migration(mid, timeout=300)
        self.assertMigrated(rec, source)
        self.assertEqual(taken["owner"], rec["owner"])
        log = paused.log_text()
        self.assertTrue(
            "its jobboard claim was lost" in log or
            "was claimed by another engine" in log or
            "a later claim" in log, paused.tail(80))

    def assertStaleRefused(self, migration_id, stale):
        """Every command of ``stale``'s claim (the row as it was) is
        refused by A's agent, twice over, and changes nothing there.
        """
        agent, host = self.a.bus.agent(), self.a.agent_name
        tid = stale["transfer_id"]
        epoch = stale["epoch"]
        self.wait_until(
            lambda: self.row(migration_id)["epoch"] > epoch,
            "the new claim", timeout=30, interval=0.1)
        # A read first: nothing is cancelled if the agent still waits
        # for the new owner's word.
        self.wait_until(
            lambda: _refusal(agent.get_transfer, host, tid, epoch),
            "a read of epoch %d refused" % epoch, timeout=15, interval=0.2)
        before = agent.get_transfer({}, host, tid)
        for _ in range(2):
            for call in (agent.cancel_transfer, agent.resume_transfer,
                         agent.get_transfer):
                err = _refusal(call, host, tid, epoch)
                self.assertIsNotNone(err, "%s of epoch %d was accepted"
                                     % (call.__name__, epoch))
                self.assertIn("a later claim", str(err))
        after = agent.get_transfer({}, host, tid)
        self.assertNotIn(after["state"], ("cancelled", "failed"))
        self.assertGreaterEqual(after.get("bytes_done") or 0,
                                before.get("bytes_done") or 0)

    def restarted_twice(self, server, name):
        """``server`` (the jobboard's, or the engines' database) restarted
        twice under a running migration: it completes, imported once.
        """
        source = self.upload(self.a, data=os.urandom(32 * MiB), name=name)
        req = self.migrate(images=[source["id"]],
                           transfer_options={"rate_limit": 4 * MiB})
        mid = req["migrations"][0]["migration_id"]
        crossed = 0
        for _ in range(2):
            crossed = self.under_way(mid, past=crossed)["bytes_transfer"]
            server.restart(down=1.0)
        rec = self.wait_migration(mid, timeout=300)
        self.assertMigrated(rec, source)

    def test_backend_cut_from_the_owner_twice(self):
        """The backend cut from the engine that runs a migration (its
        connections reset, new ones refused) for longer than its
        session, twice: another engine takes the migration over each
        time, the cut one is fenced though it ran on, and the image is
        imported once.
        """
        # Long enough that the cut engine, which runs on unaware until
        # its session ends, does not finish it first.
        source = self.upload(self.a, data=os.urandom(128 * MiB),
                             name="aa-cut")
        req = self.migrate(images=[source["id"]],
                           transfer_options={"rate_limit": 4 * MiB})
        mid = req["migrations"][0]["migration_id"]
        crossed, cut = 0, []
        for _ in range(2):
            first = self.under_way(mid, past=crossed)
            owner = first["owner"]
            cut.append(owner)
            self.links[owner].cut(down_for=SESSION + 6)
            taken = self.wait_until(
                lambda: (lambda r: r if r.get("owner") not in (owner, None)
                         else None)(self.row(mid)),
                "another engine to take it", timeout=60, interval=0.1)
            crossed = taken.get("bytes_transfer") or 0
        rec = self.wait_migration(mid, timeout=300)
        self.assertMigrated(rec, source)
        self.assertNotEqual(cut[-1], rec["owner"])
        for owner in cut:
            log = self.engines[owner].log_text()
            self.assertTrue(
                "its jobboard claim was lost" in log or
                "was claimed by another engine" in log or
                "a later claim" in log, self.engines[owner].tail(80))

    def test_backend_restarted_mid_migration_twice(self):
        """A ZooKeeper session may outlive the restart or expire: then the
        engines fence their flows and claim the jobs again; a Redis
        restart loses the jobs: the leader posts them again.
        """
        self.restarted_twice(self.server, "aa-restart")

    def test_database_restarted_mid_migration_twice(self):
        self.restarted_twice(self.mariadb, "aa-db-restart")


class TestActiveActiveOnRedis(TestActiveActive):
    """The core cases on Redis: claims that expire unless extended (a
    conductor paused past its claim: tests.functional.coordination).
    """

    backend = "redis"
    server_class = coordination.Redis
    test_sigstop_of_the_owner_past_its_session = None
    # Its claims expire as a ZooKeeper session does: once, on ZooKeeper.
    test_backend_cut_from_the_owner_twice = None
    # The database's faults are the backend's own: once, on ZooKeeper.
    test_database_restarted_mid_migration_twice = None

    @staticmethod
    def task_flow(server):
        return {"jobboard_backend_driver": "redis_taskflow_driver",
                "jobboard_backend_port": str(server.port),
                "jobboard_expiration_time": str(int(SESSION))}
