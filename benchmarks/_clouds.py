"""The benchmarks' clouds: two local clouds joined by a rate-limited
DTN link (``benchmarks.migration``, ``benchmarks.sparse``), and the
functional tests' pairs of clouds with dtn-migrate-api
(``benchmarks.api``, ``benchmarks.protection``).

Every import of the local clouds (``devcloud``) is here, so that a
move of them is one change here (the lab itself:
:mod:`benchmarks._lab`).

One Keystone serves Glance A (region RegionA) and Glance B (RegionB);
both run under uwsgi in the root namespace, next to RabbitMQ and the two
``dtn-migrate-engine`` processes (one vhost each).  The DTN agents run in
namespaces ``a`` and ``b`` of a :class:`devcloud.netns.Lab`, so
the only path between them is the tbf-limited veth; socat forwarders
give them RabbitMQ at 127.0.0.1:5672.  Each cloud stages into a local
directory (``[staging] backend = path``), which is also its agent's
staging root.

Glance B reaches Glance A over the same veth through a second catalog
region, :data:`LINK_REGION`: root -> relay into namespace ``b`` -> veth
-> namespace ``a`` -> forwarder back to Glance A in the root namespace.
This is the region a ``glance-download`` import names; Glance A's own
region keeps its direct endpoint for everything else.

The building blocks are the local clouds' (``devcloud``), as the
functional tests' are: ``services.Agent``, ``services.Broker``,
``pair.Engine`` and ``Bus``, ``netns.Lab``, ``ganesha.NamespaceRelay``.
The agents listen on fixed ports
(:data:`AGENT_PORT`) of their lab namespaces: only the lab's own
processes bind there, so no other process can take them.

The API pairs (:func:`api_pair`) are :func:`devcloud.apipair.start_pair`
in a :class:`devcloud.pair.Scope`, as the API tests' are.
"""

import contextlib
import os
import subprocess
import time
import uuid

from oslo_config import cfg
import oslo_messaging as messaging

from dtn_migrate.conf import glance as glance_conf
from dtn_migrate.conf import staging as staging_conf
import devcloud
from devcloud import _base
from dtn_migrate.image import glance
from dtn_migrate.staging import factory
from dtn_migrate.staging import localfs
from benchmarks import common
from benchmarks._lab import netns
from devcloud import apipair
from devcloud import coordination
from devcloud import dbserver
from devcloud import ganesha
from devcloud import pair
from devcloud import services

MiB = 1 << 20
#: The functional tests' ``[staging] commit_interval_bytes`` (default:
#: 64 MiB).
TESTS_COMMIT_INTERVAL = 16 * MiB
LINK_REGION = "RegionA-link"
#: Port of Glance A's forwarder inside namespace ``a``.
LINK_PORT = 9292
RABBIT_PORT = 5672
#: Port of each agent in its namespace (the lab's own: none of the
#: forwarders' above).
AGENT_PORT = 47100

#: The local clouds' helpers the benchmarks use.
available = devcloud.available
clouds_venv = devcloud.clouds_venv
wait_image = devcloud.wait_image
wait_import_end = devcloud.wait_import_end
Broker = services.Broker
ClassScope = pair.Scope
Engine = pair.Engine
ADMIN = pair.ADMIN


