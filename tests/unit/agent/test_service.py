"""The agent service's glue between its sink, its incoming records and
its engine: sessions recorded before they are acknowledged, ownership
across restarts, and the attempts peers wait for.
"""

import os
import shutil
import socket
import tempfile
import threading
import time
from unittest import mock
import uuid

import fixtures
from oslo_config import cfg
import oslo_messaging as messaging

from dtn_migrate.agent import manager
from dtn_migrate.agent import service
from dtn_migrate import conf as dtn_conf
from dtn_migrate.conf import peer as peer_conf
from dtn_migrate import exception
from dtn_migrate.transfer import errors
from dtn_migrate.transfer.source import transfer as source
from dtn_migrate.transfer.wire import protocol as P
from tests.unit.agent import test_reports
from tests.unit import testcase

KEY = test_reports.KEY
REPORT = test_reports.REPORT


class FakeEngineAPI:
    """engine.rpcapi.EngineAPI, recording casts (optionally held)."""

    def __init__(self, hold=None):
        self.calls = []
        self.threads = []
        self.hold = hold
        self.cond = threading.Condition()

    def __call__(self, **kwargs):
        return self

    def incoming_transfer(self, ctxt, transfer_id, peer, **kwargs):
        if self.hold is not None:
            self.hold.wait(30)
        with self.cond:
            self.calls.append((transfer_id, peer, kwargs))
            self.threads.append(threading.current_thread().name)
            self.cond.notify_all()

    def wait(self, n, timeout=10):
        deadline = time.monotonic() + timeout
        with self.cond:
            while len(self.calls) < n and time.monotonic() < deadline:
                self.cond.wait(0.05)
        time.sleep(0.1)        # and no more than that
        with self.cond:
            return list(self.calls)


