"""Real agents for functional tests: processes, configs, RabbitMQ, RPC.

Each test class gets its own RabbitMQ vhost (the clouds' buses never
meet); each agent is a ``dtn-migrate-agent`` process with its own config
file, staging root and state directory, optionally inside a network
namespace of ``netns.Lab``.  The test process talks to the agents over
RPC exactly as an operator's tool would (``agent.rpcapi``).

A test that cannot run here (no root, no RabbitMQ, no nfs-ganesha ...)
skips and says why.  With ``DTN_REQUIRE_ALL=1`` in the environment (as
``tools/test`` and ``tox -e functional`` set it) such a test fails
instead, except for the RDMA ones ("no RDMA ..."): importing this module
routes ``skipTest`` of every test under ``tests.functional`` through
:func:`check_skip`, whatever the test's base class.
"""

import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

import oslo_messaging as messaging
import testtools
from testtools import content

from dtn_migrate.agent import rpcapi
from dtn_migrate import conf as dtn_conf
from devcloud import _base as devcloud_base
from dtn_migrate import rpc
from devcloud import netns

MiB = 1 << 20
VENV_BIN = os.path.dirname(sys.executable)
AGENT = os.path.join(VENV_BIN, "dtn-migrate-agent")
FINAL = ("complete", "failed", "cancelled")

#: ``DTN_REQUIRE_ALL=1``: a functional test that would skip fails instead,
#: unless it needs hardware CI machines do not have (RDMA).
REQUIRE_ALL = "DTN_REQUIRE_ALL"
#: Reasons that stay skips under ``DTN_REQUIRE_ALL=1``.
ALLOWED_SKIPS = ("no RDMA",)


def require_all():
    return os.environ.get(REQUIRE_ALL, "").strip() not in ("", "0")


def check_skip(reason):
    """Raise AssertionError when ``DTN_REQUIRE_ALL=1`` forbids skipping
    for ``reason``; return otherwise.
    """
    if require_all() and not str(reason).startswith(ALLOWED_SKIPS):
        raise AssertionError("%s=1: this test may not skip, but it would "
                             "have: %s" % (REQUIRE_ALL, reason))


_testtools_skip = testtools.TestCase.skipTest


def _skip_test(self, reason):
    # Every skip of a functional test goes through here, whatever its base
    # class (testtools.TestCase subclasses of several modules): the strict
    # switch is enforced in one place.
    if self.id().startswith("tests.functional."):
        check_skip(reason)
    _testtools_skip(self, reason)


testtools.TestCase.skipTest = _skip_test


def data_root():
    """tmpfs when it has room (fast, and the tests move GiBs)."""
    override = os.environ.get("DTN_TEST_DIR")
    if override:
        return override
    try:
        st = os.statvfs("/dev/shm")
        if st.f_bavail * st.f_frsize > 10 << 30:
            return "/dev/shm"
    except OSError:
        pass
    return tempfile.gettempdir()


def write_at(path, size, pieces):
    """A file of ``size`` bytes: holes but for ``pieces`` (offset ->
    bytes).
    """
    with open(path, "wb") as f:
        f.truncate(size)
        for offset, data in sorted(pieces.items()):
            f.seek(offset)
            f.write(data)


def random_bytes(n, seed):
    return hashlib.shake_256(b"r%d" % seed).digest(n)


def make_file(path, size, seed=0):
    """Pseudo-random content, different in every MiB (misplaced objects
    change the sha512).
    """
    os.makedirs(os.path.dirname(path), exist_ok=True)
    block = bytearray(hashlib.shake_256(b"%d" % seed).digest(MiB))
    with open(path, "wb") as f:
        i = 0
        left = size
        while left:
            block[:16] = b"%016d" % i
            n = min(left, MiB)
            f.write(block if n == MiB else block[:n])
            left -= n
            i += 1


def sha512(path):
    h = hashlib.sha512()
    with open(path, "rb") as f:
        while True:
            b = f.read(4 * MiB)
            if not b:
                return h.hexdigest()
            h.update(b)


#: A server that lost the port chosen for it says so.
LOST_PORT = "Address already in use"

