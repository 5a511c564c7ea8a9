"""Two local clouds for the demo (devcloud.demo).

Each cloud is whole and on its own, as in production: a Keystone, a
Glance under uwsgi (SQLite, file store) behind it, a staging directory,
a DTN agent, a migration engine with its own SQLite database and, on
RabbitMQ, the dtn-migrate-api under uwsgi registered in the cloud's
catalog as ``dtn-migration``; only the agents' DTN link joins the
clouds.  Agents, engines and the API authenticate to their Keystone
with a password, as deployed.  On RabbitMQ (one vhost per cloud) the
agents and engines are processes with configuration files, as deployed;
on the in-process transport (one ``fake://`` transport per cloud) they
are services of the calling process, configured from the same files,
and there is no API (nothing else could reach those buses)."""

import errno
import functools
import logging
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid

from oslo_service import backend

# Before oslo.messaging (which imports oslo_service.service) is imported:
# the in-process services run on threads, as the agent's and engine's.
backend.init_backend(backend.BackendType.THREADING)

from oslo_config import cfg  # noqa: E402
import oslo_messaging as messaging  # noqa: E402

from dtn_migrate.agent import rpcapi as agent_rpcapi  # noqa: E402
from dtn_migrate.cmd import _errors  # noqa: E402
from dtn_migrate import conf as dtn_conf  # noqa: E402
from dtn_migrate.conf import peer as peer_conf  # noqa: E402
import devcloud  # noqa: E402
from devcloud import _base  # noqa: E402
from dtn_migrate.engine import rpcapi as engine_rpcapi  # noqa: E402
from dtn_migrate import rpc  # noqa: E402

MiB = 1 << 20
#: This process's log (in-process services included), in the work dir.
LOG = "demo.log"
#: What an agent that lost its port says (errno EADDRINUSE).
LOST_PORT = "Address already in use"
RABBIT = ("127.0.0.1", 5672)
BIN = os.path.dirname(sys.executable)


class DemoError(_errors.CommandError):
    """Something the demo needs is missing or failed; the message says
    what.
    """


def rabbit_reachable(address=RABBIT):
    try:
        socket.create_connection(address, timeout=1.0).close()
        return True
    except OSError:
        return False


class Vhosts:
    """Private RabbitMQ vhosts, made and removed with rabbitmqctl."""

    def __init__(self):
        self.names = []         # asked for
        self.created = set()    # known to exist

    @staticmethod
    def _ctl(*args):
        ctl = shutil.which("rabbitmqctl") or "/usr/sbin/rabbitmqctl"
        try:
            proc = subprocess.run([ctl, "-q"] + list(args),
                                  stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True,
                                  timeout=60)
        except (OSError, subprocess.SubprocessError) as exc:
            raise DemoError("rabbitmqctl %s: %s" % (args[0], exc))
        if proc.returncode:
            lines = proc.stderr.strip().splitlines()
            raise DemoError("rabbitmqctl %s failed: %s" % (
                args[0], lines[-1] if lines else
                "exit status %d" % proc.returncode))

    def create(self, name):
        self.names.append(name)
        self._ctl("add_vhost", name)
        self.created.add(name)
        self._ctl("set_permissions", "-p", name, "guest", ".*", ".*", ".*")
        return "rabbit://guest:guest@%s:%d/%s" % (RABBIT + (name,))

    def _delete(self, name, problems):
        try:
            self._ctl("delete_vhost", name)
        except DemoError as exc:
            if name in self.created:    # else it may never have existed
                problems.append("could not delete RabbitMQ vhost %s (%s); "
                                "remove it with: rabbitmqctl delete_vhost %s"
                                % (name, exc, name))

    def delete(self):
        """Remove the vhosts; return what could not be removed."""
        names, self.names = self.names, []
        problems = []
        parallel(*[functools.partial(self._delete, n, problems)
                   for n in names])
        self.created.difference_update(names)
        return problems


def _global_only_messaging_opts():
    """(group, options) that oslo.messaging registers on the global CONF
    only, yet reads from its transport's conf.
    """
    from oslo_messaging._metrics import client as metrics
    out = [("oslo_messaging_metrics", metrics.oslo_messaging_metrics)]
    try:
        from oslo_messaging._tracing import client as tracing
    except ImportError:     # oslo.messaging without tracing
        return out
    return out + [("oslo_messaging_tracing", tracing.oslo_messaging_tracing)]


