"""Real agents for functional tests: processes, configs, RabbitMQ, RPC
(the services themselves: :mod:`devcloud.services`).

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
import shutil
import tempfile
import time
import uuid

import oslo_messaging as messaging
import testtools

from devcloud import netns
from devcloud import services
from dtn_migrate.agent import rpcapi
from dtn_migrate import rpc

MiB = 1 << 20
VENV_BIN = services.VENV_BIN
AGENT = services.AGENT
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


#: The local clouds' services (:mod:`devcloud.services`), under the
#: names the functional tests use.
data_root = services.data_root
free_port = services.free_port
LOST_PORT = services.LOST_PORT
rabbitmqctl = services.rabbitmqctl
Broker = services.Broker
ServiceProcess = services.ServiceProcess
Agent = services.Agent
start_agents = services.start_agents
log_details = services.log_details
write_conf = services.write_conf


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


_rpc = services._rpc


def rpc_api(url, timeout=5):
    """An AgentAPI on ``url`` (one transport per test process URL)."""
    if _rpc["url"] != url:
        if rpc.TRANSPORT is not None:
            rpc.cleanup()
        conf = services.rpc_conf()
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
