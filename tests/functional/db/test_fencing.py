"""The fencing of active/active engines (issue 39) on real MariaDB and
PostgreSQL: a migration's claim is one conditional UPDATE of its epoch,
and a write carrying an epoch older than the row's is refused.

SQLite serializes every transaction (db.api's serialize_sqlite), so the
unit tests cannot show what two servers' concurrency control does with
claims at once: here engines' worth of connections claim one row at the
same moment, round after round, and an engine keeps writing while
another takes its migration over.  The servers are private ones
(devcloud/dbserver.py), as the engine lock's tests use.
"""

import threading
import uuid

import sqlalchemy as sa
import testtools

from devcloud import dbserver
from dtn_migrate.db import api as db_api
from dtn_migrate.db import migration
from dtn_migrate.engine import persistence
from dtn_migrate import exception
from tests.functional.migration import scope as class_scope

#: Connections claiming one row at once, and how many times.
CLAIMANTS = 6
ROUNDS = 8


class TestFencingOnServers(testtools.TestCase):

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

    def url(self, kind, revision='head'):
        url = self.servers[kind].database(
            "dtnm_fence_%s" % uuid.uuid4().hex[:8])
        migration.db_sync(url, revision)
        return url

    def database(self, url):
        db = db_api.Database(connection=url)
        self.addCleanup(db.dispose)
        return db

    # Claims at once.
    def racing_claims(self, kind):
        url = self.url(kind)
        dbs = [self.database(url) for _ in range(CLAIMANTS)]
        mid = dbs[0].migration_create(
            {"direction": "outgoing", "state": "queued"})["id"]
        for number in range(ROUNDS):
            epoch = dbs[0].migration_get(mid)["epoch"]
            self.assertEqual(number, epoch)
            barrier = threading.Barrier(CLAIMANTS, timeout=30)
            results = [None] * CLAIMANTS

            def claim(i):
                barrier.wait()
                try:
                    results[i] = dbs[i].migration_claim(
                        mid, "engine-%d" % i, epoch)
                except exception.MigrationClaimLost as exc:
                    results[i] = exc
                except Exception as exc:  # noqa: B902 - shown below
                    results[i] = repr(exc)
            threads = [threading.Thread(target=claim, args=(i,))
                       for i in range(CLAIMANTS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            won = [i for i, r in enumerate(results) if r == epoch + 1]
            lost = [r for r in results
                    if isinstance(r, exception.MigrationClaimLost)]
            self.assertEqual((1, CLAIMANTS - 1), (len(won), len(lost)),
                             "round %d: %r" % (number, results))
            for exc in lost:
                self.assertEqual((epoch, epoch + 1),
                                 (exc.kwargs["held"], exc.kwargs["found"]))
            row = dbs[0].migration_get(mid)
            self.assertEqual(("engine-%d" % won[0], epoch + 1),
                             (row["owner"], row["epoch"]))

    def test_mariadb_racing_claims(self):
        self.racing_claims("mariadb")

    def test_postgresql_racing_claims(self):
        self.racing_claims("postgresql")

    # A writer after a takeover.
    def stale_writer(self, kind):
        url = self.url(kind)
        a = persistence.Store(url)
        self.addCleanup(a.close)
        b = persistence.Store(url)
        self.addCleanup(b.close)
        mid = uuid.uuid4().hex
        a.create(mid, {"state": "running", "direction": "outgoing"})
        mine = a.claim(mid, "engine-a", 0)
        # Engine A saves, again and again, until B takes it over.
        saved, refused = [], []
        started = threading.Event()

        def write():
            for i in range(1, 10000):
                try:
                    a.save(mid, epoch=mine,
                           notes=[("export", "note", str(i), i)])
                except exception.MigrationClaimLost as exc:
                    refused.append(exc)
                    return
                saved.append(i)
                started.set()
        writer = threading.Thread(target=write)
        writer.start()
        self.assertTrue(started.wait(60))
        theirs = b.claim(mid, "engine-b", mine)
        writer.join(60)
        self.assertFalse(writer.is_alive())
        self.assertEqual(1, len(refused), saved)
        self.assertIn("holds epoch 1, the row is at epoch 2",
                      str(refused[0]))
        # Every save A was told of is there, and nothing of the refused
        # one: its note was in the same transaction.
        notes = [e for e in b.events(mid) if e["event"] == "note"]
        self.assertEqual(saved, [int(e["message"]) for e in notes])
        # B writes on; A, asked again, is refused and changes nothing.
        b.save(mid, epoch=theirs, state="complete")
        before, events = b.record(mid), b.events(mid)
        self.assertRaises(exception.MigrationClaimLost, a.save, mid,
                          epoch=mine, state="failed", error="stale")
        self.assertEqual((before, events), (b.record(mid), b.events(mid)))
        self.assertEqual(("complete", "engine-b", 2),
                         (before["state"], before["owner"],
                          before["epoch"]))

    def test_mariadb_stale_writer_after_takeover(self):
        self.stale_writer("mariadb")

    def test_postgresql_stale_writer_after_takeover(self):
        self.stale_writer("postgresql")

    # The schema's upgrade.
    def upgrade_from_0005(self, kind):
        url = self.url(kind, '0005')
        engine = sa.create_engine(db_api.utf8mb4(url),
                                  poolclass=sa.pool.NullPool)
        self.addCleanup(engine.dispose)
        with engine.begin() as connection:
            for mid, state in (("m1", "running"), ("m2", "complete")):
                connection.execute(sa.text(
                    "INSERT INTO migrations (id, direction, state) "
                    "VALUES (:id, 'outgoing', :state)"),
                    {"id": mid, "state": state})
        migration.db_sync(url)
        self.assertEqual("0006", migration.db_version(url))
        db = self.database(url)
        self.assertEqual(
            [("m1", None, 0, "running"), ("m2", None, 0, "complete")],
            sorted((r["id"], r["owner"], r["epoch"], r["state"])
                   for r in db.migration_get_all()))
        epoch = {c["name"]: c for c in sa.inspect(engine).get_columns(
            "migrations")}["epoch"]
        self.assertFalse(epoch["nullable"])
        self.assertEqual(1, db.migration_claim("m1", "engine-a", 0))
        # A row written without an epoch (an engine of before) is at 0.
        db.migration_create({"id": "m3", "direction": "incoming",
                             "state": "queued"})
        with engine.begin() as connection:
            connection.execute(sa.text(
                "INSERT INTO migrations (id, direction, state) "
                "VALUES ('m4', 'incoming', 'queued')"))
        self.assertEqual([0, 0], [db.migration_get(m)["epoch"]
                                  for m in ("m3", "m4")])

    def test_mariadb_upgrade_from_0005(self):
        self.upgrade_from_0005("mariadb")

    def test_postgresql_upgrade_from_0005(self):
        self.upgrade_from_0005("postgresql")
