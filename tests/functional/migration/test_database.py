"""The engine's database between two real clouds.

* The migration's row of ``migrations`` in MariaDB, read directly while
  the migration runs and after: stage bytes, progress, rate and the
  event timeline.

* Restarted during a migration (MariaDB, PostgreSQL): once while the
  data moves, and then either restarted again while the peer import is
  held (PostgreSQL) or held down while the migration finishes, so that
  its outcome cannot be saved (MariaDB: TaskFlow's own retries of each
  save take about a minute to run out).  The engine takes its lock again
  each time, saves the outcome when the database is back, and a new
  request works.
* Shared by a second engine (SQLite, MariaDB, PostgreSQL): the second
  ``dtn-migrate-engine`` exits non-zero with the reason, the first goes
  on; a killed engine restarts at once on the same database.

The database servers are private ones (devcloud/dbserver.py):
restarting the machine's own would break whatever else uses them.  The
two clouds are set up once for the class; each test starts engine A on
its own database.
"""

import os
import re
import uuid

import testtools
from testtools import content

from dtn_migrate.db import api as db_api
import devcloud
from dtn_migrate.engine import lock
from dtn_migrate import exception
from tests.functional import base
from devcloud import dbserver
from tests.functional.migration import harness as migration
from tests.functional.migration import scope as class_scope

#: The context of the tests' requests over the bus.
ADMIN = migration.ADMIN

MiB = 1 << 20
FILE = r"/file$"
ENGINE_CONF = {"engine": {"database_check_interval": 1,
                          "lock_timeout": 3}}
REFUSED = "Another dtn-migrate-engine uses the persistence database"


