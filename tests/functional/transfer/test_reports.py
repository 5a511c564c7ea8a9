"""Import reports and incoming-transfer notices between real agents.

Status travels peer engine -> peer agent (set_import_report) -> DTN link
(REPORT connection) -> source agent (get_peer_report); the receiving
agent tells its own engine of each incoming session over its own bus,
and of each later attempt the source waits for (the REPORT connection
carries it).
"""

import json
import os
import threading
import time
import uuid

import oslo_messaging as messaging

from dtn_migrate import exception
from dtn_migrate.engine import rpcapi as engine_rpcapi
from dtn_migrate import rpc
from tests.functional import base

MiB = base.MiB
REPORT = {"state": "active", "image_id": "6c1e0a3e-img",
          "os_hash_value": "ab" * 64, "attempt": 1}


class FakeEngine:
    """The engine's incoming_transfer endpoint, recording its calls:
    (transfer id, peer) for a session, (transfer id, peer, attempt) for
    an attempt the source waits for.
    """

    target = messaging.Target(version=engine_rpcapi.EngineAPI.VERSION)

    def __init__(self):
        self.calls = []
        self.cond = threading.Condition()

    def incoming_transfer(self, ctxt, transfer_id, peer, attempt=None):
        with self.cond:
            self.calls.append((transfer_id, peer) if attempt is None
                              else (transfer_id, peer, attempt))
            self.cond.notify_all()

    def wait_for(self, transfer_id, timeout=30, count=1):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                calls = [c for c in self.calls if c[0] == transfer_id]
                left = deadline - time.monotonic()
                if len(calls) >= count or left <= 0:
                    return calls
                self.cond.wait(left)


