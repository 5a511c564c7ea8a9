"""Two real clouds joined by their DTN agents' link.

Each cloud has its own RabbitMQ vhost, a Glance under uwsgi (SQLite,
file store), a DTN agent process, an engine process with its own
persistence database, and a staging export: a directory of the agent's
host, or an nfs-ganesha export that the engine reaches over NFSv3
(libnfs) through a relay into the server's network namespace.  Only
the agents' DTN link joins the clouds.

A :class:`Cloud` asks its ``case`` for brokers, agents, Glances,
Keystones, fault proxies and cleanups: a test case
(``tests/functional/migration/harness.py``), or a :class:`Scope`, whose
servers live until its ``close()`` (a test class's clouds, a
benchmark's).
"""

import concurrent.futures
import os
import shutil
import tempfile
import uuid

import oslo_messaging as messaging

import devcloud
from devcloud import services
from dtn_migrate.agent import rpcapi as agent_rpcapi
from dtn_migrate import context
from dtn_migrate.engine import rpcapi as engine_rpcapi
from dtn_migrate import rpc

MiB = 1 << 20
ENGINE = os.path.join(services.VENV_BIN, "dtn-migrate-engine")
#: The context of requests to an engine over the bus (an empty one is
#: refused): an administrator's, naming the tests.
ADMIN = context.get_service_context("dtn-migrate-tests").to_dict()


class Engine(services.ServiceProcess):
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
        services.write_conf(self.conf, sections)

    def wait_ready(self, api, timeout=60):
        return self.wait_ready_with(lambda: api.ping({}), timeout)


class Bus:
    """The test process's view of one cloud's vhost: engine and agent
    clients and a notification listener.
    """

    def __init__(self, url):
        conf = services.rpc_conf()
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
            broker = services.Broker()
            case.addCleanup(broker.delete)
        self.broker = broker
        self.bus = Bus(self.broker.url())
        self.agent_name = "dtn-%s-%s" % (name, uuid.uuid4().hex[:4])
        self.engine_name = "engine-%s-%s" % (name, uuid.uuid4().hex[:4])
        self.port = services.free_port()
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
        services.log_details(self.case, self.engine, 300)
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
    another (:func:`services.start_agents`).
    """
    owner = {c.agent.name: c for c in clouds}
    services.start_agents([c.agent for c in clouds],
                          lambda agent: owner[agent.name].wait_agent_ready(),
                          relays=[c.relay for c in clouds if c.relay])
    for c in clouds:
        c.port = c.agent.port


def in_parallel(calls):
    """Run cleanups at once rather than one after another."""
    with concurrent.futures.ThreadPoolExecutor(len(calls)) as pool:
        for f in [pool.submit(call) for call in calls]:
            f.result()


class Unavailable(Exception):
    """A :class:`Scope`'s clouds cannot start here (the reason)."""


class Scope:
    """What a :class:`Cloud` asks of a test case, for servers that
    outlive each test: ``close()`` removes them.
    """

    def __init__(self, prefix="dtnm-class-"):
        self.workdir = tempfile.mkdtemp(prefix=prefix,
                                        dir=services.data_root())
        self.cleanups = [(shutil.rmtree, (self.workdir, True), {})]
        self.key = os.urandom(32).hex()

    def addCleanup(self, call, *args, **kwargs):
        self.cleanups.append((call, args, kwargs))

    def _started(self, server):
        self.addCleanup(server.close)
        return server.start()

    def addOnException(self, handler):
        pass                # each test attaches the logs itself

    @staticmethod
    def skipTest(reason):
        raise Unavailable(reason)

    def close(self):
        while self.cleanups:
            call, args, kwargs = self.cleanups.pop()
            try:
                call(*args, **kwargs)
            except Exception:  # noqa: B902 - the other cleanups still run
                pass

    def keystone(self, **kwargs):
        return self._started(devcloud.KeystoneServer(self.workdir, **kwargs))

    def glance(self, name="a", **kwargs):
        return self._started(devcloud.GlanceServer(self.workdir, name=name,
                                                   **kwargs))

    def fault_proxy(self, target):
        proxy = devcloud.FaultProxy(target).start()
        self.addCleanup(proxy.stop)
        return proxy

    def agent(self, name, peers, **kw):
        a = services.Agent(self.workdir, name, self.key,
                           kw.pop("transport_url"), peers, **kw)
        self.addCleanup(a.discard)
        services.log_details(self, a)
        return a

    def brokers(self, n=2):
        """N vhosts, made at once (rabbitmqctl takes seconds per call);
        each one's deletion is registered as soon as it exists, even when
        another could not be made.
        """
        with concurrent.futures.ThreadPoolExecutor(n) as pool:
            futures = [pool.submit(services.Broker) for _ in range(n)]
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
        self.addCleanup(in_parallel, [a.bus.close, b.bus.close])
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
        self.addCleanup(in_parallel, [a.engine.discard, b.engine.discard,
                                      a.agent.discard, b.agent.discard])
        a.bus.listen()
        self.a, self.b = a, b
        return a, b