class TestPersistenceDatabase(migration.MigrationTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.scope = class_scope.ClassScope.opened(
            "dtnm-dbclass-", (devcloud.available(), base.Broker.available(),
                              dbserver.available("mariadb"),
                              dbserver.available("postgresql")),
            cls._start_servers)

    @classmethod
    def _start_servers(cls, scope):
        cls.servers = {"mariadb": scope._started(dbserver.MariaDB()),
                       "postgresql": scope._started(dbserver.PostgreSQL())}
        cls.a, cls.b = scope.clouds(proxy_b=True)

    @classmethod
    def tearDownClass(cls):
        cls.scope.close()
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        for cloud in (self.a, self.b):
            self.addOnException(
                lambda exc_info, c=cloud: self.addDetail(
                    "log-%s" % c.engine_name,
                    content.text_content(c.engine.tail(300))))

    def engine_a(self, persistence):
        """Engine A, started afresh on ``persistence``."""
        a = self.a
        a.engine.stop()
        a.engine = migration.Engine(
            self.workdir, a.engine_name, a.broker.url(), a.agent_name,
            a.glance_auth(), a.staging, persistence, extra=ENGINE_CONF)
        self.addCleanup(a.engine.stop)
        a.engine.start()
        a.wait_ready()
        return a.engine

    def database(self, kind):
        if kind == "sqlite":
            return "sqlite:///%s/engine-a.sqlite" % self.workdir
        return self.servers[kind].database("dtnm_%s" % uuid.uuid4().hex[:8])

    def assertSecondEngineRefused(self, persistence):
        """A second engine on ``persistence`` exits non-zero and says
        why; the first one goes on serving.
        """
        a = self.a
        second = migration.Engine(
            self.workdir, "second-%s" % uuid.uuid4().hex[:4], a.broker.url(),
            a.agent_name, a.glance_auth(), a.staging, persistence,
            extra=ENGINE_CONF)
        self.addCleanup(second.stop)
        second.start()
        self.assertEqual(2, second.proc.wait(60), second.tail())
        self.assertIn(REFUSED, second.log_text())
        self.assertEqual(a.engine_name, a.bus.engine.ping({})["host"])

    def row(self, persistence, migration_id):
        """(row, events) of a migration, read from the database."""
        db = db_api.Database(connection=persistence)
        try:
            return (db.migration_get(migration_id),
                    db.migration_events_get(migration_id))
        finally:
            db.dispose()

    def assertRowComplete(self, persistence, migration_id, source):
        row, events = self.row(persistence, migration_id)
        size = source["size"]
        self.assertEqual(
            ("complete", None, 1.0, size, size, size, source["id"],
             "outgoing", None),
            (row["state"], row["stage"], row["progress"],
             row["bytes_export"], row["bytes_transfer"],
             row["bytes_import"], row["image_id"], row["direction"],
             row["error"]))
        self.assertEqual(source["os_hash_value"], row["peer_image_hash"])
        self.assertTrue(row["peer_image_id"])
        self.assertIsNotNone(row["finished_at"])
        self.assertGreaterEqual(row["finished_at"], row["started_at"])
        seen = [(e["stage"], e["event"]) for e in events]
        self.assertEqual((None, "queued"), seen[0])
        for stage in ("export", "transfer", "import"):
            self.assertIn((stage, "started"), seen)
            self.assertIn((stage, "finished"), seen)
        self.assertEqual((None, "finished"), seen[-1])
        return row, events

    def test_mariadb_row_shows_progress_while_it_runs(self):
        a, b = self.a, self.b
        persistence = self.database("mariadb")
        self.engine_a(persistence)
        source = self.upload(a, data=os.urandom(32 * MiB), name="rows")
        req = a.bus.engine.migrate(
            ADMIN, b.agent_name, images=[source["id"]],
            # 8 s of transfer: the agent pushes its progress every 2 s
            # (progress_event_interval), so several pushes land inside
            # it (at 8 MiB/s, 4 s held one at best, and CI once saw none
            # reach the row).
            options={"transfer_options": {"rate_limit": 4 * MiB}})
        [m] = req["migrations"]
        mid = m["migration_id"]
        self.assertEqual(mid, m["id"])
        # Under way: the row has the stage bytes, a rate and an ETA.
        running = []

        def moving():
            row, events = self.row(persistence, mid)
            if row["state"] == "running" and \
                    (row["bytes_transfer"] or 0) > 0 and \
                    row["bytes_transfer"] < source["size"]:
                running.append((row, events))
            return running
        self.wait_until(moving, "the row to show the transfer", timeout=120,
                        interval=0.2)
        row, events = running[0]
        self.assertEqual(source["size"], row["size"])
        # Until a stage's rate is known, progress is the stage furthest
        # behind (the import, maybe still at 0: common.stages.progress).
        self.assertGreaterEqual(row["progress"], 0.0)
        self.assertLess(row["progress"], 1.0)
        self.assertIn(row["stage"], ("export", "transfer", "import"))
        self.assertIsNotNone(row["started_at"])
        seen = [(e["stage"], e["event"]) for e in events]
        self.assertEqual([(None, "queued"), (None, "started")], seen[:2])
        self.assertIn(("transfer", "started"), seen)
        # The row moves at most every progress_interval (2 s).
        later = []

        def moved():
            again, _events = self.row(persistence, mid)
            if again["updated_at"] > row["updated_at"]:
                later.append(again)
            return later
        self.wait_until(moved, "the row to be written again", timeout=30,
                        interval=0.2)
        # Once the rates are known, the row's progress moves off 0.
        self.wait_until(
            lambda: (lambda r: r["state"] == "running" and
                     0.0 < r["progress"] < 1.0)(
                self.row(persistence, mid)[0]),
            "the row's progress under way", timeout=30, interval=0.2)
        rec = self.wait_migration(mid, timeout=180)
        self.assertMigrated(rec, source)
        self.assertRowComplete(persistence, mid, source)
        # The RPC reply is the row, times as ISO 8601.
        self.assertEqual(rec["bytes"], {"export": source["size"],
                                        "transfer": source["size"],
                                        "import": source["size"]})
        self.assertRegex(rec["created_at"],
                         r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}$")

    def test_peers_and_retry_over_the_engine(self):
        """list_peers/get_peer ask the real agent; retry_migration of a
        migration whose peer import failed completes it under the same
        record, as its next attempt.
        """
        a, b = self.a, self.b
        persistence = self.database("mariadb")
        self.engine_a(persistence)
        peers = a.bus.engine.list_peers(ADMIN)
        self.assertEqual([b.agent_name], [p["name"] for p in peers])
        peer = a.bus.engine.get_peer(ADMIN, b.agent_name)
        self.assertTrue(peer["reachable"], peer)
        self.assertIsNotNone(peer["rtt_ms"])
        self.assertRaises(exception.PeerNotFound, a.bus.engine.get_peer, ADMIN,
                          "nowhere")
        source = self.upload(a, data=os.urandom(8 * MiB), name="retry")
        # Glance B refuses every upload: the import fails for good.
        b.proxy.fail(503, retry_after=0, method="PUT", path=FILE)
        self.addCleanup(b.proxy.clear)
        req = a.bus.engine.migrate(ADMIN, b.agent_name, images=[source["id"]],
                                   options={"mode": "serial"})
        mid = req["migrations"][0]["id"]
        self.assertRaises(exception.MigrationStateConflict,
                          a.bus.engine.retry_migration, ADMIN, mid)
        rec = self.wait_migration(mid, timeout=180)
        self.assertEqual("failed", rec["state"])
        row, events = self.row(persistence, mid)
        self.assertEqual(("failed", rec["error"]),
                         (row["state"], row["error"]))
        # The migration's failure names the stage that failed.
        self.assertEqual(("import", "failed", rec["error"]),
                         (events[-1]["stage"], events[-1]["event"],
                          events[-1]["message"]))
        b.proxy.clear()
        rec = a.bus.engine.retry_migration(ADMIN, mid)
        self.assertEqual((mid, 2, "queued"),
                         (rec["id"], rec["attempt"], rec["state"]))
        rec = self.wait_migration(mid, timeout=180)
        self.assertMigrated(rec, source)
        row, events = self.assertRowComplete(persistence, mid, source)
        self.assertEqual(2, row["attempt"])
        seen = [e["event"] for e in events
                if e["stage"] is None or e["message"]]
        self.assertEqual(["queued", "started", "failed"],
                         seen[:seen.index("retried")])
        self.assertEqual(["retried", "queued", "started", "finished"],
                         seen[seen.index("retried"):])

    def test_retry_after_a_cancel_mid_transfer(self):
        """A migration cancelled while its data moves is retried: the
        same record, its next attempt, resuming the staged data and the
        transfer that the first attempt defined.
        """
        a, b = self.a, self.b
        persistence = self.database("mariadb")
        self.engine_a(persistence)
        source = self.upload(a, data=os.urandom(24 * MiB), name="cancelled")
        req = a.bus.engine.migrate(
            ADMIN, b.agent_name, images=[source["id"]],
            options={"transfer_options": {"rate_limit": 4 * MiB}})
        [m] = req["migrations"]
        mid, tid = m["id"], m["transfer_id"]
        self.wait_until(lambda: (self.transfer_status(a, tid).get(
            "bytes_done") or 0) > 4 * MiB, "the transfer to be under way",
            timeout=60, interval=0.2)
        a.bus.engine.cancel_migration(ADMIN, mid)
        rec = self.wait_migration(mid, timeout=120)
        self.assertEqual("cancelled", rec["state"])
        rec = a.bus.engine.retry_migration(ADMIN, mid)
        self.assertEqual((mid, 2, tid), (rec["id"], rec["attempt"],
                                         rec["transfer_id"]))
        rec = self.wait_migration(mid, timeout=180)
        self.assertMigrated(rec, source)
        row, events = self.assertRowComplete(persistence, mid, source)
        seen = [e["event"] for e in events
                if e["stage"] is None or e["message"]]
        self.assertEqual(["queued", "started", "cancelled"],
                         seen[:seen.index("retried")])
        self.assertEqual(["retried", "queued", "started", "finished"],
                         seen[seen.index("retried"):])

    def migrate_small(self, name):
        """A new image migrates to completion."""
        source = self.upload(self.a, data=os.urandom(4 * MiB), name=name)
        req = self.a.bus.engine.migrate(ADMIN, self.b.agent_name,
                                        images=[source["id"]])
        rec = self.wait_migration(req["migrations"][0]["migration_id"],
                                  timeout=180)
        self.assertMigrated(rec, source)

    def restart_during_migration(self, kind, strand):
        """``strand``: the database is held down while the migration
        finishes; otherwise it restarts again before.
        """
        a, b = self.a, self.b
        server = self.servers[kind]
        # Whatever happens, the server is up for the next test.
        self.addCleanup(lambda: server.proc is not None or server.start())
        persistence = self.database(kind)
        engine = self.engine_a(persistence)
        self.assertSecondEngineRefused(persistence)
        source = self.upload(a, data=os.urandom(48 * MiB), name=kind)
        # The peer import is held until the test lets it go: the
        # migration cannot end before the database is down.
        b.proxy.fail(503, retry_after=None, method="PUT", path=FILE)
        self.addCleanup(b.proxy.clear)
        req = a.bus.engine.migrate(
            ADMIN, b.agent_name, images=[source["id"]],
            options={"transfer_options": {"rate_limit": 16 * MiB}})
        [m] = req["migrations"]
        mid, tid = m["migration_id"], m["transfer_id"]

        # 1. Restarted while the data moves.
        self.wait_until(lambda: self.transfer_status(a, tid).get(
            "bytes_done"), "the transfer to be under way")
        server.restart()
        self.wait_lock_again(engine, 1)
        self.wait_until(lambda: self.transfer_status(a, tid).get("state")
                        == "complete", "the transfer's end")
        self.assertEqual("running",
                         a.bus.engine.get_migration(ADMIN, mid)["state"])
        if strand:
            self.finish_while_down(server, engine, source, mid, tid)
        else:
            # 2. Restarted again while the import is held.
            server.restart()
            self.wait_lock_again(engine, 2)
            b.proxy.clear()
        rec = self.wait_migration(mid, timeout=120)
        self.assertMigrated(rec, source)
        # Its row is right: complete, every byte, the whole timeline.
        self.assertRowComplete(persistence, mid, source)
        # Its staged files go after the outcome is saved; saved late
        # (stranded), they are left to the engine's sweep.
        self.wait_until(lambda: self.row(persistence, mid)[0]["cleanup"]
                        is None and not [f for f in a.staged_files()
                                         if f.startswith(tid)],
                        "A's staged files to go", timeout=60)
        # An outcome saved late goes with its files kept for the sweep;
        # a flow that ran again after the error removed them itself.
        log = engine.log_text()
        self.assertEqual(
            "migration %s: its outcome (complete) saved after a database "
            "error" % mid in log,
            "left when migration %s ended complete" % mid in log)

        # Saved for good: engine A, killed, restarts at once on the same
        # database (the server dropped its lock) and finds it complete.
        a.restart_engine(kill=True)
        rec = a.bus.engine.get_migration(ADMIN, mid)
        self.assertEqual("complete", rec["state"])
        self.assertNotIn("resuming outgoing migration %s" % mid,
                         engine.log_text())
        # New requests work: the same image is migrated already, a new
        # one migrates.
        again = a.bus.engine.migrate(ADMIN, b.agent_name,
                                     images=[source["id"]])
        self.assertEqual([(mid, "complete", True)],
                         [(r["migration_id"], r["state"], r.get("reused"))
                          for r in again["migrations"]])
        self.migrate_small("after-%s" % kind)

    def wait_lock_again(self, engine, times):
        self.wait_until(lambda: engine.log_text().count(
            "held again after the database came back") >= times,
            "the engine lock again", timeout=60)

    def finish_while_down(self, server, engine, source, mid, tid):
        """2. Down while the migration finishes."""
        a, b = self.a, self.b
        server.kill()
        b.proxy.clear()
        self.wait_until(lambda: [r for r in b.bus.engine.list_migrations(ADMIN)
                                 if r["transfer_id"] == tid and
                                 r["state"] == "complete"],
                        "the import at B", timeout=180)
        # Its worker ends on the database error (as any version logs it).
        self.wait_until(lambda: re.search(
            r"migration %s: (the persistence database failed|unexpected "
            r"error)" % mid, engine.log_text()), "the outcome's save to "
            "fail", timeout=120, interval=0.5)
        # The record cannot be read meanwhile: the engine says why.
        err = self.assertRaises(exception.PersistenceUnavailable,
                                a.bus.engine.get_migration, ADMIN, mid)
        self.assertIn("persistence database is unavailable", str(err))
        # A request meanwhile is told why it cannot be served: it does
        # not reuse the record that has no worker.
        for _ in range(2):
            err = self.assertRaises(
                exception.PersistenceUnavailable, a.bus.engine.migrate, ADMIN,
                b.agent_name, images=[source["id"]])
            self.assertIn("persistence database is unavailable", str(err))
        server.start()

    def test_mariadb_restart_during_migration(self):
        self.restart_during_migration("mariadb", strand=True)

    def test_postgresql_restart_during_migration(self):
        self.restart_during_migration("postgresql", strand=False)

    def test_second_engine_on_sqlite(self):
        persistence = self.database("sqlite")
        self.engine_a(persistence)
        self.assertSecondEngineRefused(persistence)
        # The first goes on working; killed, it restarts at once.
        self.migrate_small("sqlite")
        self.a.restart_engine(kill=True)
        self.assertSecondEngineRefused(persistence)
        self.migrate_small("sqlite-after")


class TestEngineLockOnServers(testtools.TestCase):
    """The lock itself on real MariaDB and PostgreSQL servers, restarted
    again and again, and taken by another engine while one was down.
    """

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.servers = {}
        for kind, server in (("mariadb", dbserver.MariaDB),
                             ("postgresql", dbserver.PostgreSQL)):
            ok, why = dbserver.available(kind)
            if not ok:
                cls.tearDownClass()
                class_scope.ClassScope.skipTest(why)
            cls.servers[kind] = server().start()

    @classmethod
    def tearDownClass(cls):
        for server in cls.servers.values():
            server.close()
        super().tearDownClass()

    def engine_lock(self, persistence):
        held = lock.EngineLock(persistence, timeout=1)
        self.addCleanup(held.release)
        return held

    def restarts_and_takeover(self, kind):
        server = self.servers[kind]
        self.addCleanup(lambda: server.proc is not None or server.start())
        persistence = server.database("dtnm_lock_%s" % uuid.uuid4().hex[:8])
        first = self.engine_lock(persistence)
        first.acquire()
        for _ in range(3):
            err = self.assertRaises(exception.PersistenceInUse,
                                    self.engine_lock(persistence).acquire)
            self.assertIn(REFUSED, str(err))
            self.assertFalse(first.check())
            server.restart()
            self.assertTrue(first.check())      # taken again
        # Down: kept trying; another engine takes it once it is back.
        server.kill()
        self.assertFalse(first.check())
        server.start()
        self.engine_lock(persistence).acquire()
        self.assertRaises(exception.PersistenceInUse, first.check)

    def test_mariadb(self):
        self.restarts_and_takeover("mariadb")

    def test_postgresql(self):
        self.restarts_and_takeover("postgresql")