def check():
    """None when the clouds can start here, else the reason why not."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, tc)"
    for ok, why in (netns.available(), devcloud.available(),
                    services.Broker.available()):
        if not ok:
            return why
    try:
        import glanceclient  # noqa: F401
    except ImportError:
        return "python-glanceclient is not installed in this venv"
    return None


def _broker(attempts=3):
    """A vhost; rabbitmqctl fails now and then on a busy machine."""
    for attempt in range(attempts):
        try:
            return services.Broker()
        except subprocess.CalledProcessError:
            if attempt == attempts - 1:
                raise
            time.sleep(2)


class Cloud:
    """One side: its Glance, vhost, staging directory, agent, engine."""

    def __init__(self, name, workdir, direct_io=True,
                 commit_interval_bytes=TESTS_COMMIT_INTERVAL):
        self.name = name
        self.direct_io = direct_io
        self.commit_interval_bytes = commit_interval_bytes
        self.dir = os.path.join(workdir, "cloud-%s" % name)
        self.staging_dir = os.path.join(self.dir, "staging")
        os.makedirs(self.staging_dir, exist_ok=True)
        suffix = uuid.uuid4().hex[:4]
        self.agent_name = "dtn-%s-%s" % (name, suffix)
        self.engine_name = "engine-%s-%s" % (name, suffix)
        self.glance = self.broker = self.bus = None
        self.events = []
        self.agent = self.engine = None
        self._images = self._conf = None

    @property
    def staging(self):
        """The ``[staging]`` section of this cloud's engine (with
        ``commit_interval_bytes`` None: the option's default).
        """
        section = {"backend": "path", "path": self.staging_dir,
                   "allow_local": "true", "mount_check": "off",
                   "free_space_margin": "0",
                   "direct_io": "auto" if self.direct_io else "off"}
        if self.commit_interval_bytes is not None:
            section["commit_interval_bytes"] = self.commit_interval_bytes
        return section

    def glance_auth(self):
        """The ``[glance]`` section: the default user's password."""
        return dict(self.glance.auth_options(), cloud_name=self.name,
                    retry_max_delay=5)

    def conf(self):
        """Its engine's ``[glance]`` and ``[staging]`` options, parsed."""
        if self._conf is None:
            path = os.path.join(self.dir, "bench.conf")
            _base.write_ini(path, {"glance": self.glance_auth(),
                                   "staging": self.staging})
            conf = cfg.ConfigOpts()
            glance_conf.register_opts(conf)
            staging_conf.register_opts(conf)
            conf(["--config-file", path], default_config_files=[])
            self._conf = conf
        return self._conf

    def images(self):
        """An ImageService built as the engine builds its own."""
        if self._images is None:
            self._images = glance.ImageService.from_conf(self.conf())
        return self._images

    def copy_options(self, stall_timeout):
        """The copy engine's options as the engine derives them."""
        opts = factory.copy_options(self.conf().staging, 0)
        opts.stall_timeout = float(stall_timeout)
        return opts

    def backend(self):
        return localfs.LocalBackend(self.staging_dir)

    def client(self):
        """A glanceclient of the default user on this cloud's Glance."""
        return self.glance.client()

    def agent_api(self):
        return self.bus.agent()

    def listen(self):
        """Collect this cloud's notifications in ``events``:
        (monotonic time of receipt, event type, payload).
        """
        events = self.events = []

        class Endpoint:
            def info(self, ctxt, publisher_id, event_type, payload,
                     metadata):
                events.append((time.monotonic(), event_type, payload))

            error = info

        transport = messaging.get_notification_transport(
            self.bus.conf, url=self.bus.url)
        listener = messaging.get_notification_listener(
            transport, [messaging.Target(topic="notifications")],
            [Endpoint()], executor="threading",
            pool="dtnm-bench-%s" % uuid.uuid4().hex[:6])
        listener.start()

        def stop():
            listener.stop()
            listener.wait()
            transport.cleanup()
        return stop


