"""Incoming-transfer records, import reports and their RPC endpoints."""

import json
import logging
import os
import shutil
import tempfile
import uuid

import fixtures
import oslo_messaging as messaging
import testtools

from dtn_migrate.agent import manager
from dtn_migrate.agent import reports
from dtn_migrate import exception
from dtn_migrate.transfer import config as engine
from dtn_migrate.transfer import protocol
from dtn_migrate.transfer import sink
from dtn_migrate.transfer import source

KEY = b"q" * 32
REPORT = {"state": "active", "image_id": "img-1", "os_hash_value": "ab"}


class StoreTestCase(testtools.TestCase):
    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="dtnm-reports-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.state = os.path.join(self.tmp, "state")
        self.store = reports.IncomingStore(self.state)
        self.log = self.useFixture(fixtures.FakeLogger(level=logging.INFO))


class TestIncomingStore(StoreTestCase):
    def test_note_and_report_persist(self):
        tid = uuid.uuid4().hex
        rec = self.store.note(tid, "west")
        self.assertEqual(("west", 1), (rec["peer"], rec["sessions"]))
        self.store.note(tid.upper(), "west")
        self.store.set_report(tid, REPORT)
        self.assertTrue(os.path.isfile(os.path.join(
            self.state, "incoming", tid + ".json")))
        again = reports.IncomingStore(self.state)
        rec = again.get(tid)
        self.assertEqual("west", rec["peer"])
        self.assertEqual(2, rec["sessions"])
        self.assertEqual(REPORT, rec["report"])
        self.assertLessEqual(rec["first_seen"], rec["last_seen"])
        self.assertIn("report_time", rec)
        self.assertEqual([tid], [r["transfer_id"] for r in again.list()])
        self.assertEqual(REPORT, json.loads(again.report_for(tid, "west")))

    def test_unknown_transfer(self):
        tid = uuid.uuid4().hex
        self.assertIsNone(self.store.get(tid))
        self.assertIsNone(self.store.report_for(tid, "west"))
        self.assertRaises(exception.TransferNotFound, self.store.set_report,
                          tid, REPORT)
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
        self.assertNotIn("report", self.store.get(tid))
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
        self.east_sink = sink.SinkServer(
            os.path.join(self.tmp, "east-staging"), self.cfg, "east",
            lambda peer: KEY if peer in ("here", "third") else None,
            host="127.0.0.1", reports=self.east_store.report_for).start()
        self.addCleanup(self.east_sink.stop)
        self.east = manager.AgentManager(
            "east", FakeOutgoing(FakePeers(0), self.cfg), self.east_sink,
            self.east_store)
        # Here: the sending side, with its own (idle) sink.
        self.here_sink = sink.SinkServer(
            os.path.join(self.tmp, "here-staging"), self.cfg, "here",
            lambda peer: None, host="127.0.0.1")
        self.here = self.make_here()

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
        self.assertEqual(REPORT, rec["report"])
        self.assertEqual(REPORT, self.here.get_peer_report({}, "east", tid))

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

    def test_ping_names_the_staging_root(self):
        pong = self.east.ping({})
        self.assertEqual("east", pong["host"])
        self.assertEqual(self.east_sink.root.path, pong["staging_root"])