def bus_conf(path, exchange):
    """The ConfigOpts of one cloud's transport (and so of everything
    that messages through it), written to PATH: its control exchange is
    EXCHANGE.  fake:// transports of one process share the exchanges of
    the same name, so each in-process cloud needs its own.
    """
    _base.write_ini(path, {"DEFAULT": {"control_exchange": exchange}})
    conf = cfg.ConfigOpts()
    for group, opts in _global_only_messaging_opts():
        conf.register_opts(opts, group=group)
    conf([], project="dtn-migrate", default_config_files=[path])
    return conf


def service_conf(path):
    """A ConfigOpts of its own for one in-process service, from PATH."""
    conf = cfg.ConfigOpts()
    dtn_conf.register_opts(conf)
    conf([], project="dtn-migrate", default_config_files=[path])
    peer_conf.register_opts(conf)
    return conf


def log_to(path):
    """Send this process's logs (its services', in-process) to PATH."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers
                    if getattr(h, "dtn_demo", False)]:
        root.removeHandler(handler)
        handler.close()
    handler = logging.FileHandler(path)
    handler.dtn_demo = True
    handler.setFormatter(logging.Formatter(
        "%(asctime)s %(threadName)s %(levelname)s %(name)s %(message)s"))
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    for noisy in ("keystoneauth", "glanceclient", "urllib3", "stevedore",
                  "alembic", "taskflow"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _tail(path, lines=15):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


class Cloud:
    """One cloud: its directory, Glance, DTN agent, engine and bus."""

    def __init__(self, workdir, name, tag):
        self.name = name
        self.dir = os.path.join(workdir, "cloud-%s" % name)
        self.staging_dir = os.path.join(self.dir, "staging")
        self.state_dir = os.path.join(self.dir, "agent-state")
        for d in (self.staging_dir, self.state_dir):
            os.makedirs(d, exist_ok=True)
        self.agent_name = "demo-dtn-%s-%s" % (name, tag)
        self.engine_name = "demo-engine-%s-%s" % (name, tag)
        self.port = devcloud.free_port()
        self.agent_conf = os.path.join(self.dir, "agent.conf")
        self.engine_conf = os.path.join(self.dir, "engine.conf")
        self.agent_log = os.path.join(self.dir, "agent.log")
        self.engine_log = os.path.join(self.dir, "engine.log")
        self.database = "sqlite:///%s" % os.path.join(
            self.dir, "dtn-migrate.sqlite")
        self.keystone = devcloud.KeystoneServer(
            self.dir, name="keystone-%s" % name,
            region="Region%s" % name.upper())
        self.glance = devcloud.GlanceServer(self.dir, name=name,
                                            keystone=self.keystone)
        self.transport = None
        self.url = None
        self.api = None
        #: {section: {key: value}} overlaid on the engine's configuration
        #: (the playground's protection options and Glance credentials).
        self.engine_extra = {}

    def write_configs(self, peer, key, url):
        """Agent and engine configuration files on bus URL."""
        self.url = url
        _base.write_ini(self.agent_conf, {
            "DEFAULT": {"host": self.agent_name, "transport_url": url,
                        "log_file": self.agent_log},
            "agent": {"listen_address": "127.0.0.1",
                      "listen_port": self.port,
                      "staging_root": self.staging_dir,
                      "state_dir": self.state_dir,
                      "peers": peer.agent_name},
            "peer:%s" % peer.agent_name: {"address": "127.0.0.1",
                                          "port": peer.port, "key": key},
        })
        _base.write_ini(self.engine_conf, _base.merge({
            "DEFAULT": {"host": self.engine_name, "transport_url": url,
                        "log_file": self.engine_log},
            "database": {"connection": self.database},
            "engine": {"agent_host": self.agent_name,
                       "poll_interval": 0.2, "progress_interval": 1,
                       "stall_timeout": 120, "reconcile_interval": 5},
            "staging": {"backend": "path", "path": self.staging_dir,
                        "allow_local": "true", "mount_check": "off",
                        "commit_interval_bytes": 16 * MiB,
                        "free_space_margin": 0},
            "glance": dict(self.glance.auth_options(),
                           cloud_name=self.name, retry_max_delay=5),
        }, self.engine_extra))

    def admin(self):
        """A glanceclient of this cloud's Glance, as the demo's user."""
        return self.glance.client()

    def start_api(self):
        """dtn-migrate-api under uwsgi, in this cloud's catalog."""
        self.api = devcloud.ApiServer(self.dir, self.keystone, self.url,
                                      self.database, name=self.name,
                                      region=self.keystone.region)
        self.api.start()

    def openstack_env(self):
        """The ``openstack`` executable's environment: this cloud's
        admin (the operator), on its public endpoints.
        """
        return self.api.openstack_env(self.keystone.admin_user())

    def engine_api(self, timeout=30):
        return engine_rpcapi.EngineAPI(timeout=timeout, retry=3,
                                       transport=self.transport)

    def agent_api(self, timeout=30):
        return agent_rpcapi.AgentAPI(timeout=timeout, retry=3,
                                     transport=self.transport)