class Clouds:
    """Keystone, clouds ``a`` and ``b`` and the lab; ``close()`` removes
    everything ``start()`` made, also after a failure half way.
    """

    def __init__(self, workdir, rate="1gbit", mtu=1500, engine=None,
                 log=print, direct_io=True, agent=None,
                 commit_interval_bytes=TESTS_COMMIT_INTERVAL):
        """``engine``, ``agent``: sections added to the engines' and the
        agents' configuration (over the functional tests' settings);
        ``commit_interval_bytes``: the engines' ``[staging]`` one (None:
        the option's default).
        """
        self.workdir = workdir
        self.rate, self.mtu = rate, mtu
        self.engine_extra = engine or {}
        self.agent_extra = agent or {}
        self.log = log
        self.direct_io = direct_io
        self.a = Cloud("a", workdir, direct_io, commit_interval_bytes)
        self.b = Cloud("b", workdir, direct_io, commit_interval_bytes)
        self.keystone = self.lab = None
        self.link_endpoint = None
        self._stack = contextlib.ExitStack()

    def _started(self, server):
        self._stack.callback(server.close)
        return server.start()

    def start(self):
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def _start(self):
        self.log("starting Keystone and two Glances")
        self.keystone = self._started(devcloud.KeystoneServer(self.workdir))
        for c in (self.a, self.b):
            c.glance = self._started(devcloud.GlanceServer(
                self.workdir, name=c.name, keystone=self.keystone))
        self.log("starting the lab (%s veth), vhosts, agents, engines"
                 % (self.rate or "unlimited"))
        self.lab = netns.Lab(rate=self.rate, mtu=self.mtu)
        self._stack.callback(self.lab.close)
        self.lab.start()
        key = os.urandom(32).hex()
        for c in (self.a, self.b):
            self.lab.forward(c.name, RABBIT_PORT)
            c.broker = _broker()
            self._stack.callback(c.broker.delete)
            c.bus = pair.Bus(c.broker.url())
            self._stack.callback(c.bus.close)
        for c, peer in ((self.a, self.b), (self.b, self.a)):
            c.agent = services.Agent(
                self.workdir, c.agent_name, key, c.broker.url(),
                {peer.agent_name: (self.lab.addr(peer.name), AGENT_PORT)},
                listen_address=self.lab.addr(c.name), port=AGENT_PORT,
                lab=self.lab, ns=c.name, staging=c.staging_dir,
                transfer={"direct_io": str(self.direct_io).lower()},
                extra=self.agent_extra)
            self._stack.callback(c.agent.stop)
            c.agent.start()
        for c in (self.a, self.b):
            c.engine = pair.Engine(
                self.workdir, c.engine_name, c.broker.url(), c.agent_name,
                c.glance_auth(), c.staging, extra=self.engine_extra)
            self._stack.callback(c.engine.stop)
            c.engine.start()
        for c in (self.a, self.b):
            c.agent.wait_ready(c.agent_api())
            c.engine.wait_ready(c.bus.engine)
        self._stack.callback(self.a.listen())
        self._link_glance()

    def _link_glance(self):
        """Register Glance A in :data:`LINK_REGION` behind relays that
        cross the veth (b -> a), the way Glance B's downloads go.
        """
        self.lab.forward("a", LINK_PORT, target_port=self.a.glance.port,
                         listen_host=self.lab.addr("a"))
        hop = ganesha.NamespaceRelay(self.lab.ns("b"), self.lab.addr("a"),
                                     LINK_PORT)
        self._stack.callback(hop.close)
        self.link_endpoint = "http://127.0.0.1:%d" % hop.port
        self.keystone.register_endpoint("image", "glance",
                                        self.link_endpoint, LINK_REGION)

    def logs(self):
        """{name: path} of the services' logs (for failure reports)."""
        out = {}
        for c in (self.a, self.b):
            for kind, svc in (("agent", c.agent), ("engine", c.engine)):
                if svc is not None:
                    out["%s-%s" % (kind, c.name)] = svc.log
            if c.glance is not None:
                out["glance-%s" % c.name] = c.glance.log
        return out

    def close(self):
        """Stop and remove everything; returns the errors met."""
        errors = []
        try:
            self._stack.close()
        except Exception as exc:  # noqa: B902 - reported by the caller
            errors.append("%s: %s" % (type(exc).__name__, exc))
        return errors


def api_pair(prefix, **kwargs):
    """(scope, a, b): two clouds with dtn-migrate-api
    (:func:`devcloud.apipair.start_pair` with ``kwargs``, as the API
    tests') in a new :class:`devcloud.pair.Scope`; ``scope.close()``
    removes them, and does so here when they fail to start.
    """
    scope = ClassScope(prefix)
    try:
        a, b = apipair.start_pair(scope, **kwargs)
    except BaseException:
        scope.close()
        raise
    return scope, a, b


def engines_pair(prefix):
    """(scope, a, b, mariadb, zookeeper): two clouds as the functional
    tests start them (:meth:`devcloud.pair.Scope.clouds`), with a private
    MariaDB and a private ZooKeeper for cloud A's engines, in a new
    :class:`devcloud.pair.Scope`; ``scope.close()`` removes them, and
    does so here when they fail to start.
    """
    scope = ClassScope(prefix)
    try:
        for ok, why in (devcloud.available(), services.Broker.available(),
                        dbserver.available("mariadb"),
                        coordination.available("zookeeper")):
            if not ok:
                raise common.BenchError(why)
        mariadb = scope._started(dbserver.MariaDB())
        zookeeper = scope._started(coordination.ZooKeeper())
        a, b = scope.clouds()
    except BaseException:
        scope.close()
        raise
    return scope, a, b, mariadb, zookeeper
