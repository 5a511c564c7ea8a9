"""Two real clouds for migration tests.

Each cloud has its own RabbitMQ vhost, a Glance under uwsgi (SQLite,
file store), a DTN agent process, an engine process with its own
persistence database, and a staging export: a directory of the agent's
host, or an nfs-ganesha export that the engine reaches over NFSv3
(libnfs) through a relay into the server's network namespace.  Only
the agents' DTN link joins the clouds.
"""

import concurrent.futures
import io
import json
import os
import time
import uuid

import oslo_messaging as messaging

from dtn_migrate.agent import rpcapi as agent_rpcapi
from dtn_migrate import conf as dtn_conf
import devcloud
from dtn_migrate import context
from dtn_migrate.engine import rpcapi as engine_rpcapi
from dtn_migrate import exception
from dtn_migrate.image import metadata
from dtn_migrate import rpc
from tests.functional import base
from tests.functional.devcloud import harness as devcloud_tests

MiB = 1 << 20
ENGINE = os.path.join(base.VENV_BIN, "dtn-migrate-engine")
FINAL = ("complete", "failed", "cancelled")
#: The context of the tests' requests to an engine over the bus (an
#: empty one is refused): an administrator's, naming the tests.
ADMIN = context.get_service_context("dtn-migrate-tests").to_dict()
#: The PostgreSQL role tools/bootstrap.sh makes for the tests.
PG_USER = "dtnm"
PG_PASSWORD = "dtnm"


class Engine(base.ServiceProcess):
    """One dtn-migrate-engine process."""

    command = ENGINE

    def __init__(self, workdir, name, transport_url, agent_host, glance,
                 staging, persistence=None, extra=None):
        self.name = name
        self.dir = os.path.join(workdir, name)
        os.makedirs(self.dir, exist_ok=True)
        self.conf = os.path.join(self.dir, "engine.conf")
        self.log = os.path.join(self.dir, "engine.log")
        self.persistence = persistence or "sqlite:///%s/engine.sqlite" \
            % self.dir
        sections = {
            "DEFAULT": {"host": name, "transport_url": transport_url,
                        "log_file": self.log, "debug": "true"},
            "database": {"connection": self.persistence},
            "engine": {"agent_host": agent_host,
                       "poll_interval": 0.2, "progress_interval": 1,
                       "stall_timeout": 120, "reconcile_interval": 5},
            "staging": dict(staging),
            "glance": dict(glance),
            "oslo_messaging_notifications": {"driver": "messagingv2",
                                             "topics": "notifications"},
        }
        for section, values in (extra or {}).items():
            sections.setdefault(section, {}).update(values)
        base.write_conf(self.conf, sections)

    def wait_ready(self, api, timeout=60):
        return self.wait_ready_with(lambda: api.ping({}), timeout)


class Bus:
    """The test process's view of one cloud's vhost: engine and agent
    clients and a notification listener.
    """

    def __init__(self, url):
        # oslo.messaging's tracing options exist only on the global CONF.
        conf = dtn_conf.CONF
        if not base._rpc["parsed"]:
            messaging.set_transport_defaults(
                control_exchange=rpc.CONTROL_EXCHANGE)
            conf([], project="dtn-migrate", default_config_files=[])
            base._rpc["parsed"] = True
        self.conf = conf
        self.transport = messaging.get_rpc_transport(
            conf, url=url, allowed_remote_exmods=rpc.ALLOWED_EXMODS)
        self.engine = engine_rpcapi.EngineAPI(timeout=30, retry=3,
                                              transport=self.transport)
        self.notifications = []
        self._listener = None
        self._agent = None
        self.url = url

    def agent(self):
        """The agent RPC API on this bus (made once)."""
        if self._agent is None:
            api = agent_rpcapi.AgentAPI.__new__(agent_rpcapi.AgentAPI)
            target = messaging.Target(topic=agent_rpcapi.TOPIC,
                                      version=agent_rpcapi.AgentAPI.VERSION)
            api.client = rpc.get_client(target, timeout=30, retry=3,
                                        transport=self.transport)
            self._agent = api
        return self._agent

    def listen(self):
        bus = self

        class Endpoint:
            def info(self, ctxt, publisher_id, event_type, payload,
                     metadata):
                bus.notifications.append((event_type, payload))

            def error(self, ctxt, publisher_id, event_type, payload,
                      metadata):
                bus.notifications.append((event_type, payload))

            def warn(self, ctxt, publisher_id, event_type, payload,
                     metadata):
                bus.notifications.append((event_type, payload))

        ntransport = messaging.get_notification_transport(
            self.conf, url=self.url)
        self._listener = messaging.get_notification_listener(
            ntransport, [messaging.Target(topic="notifications")],
            [Endpoint()], executor="threading",
            pool="dtnm-test-%s" % uuid.uuid4().hex[:6])
        self._listener.start()
        self._ntransport = ntransport

    def events(self, migration_id=None):
        return [e for e, p in self.notifications
                if migration_id is None or
                p.get("migration_id") == migration_id]

    def close(self):
        if self._listener is not None:
            self._listener.stop()
            self._listener.wait()
            self._ntransport.cleanup()
        self.transport.cleanup()