#: A port free now, never handed out twice by this process.  Another
#: process may still take it before the server binds it: servers that
#: bind their port themselves report it (port 0), the others are started
#: through :func:`start_agents` (or ``devcloud`` servers' own retries),
#: which choose again when the port was lost.
free_port = devcloud_base.free_port


def rabbitmqctl(*args):
    """Run ``rabbitmqctl -q ARGS``; its standard output."""
    return subprocess.run(["rabbitmqctl", "-q"] + list(args), check=True,
                          capture_output=True, text=True,
                          timeout=120).stdout


def restart_broker(case, outage=3.0):
    """Stop the machine's RabbitMQ for ``outage`` seconds and start it
    again; whatever happens, ``case`` leaves it running.
    """
    case.addCleanup(rabbitmqctl, "await_startup")
    case.addCleanup(rabbitmqctl, "start_app")
    rabbitmqctl("stop_app")
    time.sleep(outage)
    rabbitmqctl("start_app")
    rabbitmqctl("await_startup")


class Broker:
    """A private vhost on the machine's RabbitMQ."""

    def __init__(self):
        self.vhost = "dtnm-test-%s" % uuid.uuid4().hex[:8]
        self._ctl("add_vhost", self.vhost)
        try:
            self._ctl("set_permissions", "-p", self.vhost, "guest", ".*",
                      ".*", ".*")
        except BaseException:
            self.delete()
            raise

    @staticmethod
    def available():
        try:
            socket.create_connection(("127.0.0.1", 5672), timeout=2).close()
        except OSError:
            return False, "RabbitMQ is not running on 127.0.0.1:5672"
        if shutil.which("rabbitmqctl") is None:
            return False, "rabbitmqctl is not installed"
        return True, ""

    @staticmethod
    def _ctl(*args):
        subprocess.run(["rabbitmqctl", "-q"] + list(args), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       timeout=60)

    def url(self, host="127.0.0.1"):
        return "rabbit://guest:guest@%s:5672/%s" % (host, self.vhost)

    def delete(self):
        try:
            self._ctl("delete_vhost", self.vhost)
        except (subprocess.SubprocessError, OSError):
            pass


