"""Two real clouds for migration tests: :mod:`devcloud.pair`'s, each
test's own (:class:`MigrationTestCase`), with the tests' waits and
assertions.
"""

import io
import json
import time
import uuid

import oslo_messaging as messaging

from devcloud import pair
from dtn_migrate import exception
from dtn_migrate.image import metadata
from tests.functional import base
from tests.functional.devcloud import harness as devcloud_tests

MiB = 1 << 20
ENGINE = pair.ENGINE
FINAL = ("complete", "failed", "cancelled")
ADMIN = pair.ADMIN
#: The PostgreSQL role tools/bootstrap.sh makes for the tests.
PG_USER = "dtnm"
PG_PASSWORD = "dtnm"


#: The two clouds (:mod:`devcloud.pair`), under the names the tests use.
Engine = pair.Engine
Bus = pair.Bus
Cloud = pair.Cloud
start_agents = pair.start_agents
_in_parallel = pair.in_parallel


class MigrationTestCase(devcloud_tests.DevcloudTestCase):
    """Cloud ``a`` (source) and cloud ``b`` (peer)."""

    timeout = 600

    def setUp(self):
        super().setUp()
        ok, why = base.Broker.available()
        if not ok:
            self.skipTest(why)

    agent = pair.Scope.agent
    brokers = pair.Scope.brokers
    clouds = pair.Scope.clouds

    # Images.
    def upload(self, cloud, path=None, data=None, **fields):
        client = cloud.admin()
        fields.setdefault("disk_format", "raw")
        fields.setdefault("container_format", "bare")
        image = client.images.create(**fields)
        if path is not None:
            with open(path, "rb") as f:
                client.images.upload(image["id"], f)
        else:
            client.images.upload(image["id"], io.BytesIO(data))
        return dict(client.images.get(image["id"]))

    # Migrations.
    def migrate(self, images=None, selector=None, **options):
        return self.a.bus.engine.migrate(ADMIN, self.b.agent_name,
                                         images=images, selector=selector,
                                         options=options or None)

    def wait_request(self, request_id, timeout=None):
        deadline = time.monotonic() + (timeout or self.timeout)
        recs = []
        while time.monotonic() < deadline:
            try:
                recs = self.a.bus.engine.list_migrations(
                    ADMIN, request_id=request_id)
            except messaging.MessagingTimeout:
                recs = []
            if recs and all(r["state"] in FINAL for r in recs):
                return recs
            time.sleep(0.5)
        self.fail("request %s not done in time: %s" % (
            request_id, [(r["migration_id"], r["state"]) for r in recs]))

    def wait_until(self, cond, what, timeout=120, interval=0.05):
        """Poll ``cond()`` until it returns something true (returned)."""
        deadline = time.monotonic() + timeout
        while True:
            value = cond()
            if value:
                return value
            if time.monotonic() >= deadline:
                self.fail("timed out after %d s waiting for %s"
                          % (timeout, what))
            time.sleep(interval)

    def transfer_status(self, cloud, transfer_id):
        """CLOUD's DTN agent's status of ``transfer_id``, or {} before the
        transfer exists.
        """
        try:
            return cloud.bus.agent().get_transfer({}, cloud.agent_name,
                                                  transfer_id)
        except exception.TransferNotFound:
            return {}

    def wait_migration(self, migration_id, until=None, timeout=None):
        deadline = time.monotonic() + (timeout or self.timeout)
        rec = None
        while time.monotonic() < deadline:
            try:
                rec = self.a.bus.engine.get_migration(ADMIN, migration_id)
            except messaging.MessagingTimeout:
                rec = None
            if rec is not None:
                if until is not None and until(rec):
                    return rec
                if until is None and rec["state"] in FINAL:
                    return rec
            time.sleep(0.1)
        self.fail("migration %s not done in time; last %s"
                  % (migration_id, json.dumps(rec)))

    def _database(self, conn, name, drop_sql):
        """Create a fresh database named after ``name`` on DB-API
        connection ``conn`` (autocommit), dropped with ``drop_sql`` (a
        format taking the name) when the test ends; returns its name.
        """
        self.addCleanup(conn.close)
        db = "dtnm_%s_%s" % (name, uuid.uuid4().hex[:8])

        def drop():
            with conn.cursor() as cur:
                cur.execute(drop_sql % db)
        # Registered first: a CREATE that failed half-way leaves nothing.
        self.addCleanup(drop)
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE %s" % db)
        return db

    def mariadb(self, name):
        """A fresh MariaDB database for one engine; dropped afterwards."""
        try:
            import pymysql
            conn = pymysql.connect(host="127.0.0.1", user="root",
                                   password="", autocommit=True)
        except Exception as exc:  # noqa: B902 - any connection problem
            self.skipTest("MariaDB is not reachable on 127.0.0.1:3306 as "
                          "root: %s (tools/bootstrap.sh starts it)" % exc)
        db = self._database(conn, name, "DROP DATABASE IF EXISTS %s")
        return "mysql+pymysql://root@127.0.0.1/%s" % db

    def postgresql(self, name):
        """A fresh PostgreSQL database for one engine, owned by the role
        ``dtnm`` that tools/bootstrap.sh makes; dropped afterwards.
        """
        try:
            import psycopg2
            conn = psycopg2.connect(host="127.0.0.1", user=PG_USER,
                                    password=PG_PASSWORD, dbname="postgres",
                                    connect_timeout=10)
        except Exception as exc:  # noqa: B902 - any connection problem
            self.skipTest("PostgreSQL is not reachable on 127.0.0.1:5432 as "
                          "%s: %s (tools/bootstrap.sh starts it and makes "
                          "the role)" % (PG_USER, exc))
        conn.autocommit = True
        # FORCE: an engine killed -9 may leave a backend behind.
        db = self._database(conn, name,
                            "DROP DATABASE IF EXISTS %s WITH (FORCE)")
        return "postgresql+psycopg2://%s:%s@127.0.0.1/%s" % (
            PG_USER, PG_PASSWORD, db)

    def peer_image(self, source_image, transfer_id):
        found = [dict(i) for i in self.b.admin().images.list(
            filters={"dtn_migrate_transfer_id": transfer_id})]
        self.assertEqual(1, len(found), found)
        return found[0]

    def assertMigrated(self, rec, source, keep_id=False, visibility=None):
        """REC (the source engine's record) is complete and cloud B holds
        one image of its transfer: active, the same data (size, sha512),
        no metadata difference (``metadata.compare``: formats, min_disk,
        min_ram, tags, every property), the same name, the id and
        visibility the request asked for.  Returns the peer's image.
        """
        self.assertEqual("complete", rec["state"], rec.get("error"))
        peer = self.peer_image(source, rec["transfer_id"])
        self.assertEqual("active", peer["status"])
        self.assertEqual(source["size"], peer["size"])
        self.assertEqual(source["os_hash_value"], peer["os_hash_value"])
        self.assertEqual([], [str(d) for d in metadata.compare(
            metadata.describe(source), peer)])
        self.assertEqual(source["name"], peer["name"])
        self.assertEqual(visibility or source["visibility"],
                         peer["visibility"])
        if keep_id:
            self.assertEqual(source["id"], peer["id"])
        else:
            self.assertNotEqual(source["id"], peer["id"])
        self.assertEqual(rec["transfer_id"],
                         peer["dtn_migrate_transfer_id"])
        self.assertEqual(peer["id"], rec["peer_image"]["image_id"])
        self.assertEqual(source["os_hash_value"],
                         rec["peer_image"]["os_hash_value"])
        self.assertTrue(rec["peer_image"]["verified"], rec["peer_image"])
        self.assertEqual([], rec["peer_image"]["differences"])
        return peer