class Cloud:
    """Everything of one cloud; ``start()`` brings it up."""

    def __init__(self, case, name, peer_name, nfs=False, persistence=None,
                 keystone=None, glance_proxy=False, transfer=None,
                 broker=None, keystone_proxy=False):
        self.case = case
        self.name = name
        self.peer_name = peer_name
        self.nfs = nfs
        self.persistence = persistence
        self.keystone = keystone
        self.glance_proxy = glance_proxy
        self.keystone_proxy = None
        if keystone is not None and keystone_proxy:
            # Counts this engine's token requests (POST /v3/auth/tokens):
            # only the engine authenticates through it.
            self.keystone_proxy = case.fault_proxy(keystone.endpoint)
        self.transfer = transfer
        if broker is None:
            broker = base.Broker()
            case.addCleanup(broker.delete)
        self.broker = broker
        self.bus = Bus(self.broker.url())
        self.agent_name = "dtn-%s-%s" % (name, uuid.uuid4().hex[:4])
        self.engine_name = "engine-%s-%s" % (name, uuid.uuid4().hex[:4])
        self.port = base.free_port()
        self.relay = None

    #: Where Glance publishes its notifications (None: nowhere).
    notifications_url = None

    def start_glance(self):
        self.glance = self.case.glance(
            name=self.name, keystone=self.keystone,
            notifications_url=self.notifications_url)
        self.glance_endpoint = self.glance.endpoint
        self.proxy = None
        if self.glance_proxy:
            self.proxy = self.case.fault_proxy(self.glance.endpoint)
            self.glance_endpoint = self.proxy.endpoint

    def start_staging(self):
        staging_dir = None
        if self.nfs:
            from devcloud import ganesha
            ok, why = ganesha.available()
            if not ok:
                self.case.skipTest(why)
            self.ganesha = ganesha.Ganesha()
            # close() is safe on a server that did not (fully) start.
            self.case.addCleanup(self.ganesha.close)
            self.ganesha.start()
            url, _relays = ganesha.nfs_url(self.ganesha,
                                           add_cleanup=self.case.addCleanup)
            staging_dir = self.ganesha.local()
            self.staging = {"backend": "libnfs", "url": url,
                            "commit_interval_bytes": 16 * MiB,
                            "free_space_margin": "0"}
        else:
            staging_dir = os.path.join(self.case.workdir, self.name,
                                       "export")
            os.makedirs(staging_dir, exist_ok=True)
            self.staging = {"backend": "path", "path": staging_dir,
                            "allow_local": "true", "mount_check": "off",
                            "commit_interval_bytes": 16 * MiB,
                            "free_space_margin": "0"}
        self.staging_dir = staging_dir

    def glance_auth(self):
        if self.keystone is not None:
            user = self.glance.default_user()
            auth_url = self.keystone.auth_url
            if self.keystone_proxy is not None:
                auth_url = self.keystone_proxy.endpoint + "/v3"
            auth = {"auth_type": "password",
                    "auth_url": auth_url,
                    "username": user["username"],
                    "password": user["password"],
                    "project_name": devcloud.glance.DEFAULT_PROJECT,
                    "user_domain_id": "default",
                    "project_domain_id": "default",
                    "region_name": self.glance.region,
                    "valid_interfaces": "public",
                    "cloud_name": self.name, "retry_max_delay": 5}
            if self.proxy is not None:
                auth["endpoint_override"] = self.glance_endpoint
            return auth
        auth = self.glance.auth_options(endpoint=self.glance_endpoint)
        auth.update(cloud_name=self.name, retry_max_delay=5)
        return auth

    def peer_address(self, peer):
        """Where this cloud's agent reaches ``peer``'s."""
        return ("127.0.0.1", peer.port)

    def make_agent(self, peer):
        """This cloud's agent, configured to reach ``peer``'s; not
        started (see :func:`start_agents`).
        """
        self.agent = self.case.agent(
            self.agent_name, {peer.agent_name: self.peer_address(peer)},
            port=self.port, transport_url=self.broker.url(),
            staging=self.staging_dir, transfer=self.transfer or {})
        return self.agent

    def start_engine(self):
        self.engine = Engine(self.case.workdir, self.engine_name,
                             self.broker.url(), self.agent_name,
                             self.glance_auth(), self.staging,
                             self.persistence)
        self.case.addCleanup(self.engine.discard)
        base.log_details(self.case, self.engine, 300)
        self.engine.start()

    def _ping(self, server, topic, host=None):
        # A call sent before the server's queue exists is lost and waits
        # its whole timeout: ping with a short one.
        client = messaging.get_rpc_client(
            self.bus.transport, messaging.Target(topic=topic), timeout=2)
        server.wait_ready_with(
            lambda: client.prepare(server=host).call({}, "ping"))

    def wait_agent_ready(self):
        self._ping(self.agent, agent_rpcapi.TOPIC, self.agent_name)

    def wait_ready(self):
        self.wait_agent_ready()
        self._ping(self.engine, engine_rpcapi.TOPIC)

    def restart_engine(self, kill=True):
        if kill:
            self.engine.kill9()
        else:
            self.engine.stop()
        self.engine.start()
        self.wait_ready()

    def staged_files(self):
        """Files and directories (``name/``) left on this cloud's staging
        export, dot entries aside.
        """
        found = []
        for d, subdirs, files in os.walk(self.staging_dir):
            subdirs[:] = [s for s in subdirs if not s.startswith(".")]
            rel = os.path.relpath(d, self.staging_dir)
            prefix = "" if rel == "." else rel + "/"
            found += [prefix + s + "/" for s in subdirs]
            found += [prefix + f for f in files if not f.startswith(".")]
        return sorted(found)

    def admin(self):
        """A glanceclient with admin rights on this cloud's Glance."""
        if self.keystone is not None:
            return self.glance.client()
        return self.glance.admin_client()