class ServiceProcess:
    """A dtn-migrate service process with its own config and log file;
    subclasses set ``name``, ``dir``, ``conf``, ``log`` and ``command``.
    """

    command = None
    lab = ns = None
    proc = None

    def start(self):
        argv = [self.command, "--config-file", self.conf]
        stdout = os.path.join(self.dir, "stdout.log")
        self._marks = {path: _size(path) for path in (self.log, stdout)}
        out = open(stdout, "ab")
        if self.lab is not None:
            self.proc = self.lab.popen(self.ns, argv, stdout=out,
                                       stderr=subprocess.STDOUT)
        else:
            self.proc = subprocess.Popen(argv, stdout=out,
                                         stderr=subprocess.STDOUT,
                                         start_new_session=True)
        out.close()
        return self

    def wait_ready_with(self, ping, timeout=60):
        """Call ``ping()`` until it answers; fail if the process exits."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError("%s exited with %s:\n%s" % (
                    self.name, self.proc.returncode, self.tail()))
            try:
                return ping()
            except messaging.MessagingTimeout:
                pass
        raise AssertionError("%s not ready in %d s:\n%s"
                             % (self.name, timeout, self.tail()))

    def kill9(self):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def discard(self):
        """End the process at a test's end: kill -9.  No test checks a
        clean stop there (those that do call stop()), and a clean stop
        waits seconds for the polls of its message bus's consumers.
        """
        self.kill9()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill9()

    def lost_port(self):
        """True when the process, since its last start, failed to bind
        its port because another process had taken it.
        """
        for path, mark in getattr(self, "_marks", {}).items():
            try:
                with open(path, "rb") as f:
                    f.seek(mark)
                    if LOST_PORT.encode() in f.read():
                        return True
            except OSError:
                pass
        return False

    def tail(self, n=60):
        try:
            with open(self.log) as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return "(no log)"

    def log_text(self):
        try:
            with open(self.log) as f:
                return f.read()
        except OSError:
            return ""

    def problems(self, n=400):
        """The last ``n`` warnings and errors of the log, each with the
        traceback that follows it: the cause of a failure may be older
        than the log's tail.
        """
        lines, keep = [], False
        for line in self.log_text().splitlines(keepends=True):
            if _LOG_LINE.match(line):
                keep = _PROBLEM.search(line) is not None
            if keep:
                lines.append(line)
        return "".join(lines[-n:]) or "(none)"


_LOG_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
_PROBLEM = re.compile(r" (WARNING|ERROR|CRITICAL) ")


def log_details(case, proc, lines=200):
    """When ``case`` fails, attach the last ``lines`` of ``proc``'s log
    and its warnings and errors.
    """
    case.addOnException(lambda exc_info: (
        case.addDetail("log-%s" % proc.name,
                       content.text_content(proc.tail(lines))),
        case.addDetail("problems-%s" % proc.name,
                       content.text_content(proc.problems()))))


#: Config files of the test services.
write_conf = devcloud_base.write_ini


class Agent(ServiceProcess):
    """One dtn-migrate-agent process."""

    command = AGENT

    def __init__(self, workdir, name, key, transport_url, peers,
                 listen_address="127.0.0.1", port=None, lab=None, ns=None,
                 transfer=None, extra=None, staging=None):
        self.name = name
        self.dir = os.path.join(workdir, name)
        self.staging = staging or os.path.join(self.dir, "staging")
        self.state = os.path.join(self.dir, "state")
        for d in (self.staging, self.state):
            os.makedirs(d, exist_ok=True)
        self.port = port or free_port()
        self.listen_address = listen_address
        self.lab, self.ns = lab, ns
        self.conf = os.path.join(self.dir, "agent.conf")
        self.log = os.path.join(self.dir, "agent.log")
        self.key, self.transport_url = key, transport_url
        #: {peer name: (address, port)} of this agent's configuration.
        self.peers = dict(peers)
        self.transfer = dict(transfer or {})
        self.extra = extra or {}
        self.configure()
        self.proc = None

    def configure(self):
        """Write the configuration for the current port and peers."""
        sections = {
            "DEFAULT": {"host": self.name,
                        "transport_url": self.transport_url,
                        "log_file": self.log, "debug": "true"},
            "agent": {"listen_address": self.listen_address,
                      "listen_port": self.port, "staging_root": self.staging,
                      "state_dir": self.state,
                      "peers": ",".join(sorted(self.peers))},
            "transfer": dict(self.transfer),
        }
        for peer, (addr, port) in self.peers.items():
            # These agents receive operator transfers of files of any
            # name; a test of the default (a migration's two files, as
            # devcloud's agents) sets it back through ``extra``.
            sections["peer:%s" % peer] = {"address": addr, "port": port,
                                          "key": self.key,
                                          "incoming_names": "any"}
        for section, values in self.extra.items():
            sections.setdefault(section, {}).update(values)
        write_conf(self.conf, sections)

    def wait_ready(self, api, timeout=60):
        return self.wait_ready_with(lambda: api.ping({}, self.name),
                                    timeout)


def _size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def start_agents(agents, ready, relays=(), attempts=5):
    """Start AGENTS (whose configurations may name each other's ports)
    and wait until ``ready(agent)`` answers for each.  An agent that lost
    its port to another process between the choice of the port and its
    bind gets a new one: every configuration that named the old port
    (and every relay of RELAYS forwarding to it) follows, and all of them
    start again.
    """
    for attempt in range(attempts):
        for a in agents:
            a.start()
        try:
            for a in agents:
                ready(a)
            return
        except AssertionError:
            lost = [a for a in agents if a.lost_port()]
            if not lost or attempt == attempts - 1:
                raise
        for a in agents:
            a.kill9()
        for a in lost:
            old, a.port = a.port, free_port()
            for other in agents:
                other.peers.update({
                    name: (addr, a.port)
                    for name, (addr, port) in other.peers.items()
                    if name == a.name and port == old})
            for r in relays:
                if r.upstream[1] == old:
                    r.upstream = (r.upstream[0], a.port)
        for a in agents:
            a.configure()


_rpc = {"url": None, "parsed": False}


def rpc_api(url, timeout=5):
    """An AgentAPI on ``url`` (one transport per test process URL)."""
    if _rpc["url"] != url:
        if rpc.TRANSPORT is not None:
            rpc.cleanup()
        conf = dtn_conf.CONF
        if not _rpc["parsed"]:
            messaging.set_transport_defaults(
                control_exchange=rpc.CONTROL_EXCHANGE)
            conf([], project="dtn-migrate", default_config_files=[])
            _rpc["parsed"] = True
        rpc.TRANSPORT = messaging.get_rpc_transport(
            conf, url=url, allowed_remote_exmods=rpc.ALLOWED_EXMODS)
        _rpc["url"] = url
    return rpcapi.AgentAPI(timeout=timeout, retry=2)


class FunctionalTestCase(testtools.TestCase):
    """Two agents (``src`` and ``dst``) on a private vhost."""

    timeout = 600
    transfer_conf = {}

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        ok, why = Broker.available()
        if not ok:
            check_skip(why)
            raise testtools.TestCase.skipException(why)
        cls.broker = Broker()

    @classmethod
    def tearDownClass(cls):
        if _rpc["url"] == cls.broker.url():
            rpc.cleanup()
            _rpc["url"] = None
        cls.broker.delete()
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        self.workdir = tempfile.mkdtemp(prefix="dtnm-func-", dir=data_root())
        self.addCleanup(shutil.rmtree, self.workdir, True)
        self.key = os.urandom(32).hex()
        self.api = rpc_api(self.broker.url())
        self.agents = []

    def agent(self, name, peers, **kw):
        kw.setdefault("transfer", self.transfer_conf)
        a = Agent(self.workdir, name, kw.pop("key", self.key),
                  kw.pop("transport_url", self.broker.url()), peers, **kw)
        self.agents.append(a)
        self.addCleanup(a.discard)
        log_details(self, a)
        return a

    def mesh(self, layout):
        """Start agents; ``layout`` maps a role to (peer roles, kwargs or
        a function of the role->name map giving them), or to None for a
        peer that others know of but that does not run.  Returns role ->
        Agent, or -> the name of a role that does not run.
        """
        names = {r: "%s-%s" % (r, uuid.uuid4().hex[:6]) for r in layout}
        ports = {r: free_port() for r in layout}
        agents = {}
        for role, spec in layout.items():
            if spec is None:
                continue
            peer_roles, kw = spec
            if callable(kw):
                kw = kw(names)
            peers = {names[p]: ("127.0.0.1", ports[p]) for p in peer_roles}
            agents[role] = self.agent(names[role], peers, port=ports[role],
                                      **kw)
        start_agents(list(agents.values()),
                     lambda a: a.wait_ready(self.api))
        return {r: agents.get(r, names[r]) for r in layout}

    def pair(self, src_kw=None, dst_kw=None):
        """Start ``src`` and ``dst`` agents peered with each other."""
        a = self.mesh({"dst": (["src"], dst_kw or {}),
                       "src": (["dst"], src_kw or {})})
        return a["src"], a["dst"]

    def start_transfer(self, src, dst, files, **kw):
        status = self.api.start_transfer({}, src.name, dst.name, files, **kw)
        return status["transfer_id"]

    def status(self, agent, tid):
        return self.api.get_transfer({}, agent.name, tid)

    def wait_for(self, agent, tid, until=None, timeout=None):
        """Poll until the transfer is final (or ``until(status)``)."""
        deadline = time.monotonic() + (timeout or self.timeout)
        status = None
        while time.monotonic() < deadline:
            try:
                status = self.status(agent, tid)
            except messaging.MessagingTimeout:
                status = None
            if status is not None:
                if until is not None and until(status):
                    return status
                if until is None and status.get("state") in FINAL:
                    return status
            time.sleep(0.05)
        self.fail("transfer %s not done in time; last status %s"
                  % (tid, json.dumps(status)))

    def assertSame(self, a, b):
        self.assertEqual(os.path.getsize(a), os.path.getsize(b))
        self.assertEqual(sha512(a), sha512(b), "%s differs from %s" % (a, b))


def need_netns(test):
    ok, why = netns.available()
    if not ok:
        test.skipTest(why)
