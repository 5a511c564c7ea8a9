"""Incoming-transfer records, import reports and their RPC endpoints."""

import contextlib
import json
import logging
import os
import shutil
import tempfile
import time
from unittest import mock
import uuid

import fixtures
import oslo_messaging as messaging

from dtn_migrate.agent import manager
from dtn_migrate.agent import reports
from dtn_migrate import exception
from dtn_migrate.transfer import config as engine
from dtn_migrate.transfer.sink import server as sink
from dtn_migrate.transfer.source import transfer as source
from dtn_migrate.transfer.wire import protocol

from tests.unit import testcase

KEY = b"q" * 32
REPORT = {"state": "active", "image_id": "img-1", "os_hash_value": "ab",
          "attempt": 1}
DAY = 86400


class StoreTestCase(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="dtnm-reports-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.state = os.path.join(self.tmp, "state")
        self.store = reports.IncomingStore(self.state)
        self.log = self.useFixture(fixtures.FakeLogger(level=logging.INFO))

    def path(self, tid, kind="json"):
        return os.path.join(self.state, "incoming", "%s.%s" % (tid, kind))

    def read_record(self, tid):
        with open(self.path(tid)) as f:
            return json.load(f)


class TestIncomingStore(StoreTestCase):
    def test_note_and_report_persist(self):
        tid = uuid.uuid4().hex
        rec = self.store.note(tid, "west")
        self.assertEqual(("west", 1), (rec["peer"], rec["sessions"]))
        self.store.note(tid.upper(), "west")
        rec = self.store.set_report(tid, REPORT)
        # The caller gets the record, not the report back.
        self.assertNotIn("report", rec)
        self.assertEqual("active", rec["report_state"])
        self.assertTrue(os.path.isfile(self.path(tid)))
        again = reports.IncomingStore(self.state)
        rec = again.get(tid)
        self.assertEqual("west", rec["peer"])
        self.assertEqual(2, rec["sessions"])
        self.assertNotIn("report", rec)
        self.assertEqual("active", rec["report_state"])
        self.assertIsNone(rec["wanted_attempt"])
        self.assertLessEqual(rec["first_seen"], rec["last_seen"])
        self.assertLessEqual(rec["last_seen"], rec["report_time"])
        self.assertEqual([tid], [r["transfer_id"] for r in again.list()])
        self.assertEqual(REPORT, json.loads(again.report_for(tid, "west")))
        self.assertEqual("west", again.owner(tid))

    def test_body_apart_from_the_record(self):
        # Listing reads no report body: a damaged one does not show.
        tid = uuid.uuid4().hex
        self.store.note(tid, "west")
        self.store.set_report(tid, dict(REPORT, attempt=2))
        self.assertNotIn("report", self.read_record(tid))
        with open(self.path(tid, "report"), "rb") as f:
            self.assertEqual(dict(REPORT, attempt=2), json.load(f))
        with open(self.path(tid, "report"), "w") as f:
            f.write("{damaged")
        again = reports.IncomingStore(self.state)
        with mock.patch("builtins.open", wraps=open) as opened:
            listed = again.list()
        self.assertEqual([self.path(tid)],
                         [c.args[0] for c in opened.call_args_list])
        self.assertEqual(["active"], [r["report_state"] for r in listed])
        self.assertIsNone(again.report_for(tid, "west"))
        self.assertIn("unreadable report", self.log.output)

    def test_progress_stays_in_memory(self):
        tid = uuid.uuid4().hex
        self.store.note(tid, "west")
        progress = {"state": "uploading", "bytes": 10, "attempt": 1}
        with mock.patch.object(os, "fsync") as fsync:
            rec = self.store.set_report(tid, progress)
        fsync.assert_not_called()
        self.assertEqual("uploading", rec["report_state"])
        self.assertNotIn("report_state", self.read_record(tid))
        self.assertFalse(os.path.exists(self.path(tid, "report")))
        self.assertEqual(progress,
                         json.loads(self.store.report_for(tid, "west")))
        self.assertEqual("uploading", self.store.list()[0]["report_state"])
        # A restart forgets progress.
        again = reports.IncomingStore(self.state)
        self.assertIsNone(again.report_for(tid, "west"))
        self.assertIsNone(again.get(tid)["report_state"])

    def test_final_report_is_durable_and_progress_after_it_wins(self):
        tid = uuid.uuid4().hex
        self.store.note(tid, "west")
        failed = {"state": "failed", "error": "no", "attempt": 1}
        with mock.patch.object(os, "fsync", wraps=os.fsync) as fsync:
            self.store.set_report(tid, failed)
        # The body and the record, each with its directory.
        self.assertEqual(4, fsync.call_count)
        retry = {"state": "uploading", "bytes": 5, "attempt": 2}
        self.store.set_report(tid, retry)
        self.assertEqual(retry, json.loads(self.store.report_for(tid,
                                                                 "west")))
        self.assertEqual(failed, json.loads(reports.IncomingStore(
            self.state).report_for(tid, "west")))
        self.store.set_report(tid, dict(REPORT, attempt=2))
        self.assertEqual(dict(REPORT, attempt=2), json.loads(
            reports.IncomingStore(self.state).report_for(tid, "west")))

    def test_report_encoded_once(self):
        tid = uuid.uuid4().hex
        self.store.note(tid, "west")
        raw = reports.encode_report(REPORT)
        self.store.set_report(tid, REPORT)
        with mock.patch.object(reports, "encode_report") as encode:
            for _ in range(3):
                self.assertEqual(raw, self.store.report_for(tid, "west"))
            again = reports.IncomingStore(self.state)
            for _ in range(3):
                self.assertEqual(raw, again.report_for(tid, "west"))
        encode.assert_not_called()

    def test_record_made_for_the_known_sender(self):
        # The engine may report before the session's record is written.
        tid = uuid.uuid4().hex
        self.assertRaises(exception.TransferNotFound, self.store.set_report,
                          tid, REPORT)
        rec = self.store.set_report(tid, REPORT, peer="west")
        self.assertEqual(("west", "active", 0),
                         (rec["peer"], rec["report_state"], rec["sessions"]))
        self.assertEqual(REPORT, json.loads(self.store.report_for(tid,
                                                                  "west")))
        self.assertEqual(1, self.store.note(tid, "west")["sessions"])
        # It never changes the owner.
        self.store.set_report(tid, REPORT, peer="mallory")
        self.assertEqual("west", self.store.owner(tid))

    def test_owner(self):
        tid = uuid.uuid4().hex
        self.assertIsNone(self.store.owner(tid))
        self.store.note(tid, "west")
        self.assertEqual("west", self.store.owner(tid))
        self.assertEqual("west", self.store.owner(tid.upper()))
        for bad in ("../x", "", None, 7):
            self.assertIsNone(self.store.owner(bad))


class TestAttempts(StoreTestCase):
    def setUp(self):
        super().setUp()
        self.tid = uuid.uuid4().hex
        self.store.note(self.tid, "west")

    def answer(self, attempt):
        raw = self.store.report_for(self.tid, "west", attempt)
        return raw and json.loads(raw)

    def test_wanted_attempt_only_grows_and_persists(self):
        want = self.store.want_attempt
        self.assertTrue(want(self.tid, "west", 2))
        self.assertFalse(want(self.tid, "west", 2))
        self.assertFalse(want(self.tid, "west", 1))
        self.assertFalse(want(self.tid, "mallory", 5))
        self.assertFalse(want(uuid.uuid4().hex, "west", 5))
        self.assertEqual(2, self.read_record(self.tid)["wanted_attempt"])
        self.assertTrue(want(self.tid, "west", 3))
        again = reports.IncomingStore(self.state)
        self.assertEqual(3, again.get(self.tid)["wanted_attempt"])
        self.assertEqual([3], [r["wanted_attempt"] for r in again.list()])
        self.assertRaises(exception.InvalidInput, want, "../x", "west", 1)

    def test_answer_stands_for_later_attempts_unless_failed(self):
        self.assertIsNone(self.answer(2))
        self.store.set_report(self.tid, dict(REPORT, attempt=1))
        self.assertEqual(dict(REPORT, attempt=1), self.answer(0))
        self.assertEqual(dict(REPORT, attempt=1), self.answer(1))
        # Saying the attempt it is of: its bytes are that attempt's
        # (before, a retry's import showed the last attempt's bytes).
        self.assertEqual(dict(REPORT, attempt=3, of_attempt=1),
                         self.answer(3))
        progress = {"state": "uploading", "bytes": 1, "attempt": 2}
        self.store.set_report(self.tid, progress)
        self.assertEqual(dict(progress, attempt=4, of_attempt=2),
                         self.answer(4))
        failed = {"state": "failed", "error": "x", "attempt": 2}
        self.store.set_report(self.tid, failed)
        self.assertEqual(failed, self.answer(5))
        # A report that names no attempt.
        bare = {"state": "active"}
        self.store.set_report(self.tid, bare)
        self.assertEqual(dict(bare, attempt=2, of_attempt=0),
                         self.answer(2))
        self.assertEqual(bare, self.answer(0))


class TestRetention(StoreTestCase):
    def setUp(self):
        super().setUp()
        # The store's own clock: a patched time.time would move every
        # thread's.
        self.now = time.time()
        self.days = 0
        self.store = reports.IncomingStore(
            self.state, retention=7 * DAY,
            clock=lambda: self.now + self.days * DAY)

    @contextlib.contextmanager
    def later(self, days):
        self.days = days
        try:
            yield
        finally:
            self.days = 0

    def test_final_records_expire_unless_active(self):
        done, failed, busy, pending, active = (uuid.uuid4().hex
                                               for _ in range(5))
        for tid in (done, failed, busy, pending, active):
            self.store.note(tid, "west")
        self.store.set_report(done, REPORT)
        self.store.set_report(failed, {"state": "failed"})
        self.store.set_report(active, REPORT)
        self.store.set_report(busy, REPORT)
        self.store.set_report(busy, {"state": "uploading", "attempt": 2})
        with self.later(6.9):
            self.assertEqual(5, len(self.store.list()))
        with self.later(7.1):
            listed = self.store.list(active={active})
        self.assertEqual({busy, pending, active},
                         {r["transfer_id"] for r in listed})
        for tid in (done, failed):
            self.assertFalse(os.path.exists(self.path(tid)))
            self.assertFalse(os.path.exists(self.path(tid, "report")))
            self.assertIsNone(self.store.report_for(tid, "west"))
        self.assertIn("record expired", self.log.output)

    def test_a_new_session_restarts_the_clock(self):
        tid = uuid.uuid4().hex
        self.store.note(tid, "west")
        self.store.set_report(tid, REPORT)
        with self.later(5):
            self.store.note(tid, "west")
        with self.later(10):
            self.assertEqual([tid], [r["transfer_id"]
                                     for r in self.store.list()])
        with self.later(12.1):
            self.assertEqual([], self.store.list())

    def test_no_retention_keeps_everything(self):
        store = reports.IncomingStore(self.state, retention=0)
        tid = uuid.uuid4().hex
        store.note(tid, "west")
        store.set_report(tid, REPORT)
        with self.later(10000):
            self.assertEqual(1, len(store.list()))

    def test_unknown_transfer(self):
        tid = uuid.uuid4().hex
        self.assertIsNone(self.store.get(tid))
        self.assertIsNone(self.store.report_for(tid, "west"))
        self.assertRaises(exception.TransferNotFound, self.store.set_report,
                          tid, REPORT)
        self.assertEqual([], self.store.list())
        # Known, but no report yet.
        self.store.note(tid, "west")
        self.assertIsNone(self.store.report_for(tid, "west"))

    def test_report_validation(self):
        tid = uuid.uuid4().hex
        self.store.note(tid, "west")
        for bad in (None, [1], "active", {"x": {1, 2}}, {"x": float("nan")},
                    {"x": object()},
                    {"blob": "b" * protocol.MAX_REPORT}):
            self.assertRaises(exception.InvalidInput, self.store.set_report,
                              tid, bad)
        self.assertIsNone(self.store.get(tid)["report_state"])
        # Just under the limit is fine.
        fits = {"b": "b" * (protocol.MAX_REPORT - len('{"b":""}'))}
        self.store.set_report(tid, fits)
        self.assertEqual(protocol.MAX_REPORT,
                         len(self.store.report_for(tid, "west")))

    def test_hostile_ids(self):
        for bad in ("../../etc/passwd", "a/b", "", None, 7, b"x" * 16,
                    "g" * 32, uuid.uuid4().hex + "/..", "..",
                    uuid.uuid4().hex + "\x00"):
            self.assertRaises(exception.InvalidInput, self.store.note, bad,
                              "west")
            self.assertRaises(exception.InvalidInput, self.store.set_report,
                              bad, REPORT)
            self.assertRaises(exception.InvalidInput, self.store.get, bad)
            self.assertIsNone(self.store.report_for(bad, "west"))
        self.assertEqual([], os.listdir(os.path.join(self.state,
                                                     "incoming")))
        self.assertEqual(["incoming"], os.listdir(self.state))

    def test_report_only_to_the_sending_peer(self):
        tid = uuid.uuid4().hex
        self.store.note(tid, "west")
        self.store.set_report(tid, REPORT)
        self.assertIsNone(self.store.report_for(tid, "mallory"))
        self.assertIn("mallory asked for the import report", self.log.output)
        # A session of the same transfer from another peer changes
        # nothing: the first sender owns it.
        self.store.note(tid, "mallory")
        self.assertEqual("west", self.store.get(tid)["peer"])
        self.assertIsNone(self.store.report_for(tid, "mallory"))
        self.assertIsNotNone(self.store.report_for(tid, "west"))

    def test_list_skips_junk(self):
        tid = uuid.uuid4().hex
        self.store.note(tid, "west")
        d = os.path.join(self.state, "incoming")
        for name, text in (("notes.txt", "x"), ("%s.json.tmp" % tid, "{"),
                           ("%s.json" % uuid.uuid4().hex, "not json"),
                           ("%s.json" % uuid.uuid4().hex, "[1]")):
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        self.assertEqual([tid], [r["transfer_id"]
                                 for r in self.store.list()])


class FakePeers:
    names = ["east", "gone"]

    def __init__(self, port, key=KEY, gone_port=1):
        self.port = port
        self.peer_key = key
        self.gone_port = gone_port

    def source_peer(self, name):
        if name == "east":
            return source.Peer("east", "127.0.0.1", self.port, self.peer_key)
        if name == "gone":
            return source.Peer("gone", "127.0.0.1", self.gone_port, KEY)
        raise exception.PeerNotFound(peer=name, known="east, gone")


class FakeOutgoing:
    local_name = "here"

    def __init__(self, peers, cfg):
        self.peers = peers
        self.cfg = cfg


class TestManagerReports(StoreTestCase):
    """Two agents' managers over a real sink: "here" sends to "east"."""

    def setUp(self):
        super().setUp()
        self.cfg = engine.TransferConfig(object_size=64 << 10,
                                         min_free_bytes=0,
                                         connect_timeout=2.0)
        # East's side: its store answers its sink's REPORT connections.
        self.east_store = reports.IncomingStore(
            os.path.join(self.tmp, "east-state"))
        self.east_sink = self.make_east()
        self.east = manager.AgentManager(
            "east", FakeOutgoing(FakePeers(0), self.cfg), self.east_sink,
            self.east_store)
        # Here: the sending side, with its own (idle) sink.
        self.here_sink = sink.SinkServer(
            os.path.join(self.tmp, "here-staging"), self.cfg, "here",
            lambda peer: None, host="127.0.0.1")
        self.here = self.make_here()

    def make_east(self, **kw):
        server = sink.SinkServer(
            os.path.join(self.tmp, "east-staging"), self.cfg, "east",
            lambda peer: KEY if peer in ("here", "third") else None,
            host="127.0.0.1", reports=self.east_store.report_for,
            owner=self.east_store.owner, **kw).start()
        self.addCleanup(server.stop)
        return server

    def make_here(self, key=KEY):
        return manager.AgentManager(
            "here", FakeOutgoing(FakePeers(self.east_sink.port, key),
                                 self.cfg), self.here_sink, self.store)

    def assertRaisesExpected(self, exc, func, *args):
        # expected_exceptions wraps what it lets through.
        e = self.assertRaises(messaging.ExpectedException, func, *args)
        self.assertIsInstance(e.exc_info[1], exc)
        return e.exc_info[1]

    def test_report_travels_back(self):
        tid = uuid.uuid4().hex
        self.assertIsNone(self.here.get_peer_report({}, "east", tid))
        self.east_store.note(tid, "here")
        self.assertIsNone(self.here.get_peer_report({}, "east", tid))
        rec = self.east.set_import_report({}, tid, REPORT)
        self.assertNotIn("report", rec)
        self.assertEqual(("here", "active"),
                         (rec["peer"], rec["report_state"]))
        self.assertEqual(REPORT, self.here.get_peer_report({}, "east", tid))

    def test_attempt_travels_to_the_peer(self):
        tid = uuid.uuid4().hex
        self.east_store.note(tid, "here")
        self.east.set_import_report({}, tid, dict(REPORT, attempt=1))
        self.assertEqual(dict(REPORT, attempt=1),
                         self.here.get_peer_report({}, "east", tid))
        self.assertEqual(dict(REPORT, attempt=3, of_attempt=1),
                         self.here.get_peer_report({}, "east", tid, 3))
        for bad in (0, -1, True, "2", None, 2.0, protocol.MAX_ATTEMPT + 1):
            self.assertRaisesExpected(exception.InvalidInput,
                                      self.here.get_peer_report, {}, "east",
                                      tid, bad)

    def test_report_before_the_record(self):
        # The sink knows the sender before the record is written.
        tid = uuid.uuid4().hex
        rec = sink.TransferRecord(tid, "here")
        self.east_sink.records[tid] = rec
        self.east.set_import_report({}, tid, REPORT)
        self.assertEqual("here", self.east_store.owner(tid))
        self.assertEqual(REPORT, self.here.get_peer_report({}, "east", tid))

    def test_refused_authentication_is_told_apart(self):
        # A sink that refuses this agent after the key exchange (here:
        # TLS required) answers ERROR with code AUTH.
        self.east_sink.stop()
        self.east_sink = self.make_east(require_tls=lambda peer: True)
        self.here = self.make_here()
        exc = self.assertRaisesExpected(exception.PeerUnreachable,
                                        self.here.get_peer_report, {},
                                        "east", uuid.uuid4().hex)
        self.assertIn("authentication failed: the peer refused this agent",
                      str(exc))
        self.assertIn("requires TLS", str(exc))

    def test_other_peer_gets_none(self):
        tid = uuid.uuid4().hex
        self.east_store.note(tid, "third")
        self.east.set_import_report({}, tid, REPORT)
        self.assertIsNone(self.here.get_peer_report({}, "east", tid))

    def test_errors(self):
        tid = uuid.uuid4().hex
        self.assertRaisesExpected(exception.PeerNotFound,
                                  self.here.get_peer_report, {}, "nope", tid)
        self.assertRaisesExpected(exception.InvalidInput,
                                  self.here.get_peer_report, {}, "east",
                                  "../x")
        exc = self.assertRaisesExpected(exception.PeerUnreachable,
                                        self.here.get_peer_report, {},
                                        "gone", tid)
        self.assertIn("gone cannot be reached", str(exc))
        self.assertEqual(503, exc.code)
        wrong = self.make_here(key=b"w" * 32)
        exc = self.assertRaisesExpected(exception.PeerUnreachable,
                                        wrong.get_peer_report, {}, "east",
                                        tid)
        self.assertIn("authentication failed", str(exc))
        self.assertRaisesExpected(exception.TransferNotFound,
                                  self.east.set_import_report, {}, tid,
                                  REPORT)
        self.east_store.note(tid, "here")
        self.assertRaisesExpected(exception.InvalidInput,
                                  self.east.set_import_report, {}, tid,
                                  ["not", "a", "mapping"])

    def test_list_incoming_merges_live_status(self):
        old, live = uuid.uuid4().hex, uuid.uuid4().hex
        self.east_store.note(old, "here")
        self.east.set_import_report({}, old, REPORT)
        self.east_store.note(live, "here")
        rec = sink.TransferRecord(live, "here")
        rec.sessions = 1
        self.east_sink.records[live] = rec
        listed = {e["transfer_id"]: e for e in self.east.list_incoming({})}
        self.assertEqual({old, live}, set(listed))
        self.assertFalse(listed[old]["active"])
        self.assertEqual("active", listed[old]["report_state"])
        self.assertNotIn("report", listed[old])
        self.assertEqual(1, listed[live]["sessions"])
        self.assertIn("files_total", listed[live])
        self.assertIsNone(listed[live]["report_state"])
        self.assertIsNone(listed[live]["report_time"])
        self.assertIsNone(listed[live]["wanted_attempt"])
        self.east_store.want_attempt(old, "here", 2)
        listed = {e["transfer_id"]: e for e in self.east.list_incoming({})}
        self.assertEqual(2, listed[old]["wanted_attempt"])
        # A live transfer without a record is listed too.
        lost = uuid.uuid4().hex
        self.east_sink.records[lost] = sink.TransferRecord(lost, "here")
        listed = {e["transfer_id"]: e for e in self.east.list_incoming({})}
        self.assertEqual((None, None, "here"), (
            listed[lost]["report_state"], listed[lost]["wanted_attempt"],
            listed[lost]["peer"]))

    def test_list_incoming_keeps_active_transfers(self):
        skew = [0]
        self.east.incoming = reports.IncomingStore(
            os.path.join(self.tmp, "east-state"), retention=1,
            clock=lambda: time.time() + skew[0])
        old, live = uuid.uuid4().hex, uuid.uuid4().hex
        for tid in (old, live):
            self.east.incoming.note(tid, "here")
            self.east.incoming.set_report(tid, REPORT)
        rec = sink.TransferRecord(live, "here")
        rec.active = True
        self.east_sink.records[live] = rec
        skew[0] = 2
        listed = self.east.list_incoming({})
        self.assertEqual([live], [e["transfer_id"] for e in listed])

    def test_ping_names_the_staging_root(self):
        pong = self.east.ping({})
        self.assertEqual("east", pong["host"])
        self.assertEqual(self.east_sink.root.path, pong["staging_root"])