def start_agents(clouds):
    """Start the agents of CLOUDS, peered with each other: each one's
    :meth:`Cloud.make_agent` is done; an agent that lost its port gets
    another (:func:`base.start_agents`).
    """
    owner = {c.agent.name: c for c in clouds}
    base.start_agents([c.agent for c in clouds],
                      lambda agent: owner[agent.name].wait_agent_ready(),
                      relays=[c.relay for c in clouds if c.relay])
    for c in clouds:
        c.port = c.agent.port


def _in_parallel(calls):
    """Run cleanups at once rather than one after another."""
    with concurrent.futures.ThreadPoolExecutor(len(calls)) as pool:
        for f in [pool.submit(call) for call in calls]:
            f.result()


class MigrationTestCase(devcloud_tests.DevcloudTestCase):
    """Cloud ``a`` (source) and cloud ``b`` (peer)."""

    timeout = 600

    def setUp(self):
        super().setUp()
        ok, why = base.Broker.available()
        if not ok:
            self.skipTest(why)

    def agent(self, name, peers, **kw):
        a = base.Agent(self.workdir, name, self.key,
                       kw.pop("transport_url"), peers, **kw)
        self.addCleanup(a.discard)
        base.log_details(self, a)
        return a

    def brokers(self, n=2):
        """N vhosts, made at once (rabbitmqctl takes seconds per call);
        each one's deletion is registered as soon as it exists, even when
        another could not be made.
        """
        with concurrent.futures.ThreadPoolExecutor(n) as pool:
            futures = [pool.submit(base.Broker) for _ in range(n)]
        made, errors = [], []
        for f in futures:
            try:
                made.append(f.result())
            except BaseException as exc:  # noqa: B902 - re-raised below
                errors.append(exc)
            else:
                self.addCleanup(made[-1].delete)
        if errors:
            raise errors[0]
        return made

    def clouds(self, nfs=False, persistence=(None, None), keystone=None,
               proxy_a=False, proxy_b=False, transfer=None,
               keystone_proxy=False):
        self.key = os.urandom(32).hex()
        keystone = keystone or (None, None)
        brokers = self.brokers(2)
        a = Cloud(self, "a", "b", nfs=nfs, persistence=persistence[0],
                  keystone=keystone[0], glance_proxy=proxy_a,
                  transfer=transfer, broker=brokers[0],
                  keystone_proxy=keystone_proxy)
        try:
            b = Cloud(self, "b", "a", nfs=nfs, persistence=persistence[1],
                      keystone=keystone[1], glance_proxy=proxy_b,
                      transfer=transfer, broker=brokers[1],
                      keystone_proxy=keystone_proxy)
        except BaseException:
            a.bus.close()
            raise
        # Both buses close at once (the rabbit driver takes seconds to wind
        # down), before their vhosts are deleted.
        self.addCleanup(_in_parallel, [a.bus.close, b.bus.close])
        for c in (a, b):
            c.start_glance()
            c.start_staging()
        a.make_agent(b)
        b.make_agent(a)
        start_agents((a, b))
        for c in (a, b):
            c.start_engine()
        for c in (a, b):
            c.wait_ready()
        self.addCleanup(_in_parallel, [a.engine.discard, b.engine.discard,
                                       a.agent.discard, b.agent.discard])
        a.bus.listen()
        self.a, self.b = a, b
        return a, b

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