class _Processes:
    """Agents and engines as processes (RabbitMQ)."""

    def __init__(self):
        self.procs = []

    def start(self, cloud):
        for exe, conf in (("dtn-migrate-agent", cloud.agent_conf),
                          ("dtn-migrate-engine", cloud.engine_conf)):
            cmd = [os.path.join(BIN, exe), "--config-file", conf]
            setpriv = shutil.which("setpriv")
            if setpriv:
                # Gone with the demo, even when it is killed.
                cmd = [setpriv, "--pdeathsig", "TERM"] + cmd
            out = os.path.join(os.path.dirname(conf), exe + ".out")
            with open(out, "ab") as f:
                proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                        stdout=f, stderr=subprocess.STDOUT,
                                        start_new_session=True)
            self.procs.append((exe, conf, proc))

    def check(self):
        for exe, conf, proc in self.procs:
            if proc.poll() is not None:
                raise DemoError("%s (%s) exited with status %s" % (
                    exe, conf, proc.returncode))

    def terminate(self):
        for _exe, _conf, proc in self.procs:
            if proc.poll() is None:
                proc.terminate()

    def wait(self):
        for _exe, _conf, proc in self.procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        self.procs = []


class _InProcess:
    """Agents and engines as services of this process (fake://)."""

    def __init__(self):
        self.services = []

    def start(self, cloud):
        from dtn_migrate.agent import service as agent_service
        from dtn_migrate.engine import service as engine_service
        agent = agent_service.AgentService(service_conf(cloud.agent_conf),
                                           transport=cloud.transport)
        self.services.append(agent)
        agent.start()
        engine = engine_service.EngineService(
            service_conf(cloud.engine_conf), transport=cloud.transport)
        self.services.append(engine)
        engine.start()

    def check(self):
        pass

    def terminate(self):
        services, self.services = self.services, []

        def stop(svc):
            try:
                svc.stop()
            except Exception:  # noqa: B902 - stop the others anyway
                logging.getLogger(__name__).exception("stop failed")
        parallel(*[functools.partial(stop, s) for s in services])

    def wait(self):
        pass


def parallel(*funcs):
    """Run FUNCS in threads and wait for all; raise the first error."""
    errors = []

    def run(func):
        try:
            func()
        except Exception as exc:  # noqa: B902 - raised in the caller
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(f,), daemon=True)
               for f in funcs]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join()
    except KeyboardInterrupt:
        for t in threads:       # short: rabbitmqctl got the SIGINT too
            t.join(60)
        raise
    if errors:
        raise errors[0]