class TestReports(base.FunctionalTestCase):

    def send_image(self, src, dst):
        """Move <migration>/image.json and image.data from src to dst."""
        tid = uuid.uuid4().hex
        with_dir = os.path.join(src.staging, tid)
        os.makedirs(with_dir)
        with open(os.path.join(with_dir, "image.json"), "w") as f:
            json.dump({"name": "cirros", "disk_format": "qcow2"}, f)
        base.make_file(os.path.join(with_dir, "image.data"), 3 * MiB + 7,
                       seed=5)
        self.start_transfer(src, dst, ["%s/image.json" % tid,
                                       "%s/image.data" % tid],
                            transfer_id=tid)
        status = self.wait_for(src, tid)
        self.assertEqual("complete", status["state"], status.get("error"))
        self.assertSame(os.path.join(with_dir, "image.data"),
                        os.path.join(dst.staging, tid, "image.data"))
        return tid

    def incoming(self, agent, tid, timeout=30):
        """The agent's incoming record of ``tid`` (once it is written)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for entry in self.api.list_incoming({}, agent.name):
                if entry["transfer_id"] == tid:
                    return entry
            time.sleep(0.05)
        self.fail("%s has no incoming record of %s" % (agent.name, tid))

    def assertReport(self, expected, src, dst, tid, attempt=1,
                     timeout=15):
        """``src``'s agent gives ``expected`` as ``dst``'s report of
        ``tid``: at once, or once the peer pushed it over the report
        channel (get_peer_report answers from the channel, so it may lag
        a report just set by the push's delay, or by a reconnection
        after the peer restarted).
        """
        deadline = time.monotonic() + timeout
        while True:
            got = self.api.get_peer_report({}, src.name, dst.name, tid,
                                           attempt)
            if got == expected or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual(expected, got)

    def assertRemote(self, exc_class, func, *args):
        exc = self.assertRaises(exc_class, func, *args)
        return str(exc)

    def test_report_travels_back_to_the_source(self):
        src, dst = self.pair()
        self.assertEqual(dst.staging, self.api.ping({}, dst.name)[
            "staging_root"])
        tid = self.send_image(src, dst)
        entry = self.incoming(dst, tid)
        self.assertEqual(src.name, entry["peer"])
        self.assertIsNone(entry["report_state"])
        # Not imported yet: the peer has no report.
        self.assertIsNone(self.api.get_peer_report({}, src.name, dst.name,
                                                   tid))
        self.api.set_import_report({}, dst.name, tid, REPORT)
        self.assertReport(REPORT, src, dst, tid)
        failed = {"state": "failed", "error": "glance said no"}
        self.api.set_import_report({}, dst.name, tid, failed)
        self.assertReport(failed, src, dst, tid)
        self.assertEqual("failed",
                         self.incoming(dst, tid)["report_state"])
        # The source never received it: nothing to report there.
        self.assertRemote(exception.TransferNotFound,
                          self.api.set_import_report, {}, src.name, tid,
                          REPORT)
        self.assertRemote(exception.InvalidInput,
                          self.api.set_import_report, {}, dst.name, tid,
                          {"blob": "x" * (64 << 10)})

    def test_progress_is_pushed_over_one_report_channel(self):
        # The source's agent keeps one REPORT connection open while the
        # import runs; the peer's sink pushes each new report over it.
        src, dst = self.pair()
        tid = self.send_image(src, dst)
        self.incoming(dst, tid)
        self.assertIsNone(self.api.get_peer_report({}, src.name, dst.name,
                                                   tid))
        for done in range(1, 6):
            progress = {"state": "uploading", "bytes": done << 20,
                        "attempt": 1}
            self.api.set_import_report({}, dst.name, tid, progress)
            self.assertReport(progress, src, dst, tid)
        answered = "report of transfer %s for %s" % (tid, src.name)
        self.assertEqual(1, dst.log_text().count(answered))
        self.api.set_import_report({}, dst.name, tid, REPORT)
        self.assertReport(REPORT, src, dst, tid)

    def test_report_survives_an_agent_restart(self):
        src, dst = self.pair()
        tid = self.send_image(src, dst)
        self.incoming(dst, tid)
        self.api.set_import_report({}, dst.name, tid, REPORT)
        dst.stop()
        dst.start()
        dst.wait_ready(self.api)
        self.assertEqual(REPORT, self.api.get_peer_report(
            {}, src.name, dst.name, tid))

    def test_no_report_for_a_transfer_never_received(self):
        src, dst = self.pair()
        self.assertIsNone(self.api.get_peer_report(
            {}, src.name, dst.name, uuid.uuid4().hex))
        self.assertRemote(exception.InvalidInput, self.api.get_peer_report,
                          {}, src.name, dst.name, "../../etc/passwd")
        self.assertRemote(exception.PeerNotFound, self.api.get_peer_report,
                          {}, src.name, "nobody", uuid.uuid4().hex)

    def test_wrong_key_or_no_peer_is_unreachable(self):
        a = self.mesh({
            "src": (["dst", "liar", "gone"], {}),
            "dst": (["src"], {}),
            # Same peering, another key.
            "liar": (["src"], {"key": os.urandom(32).hex()}),
            "gone": None})
        src, dst, liar = a["src"], a["dst"], a["liar"]
        tid = self.send_image(src, dst)
        self.incoming(dst, tid)
        self.api.set_import_report({}, dst.name, tid, REPORT)
        message = self.assertRemote(
            exception.PeerUnreachable, self.api.get_peer_report, {},
            src.name, liar.name, tid)
        self.assertIn("Peer DTN %s cannot be reached" % liar.name, message)
        self.assertIn("authentication failed", message)
        self.assertIn("wrong key", message)
        message = self.assertRemote(
            exception.PeerUnreachable, self.api.get_peer_report, {},
            src.name, a["gone"], tid)
        self.assertIn("cannot connect", message)
        # The good peering still works.  The source dropped the liar
        # before proving anything itself: no report lookup happened.
        self.assertEqual(REPORT, self.api.get_peer_report(
            {}, src.name, dst.name, tid))
        self.assertNotIn("report of transfer", liar.log_text())
        self.assertEqual([], self.api.list_incoming({}, liar.name))

    def engine(self):
        endpoint = FakeEngine()
        server = rpc.get_server(messaging.Target(
            topic=engine_rpcapi.TOPIC, server="engine-%s"
            % uuid.uuid4().hex[:6]), [endpoint])
        server.start()

        def stop():
            server.stop()
            server.wait()
        self.addCleanup(stop)
        return endpoint

    def test_engine_hears_of_incoming_transfers(self):
        engine = self.engine()
        src, dst = self.pair()
        tid = self.send_image(src, dst)
        calls = engine.wait_for(tid)
        # One session, told by the receiving agent, naming the sender.
        self.assertEqual([(tid, src.name)], calls)
        time.sleep(1)
        self.assertEqual([(tid, src.name)], engine.wait_for(tid, 0))
        self.assertEqual(src.name, self.incoming(dst, tid)["peer"])

    def test_engine_notice_can_be_turned_off(self):
        engine = self.engine()
        # Two receiving agents on the same bus, with the same engine: one
        # with notices off, one with the default (the positive control).
        a = self.mesh({
            "quiet": (["src"], {"extra": {
                "agent": {"notify_engine": "false"}}}),
            "told": (["src"], {}),
            "src": (["quiet", "told"], {})})
        src, quiet, told = a["src"], a["quiet"], a["told"]
        silent = self.send_image(src, quiet)
        # The record is written before any notice would be sent.
        self.incoming(quiet, silent)
        heard = self.send_image(src, told)
        # The control: the engine hears of the later transfer, received
        # by the agent that notifies, so the bus and the engine work ...
        self.assertEqual([(heard, src.name)], engine.wait_for(heard))
        self.assertEqual(src.name, self.incoming(told, heard)["peer"])
        # ... and nothing came, or comes, of the earlier one.
        self.assertEqual([], engine.wait_for(silent, 2))
        self.assertEqual([(heard, src.name)], engine.calls)

    def test_attempt_round_trip(self):
        # A retried migration keeps its transfer id: the source tells
        # the peer over the REPORT connection which attempt it waits for,
        # the peer remembers it and has its engine import again.
        engine = self.engine()
        src, dst = self.pair()
        tid = self.send_image(src, dst)
        self.assertEqual([(tid, src.name)], engine.wait_for(tid))
        self.assertIsNone(self.incoming(dst, tid)["wanted_attempt"])
        failed = {"state": "failed", "error": "glance said no",
                  "attempt": 1}
        self.api.set_import_report({}, dst.name, tid, failed)
        self.assertReport(failed, src, dst, tid, 1)
        # Attempt 2: the failed report stays attempt 1's.
        self.assertEqual(failed, self.api.get_peer_report(
            {}, src.name, dst.name, tid, 2))
        self.assertEqual([(tid, src.name), (tid, src.name, 1),
                          (tid, src.name, 2)],
                         engine.wait_for(tid, count=3))
        self.assertEqual(2, self.incoming(dst, tid)["wanted_attempt"])
        # Asked again, or for an earlier attempt: nothing new to tell.
        self.api.get_peer_report({}, src.name, dst.name, tid, 2)
        self.api.get_peer_report({}, src.name, dst.name, tid, 1)
        self.assertEqual(3, len(engine.wait_for(tid, timeout=1, count=4)))
        # The new attempt reports; remembered across a restart.
        self.api.set_import_report({}, dst.name, tid,
                                   dict(REPORT, attempt=2))
        dst.stop()
        dst.start()
        dst.wait_ready(self.api)
        self.assertEqual(2, self.incoming(dst, tid)["wanted_attempt"])
        self.assertReport(dict(REPORT, attempt=2), src, dst, tid, 2)
        # A success stands for a later attempt too.
        self.assertEqual(dict(REPORT, attempt=3, of_attempt=2),
                         self.api.get_peer_report(
                             {}, src.name, dst.name, tid, 3))
        self.assertEqual((tid, src.name, 3),
                         engine.wait_for(tid, count=4)[-1])
        self.assertRemote(exception.InvalidInput, self.api.get_peer_report,
                          {}, src.name, dst.name, tid, 0)