class ServiceTestCase(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="dtnm-service-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.useFixture(fixtures.FakeLogger(level=20))
        self.engine = FakeEngineAPI()
        self.useFixture(fixtures.MockPatchObject(
            service.engine_rpcapi, "EngineAPI", self.engine))
        self.cfg = test_reports.engine.TransferConfig(
            object_size=64 << 10, min_free_bytes=0, connect_timeout=2.0)

    def make_conf(self, **agent):
        conf = cfg.ConfigOpts()
        dtn_conf.register_opts(conf)
        conf([], default_config_files=[])
        conf.set_override("host", "east")
        conf.set_override("transport", "tcp", "transfer")
        overrides = dict(staging_root=os.path.join(self.tmp, "staging"),
                         state_dir=os.path.join(self.tmp, "state"),
                         listen_address="127.0.0.1", listen_port=0,
                         peers=["here", "third"])
        overrides.update(agent)
        os.makedirs(overrides["staging_root"], exist_ok=True)
        for key, value in overrides.items():
            conf.set_override(key, value, "agent")
        peer_conf.register_opts(conf)
        for name in ("here", "third"):
            conf.set_override("key", KEY.decode(), "peer:" + name)
        return conf

    def start_east(self, **agent):
        """East's agent: its sink, store and manager (no RPC server)."""
        svc = service.AgentService(self.make_conf(**agent),
                                   transport=mock.Mock())
        svc.sink.start()
        self.addCleanup(svc.sink.stop)
        return svc

    def here(self, east):
        """The sending agent's manager, peered with east."""
        peers = test_reports.FakePeers(east.sink.port)
        return manager.AgentManager(
            "here", test_reports.FakeOutgoing(peers, self.cfg), None)

    def open_session(self, east, tid, name="here"):
        """A control session of ``tid`` from ``name``, up to its ack."""
        peer = source.Peer("east", "127.0.0.1", east.sink.port, KEY)
        conn, ack = source.open_connection(peer, P.Connect(
            P.VERSION, P.VERSION, P.Role.CONTROL, 0, P.Caps.NONE,
            bytes.fromhex(tid), 0, 64 << 10, 1, os.urandom(32), name),
            self.cfg)
        self.addCleanup(conn.close)
        return conn, ack


class TestKeyFileWarning(ServiceTestCase):

    def test_a_key_file_others_read_is_warned_of_at_start(self):
        log = self.useFixture(fixtures.FakeLogger(
            name="dtn_migrate.agent.peers"))
        path = os.path.join(self.tmp, "here.key")
        with open(path, "w") as f:
            f.write(KEY.decode())
        os.chmod(path, 0o644)
        conf = self.make_conf()
        conf.clear_override("key", "peer:here")
        conf.set_override("key_file", path, "peer:here")
        east = service.AgentService(conf, transport=mock.Mock())
        self.addCleanup(east.health.close)
        self.assertIn("[peer:here] key_file %s is readable by group or "
                      "others (mode 0644)" % path, log.output)
        self.assertIn("chmod 600 %s" % path, log.output)
        self.assertEqual(KEY, east.peers.key("here"))


class TestSessions(ServiceTestCase):
    def test_recorded_before_the_ack_even_if_the_engine_hangs(self):
        # The engine's cast of one transfer (bounded retries, seconds)
        # must not delay the record of the next: the record is written
        # before the session is acknowledged, the cast later.
        self.engine.hold = threading.Event()
        self.addCleanup(self.engine.hold.set)
        east = self.start_east()
        first, second = uuid.uuid4().hex, uuid.uuid4().hex
        for tid in (first, second):
            self.open_session(east, tid)
            self.assertEqual("here", east.incoming.get(tid)["peer"])
        listed = {e["transfer_id"]: e
                  for e in east.manager.list_incoming({})}
        self.assertEqual({first, second}, set(listed))
        east.manager.set_import_report({}, second, REPORT)
        self.assertEqual([], self.engine.calls)
        self.engine.hold.set()
        self.assertEqual([(first, "here", {}), (second, "here", {})],
                         self.engine.wait(2))
        self.assertEqual({"sink-notify"}, set(
            n.rsplit("_", 1)[0] for n in self.engine.threads))

    def test_another_peer_is_refused_after_a_restart(self):
        east = self.start_east()
        tid = uuid.uuid4().hex
        conn, _ = self.open_session(east, tid)
        conn.close()
        self.engine.wait(1)
        east.sink.stop()
        east = self.start_east()          # the restart: no session known
        exc = self.assertRaises(errors.PeerError, self.open_session, east,
                                tid, "third")
        self.assertEqual(errors.Code.AUTH, exc.code)
        self.assertIn("belongs to another peer", str(exc))
        self.assertEqual([], east.sink.status())
        self.assertEqual(("here", 1), (east.incoming.owner(tid),
                                       east.incoming.get(tid)["sessions"]))
        self.assertEqual([(tid, "here", {})],
                         self.engine.wait(2, timeout=0.3))
        # Its report is still the first sender's only.
        east.manager.set_import_report({}, tid, REPORT)
        third = self.here(east)
        third.outgoing.local_name = "third"
        self.assertIsNone(third.get_peer_report({}, "east", tid))
        self.assertEqual(REPORT, self.here(east).get_peer_report(
            {}, "east", tid))
        # The owner itself comes back.
        self.open_session(east, tid)
        self.assertEqual(2, east.incoming.get(tid)["sessions"])


class TestWantedAttempt(ServiceTestCase):
    def setUp(self):
        super().setUp()
        self.tid = uuid.uuid4().hex

    def ask(self, east, attempt, who=None):
        return (who or self.here(east)).get_peer_report({}, "east", self.tid,
                                                        attempt)

    def test_a_later_attempt_is_remembered_and_told(self):
        east = self.start_east()
        self.assertIsNone(self.ask(east, 2))    # no record: nothing
        self.open_session(east, self.tid)
        self.assertEqual([(self.tid, "here", {})], self.engine.wait(1))
        failed = {"state": "failed", "error": "glance", "attempt": 1}
        east.manager.set_import_report({}, self.tid, failed)
        self.assertEqual(failed, self.ask(east, 2))
        self.assertEqual(failed, self.ask(east, 2))
        self.assertEqual(failed, self.ask(east, 1))
        calls = self.engine.wait(2)
        self.assertEqual((self.tid, "here", {"attempt": 2}), calls[1])
        self.assertEqual(2, len(calls))
        self.assertEqual(2, east.incoming.get(self.tid)["wanted_attempt"])
        listed = east.manager.list_incoming({})
        self.assertEqual([2], [e["wanted_attempt"] for e in listed])
        # The new attempt's reports answer it.
        east.manager.set_import_report(
            {}, self.tid, {"state": "uploading", "bytes": 1, "attempt": 2})
        self.assertEqual("uploading", self.ask(east, 2)["state"])
        east.manager.set_import_report({}, self.tid, dict(REPORT,
                                                          attempt=2))
        self.assertEqual(dict(REPORT, attempt=3, of_attempt=2),
                         self.ask(east, 3))
        self.assertEqual((self.tid, "here", {"attempt": 3}),
                         self.engine.wait(3)[2])
        # Remembered across a restart.
        east.sink.stop()
        east = self.start_east()
        self.assertEqual(dict(REPORT, attempt=3, of_attempt=2),
                         self.ask(east, 3))
        self.assertEqual(3, len(self.engine.wait(4, timeout=0.3)))

    def test_only_the_owner_raises_it(self):
        east = self.start_east()
        self.open_session(east, self.tid)
        third = self.here(east)
        third.outgoing.local_name = "third"
        self.assertIsNone(self.ask(east, 5, who=third))
        self.assertIsNone(east.incoming.get(self.tid)["wanted_attempt"])
        self.assertEqual(1, len(self.engine.wait(2, timeout=0.3)))

    def test_remembered_without_telling_when_notices_are_off(self):
        east = self.start_east(notify_engine=False)
        self.open_session(east, self.tid)
        self.assertIsNone(self.ask(east, 4))
        self.assertEqual(4, east.incoming.get(self.tid)["wanted_attempt"])
        self.assertEqual([], self.engine.wait(1, timeout=0.3))

    def test_a_failing_record_still_answers(self):
        east = self.start_east()
        self.open_session(east, self.tid)
        east.manager.set_import_report({}, self.tid, REPORT)
        with mock.patch.object(east.incoming, "want_attempt",
                               side_effect=OSError("read-only")):
            self.assertEqual(dict(REPORT, attempt=2, of_attempt=1),
                             self.ask(east, 2))
        self.assertEqual(1, len(self.engine.wait(2, timeout=0.3)))


class TestPeerHealth(ServiceTestCase):
    """peer_health of a real agent service ("here") peered with east's
    running sink and with "third", whose port nothing listens on.
    """

    def start_here(self, east):
        conf = cfg.ConfigOpts()
        dtn_conf.register_opts(conf)
        conf([], default_config_files=[])
        conf.set_override("host", "here")
        conf.set_override("transport", "tcp", "transfer")
        for key, value in dict(
                staging_root=os.path.join(self.tmp, "here-staging"),
                state_dir=os.path.join(self.tmp, "here-state"),
                listen_address="127.0.0.1", listen_port=0,
                peers=["east", "third"], peer_probe_timeout=1.0).items():
            conf.set_override(key, value, "agent")
        os.makedirs(conf.agent.staging_root, exist_ok=True)
        peer_conf.register_opts(conf)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            closed = s.getsockname()[1]
        for name, port in (("east", east.sink.port), ("third", closed)):
            group = "peer:" + name
            conf.set_override("key", KEY.decode(), group)
            conf.set_override("address", "127.0.0.1", group)
            conf.set_override("port", port, group)
        here = service.AgentService(conf, transport=mock.Mock())
        self.addCleanup(here.health.close)
        return here

    def test_health_of_the_peers(self):
        east = self.start_east()
        here = self.start_here(east)
        out = here.manager.peer_health({})
        self.assertEqual(["east", "third"], [p["name"] for p in out])
        self.assertEqual([True, False], [p["reachable"] for p in out])
        self.assertEqual(east.sink.port, out[0]["port"])
        self.assertIsNotNone(out[0]["rtt_ms"])
        self.assertIn("cannot connect", out[1]["error"])
        # Nothing was sent yet: no throughput.
        self.assertEqual([None, None],
                         [p["last_throughput"] for p in out])
        [only] = here.manager.peer_health({}, peer="east")
        self.assertEqual(out[0], only)      # reused, within the cache
        e = self.assertRaises(messaging.ExpectedException,
                              here.manager.peer_health, {}, "north")
        self.assertIsInstance(e.exc_info[1], exception.PeerNotFound)