class Clouds:
    """Clouds ``a`` (source) and ``b`` (peer) on buses of KIND
    ``rabbit`` or ``fake``.  ``make_vhosts`` (rabbit), ``make_buses``,
    ``start_services`` and ``wait_ready`` bring them up in that order,
    ``start_glances`` at any time; ``stop()`` takes down what runs, at
    any point.
    """

    def __init__(self, workdir, kind):
        self.workdir = workdir
        self.kind = kind
        self.tag = uuid.uuid4().hex[:6]
        self.a = Cloud(workdir, "a", self.tag)
        self.b = Cloud(workdir, "b", self.tag)
        self.key = os.urandom(32).hex()
        self.vhosts = Vhosts()
        self.urls = {}
        self.services = None

    @property
    def clouds(self):
        return (self.a, self.b)

    def make_vhosts(self):
        """A RabbitMQ vhost per cloud (rabbit; a few seconds)."""
        def vhost(cloud):
            self.urls[cloud.name] = self.vhosts.create(
                "dtn-demo-%s-%s" % (cloud.name, self.tag))
        parallel(*[functools.partial(vhost, c) for c in self.clouds])

    def make_buses(self):
        """Configuration files and the calling process's transports: on
        the vhosts, or one fake:// transport per cloud.
        """
        for cloud, peer in ((self.a, self.b), (self.b, self.a)):
            if self.kind == "rabbit":
                url, exchange = self.urls[cloud.name], rpc.CONTROL_EXCHANGE
            else:
                url = "fake://"
                exchange = "%s-demo-%s-%s" % (rpc.CONTROL_EXCHANGE,
                                              cloud.name, self.tag)
            cloud.write_configs(peer, self.key, url)
            conf = bus_conf(os.path.join(cloud.dir, "bus.conf"), exchange)
            cloud.transport = messaging.get_rpc_transport(
                conf, url=url, allowed_remote_exmods=rpc.ALLOWED_EXMODS)

    def start_services(self, attempts=5):
        """Launch (rabbit) or start (fake) the agents and engines and wait
        until they answer on their buses.  When an agent lost the port
        chosen for it (another process bound it first), both clouds
        choose again and start again.
        """
        for attempt in range(attempts):
            if self.kind == "rabbit":
                self.services = _Processes()
            else:
                self.services = _InProcess()
            try:
                for cloud in self.clouds:
                    self.services.start(cloud)
                self.wait_ready()
                return
            except (DemoError, OSError) as exc:
                if attempt == attempts - 1 or not self._lost_port(exc):
                    raise
            self.services.terminate()
            self.services.wait()
            for cloud in self.clouds:
                cloud.port = devcloud.free_port()
            for cloud, peer in ((self.a, self.b), (self.b, self.a)):
                cloud.write_configs(peer, self.key, cloud.url)

    def _lost_port(self, exc):
        if isinstance(exc, OSError):
            return exc.errno == errno.EADDRINUSE
        return any(LOST_PORT in _tail(path, 200) for c in self.clouds
                   for path in (c.agent_log, os.path.join(
                       c.dir, "dtn-migrate-agent.out")))

    # Servers start from this thread: they die with the thread that
    # started them (setpriv --pdeathsig follows the parent thread).
    def start_glances(self):
        """Each cloud's Keystone, then its Glance (which registers in
        that catalog).
        """
        for cloud in self.clouds:
            cloud.keystone.start()
            cloud.glance.start()

    def start_apis(self):
        """The API of each cloud (RabbitMQ only), once its engine has
        made the database's tables.
        """
        for cloud in self.clouds:
            cloud.start_api()

    def wait_ready(self, timeout=90):
        """Every agent and engine answers a ping on its cloud's bus."""
        deadline = time.monotonic() + timeout
        own = os.path.join(self.workdir, LOG)
        for cloud in self.clouds:
            agent, engine = cloud.agent_api(2), cloud.engine_api(2)
            for what, ping, log in (
                    ("agent", lambda: agent.ping({}, cloud.agent_name),
                     cloud.agent_log if self.kind == "rabbit" else own),
                    ("engine", lambda: engine.ping({}),
                     cloud.engine_log if self.kind == "rabbit" else own)):
                while True:
                    self.services.check()
                    try:
                        ping()
                        break
                    except messaging.MessagingTimeout:
                        if time.monotonic() > deadline:
                            raise DemoError(
                                "the %s of cloud %s does not answer on its "
                                "bus; %s ends with:\n%s" % (
                                    what, cloud.name, log, _tail(log)))

    def stop(self, keep=False):
        """Stop services and Glances, remove the vhosts (Glance's files
        stay when KEEP); return what could not be cleaned up.
        """
        problems = []

        def attempt(what, func, *args):
            try:
                func(*args)
            except Exception as exc:  # noqa: B902 - clean up the rest
                problems.append("%s: %s" % (what, exc))

        if self.services is not None:
            attempt("stopping the services", self.services.terminate)

        def down(cloud):
            if cloud.api is not None:
                attempt("stopping the API of %s" % cloud.name,
                        functools.partial(cloud.api.stop, kill=True) if keep
                        else cloud.api.close)
            if cloud.transport is not None:
                attempt("closing transport %s" % cloud.name,
                        cloud.transport.cleanup)
                cloud.transport = None
            attempt("stopping Glance %s" % cloud.name,
                    functools.partial(cloud.glance.stop, kill=True) if keep
                    else cloud.glance.close)
            attempt("stopping Keystone %s" % cloud.name,
                    functools.partial(cloud.keystone.stop, kill=True) if keep
                    else cloud.keystone.close)
        # While the services exit.
        parallel(*[functools.partial(down, c) for c in self.clouds])
        if self.services is not None:
            attempt("waiting for the services", self.services.wait)
            self.services = None
        return problems + self.vhosts.delete()
