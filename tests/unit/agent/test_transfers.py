"""Outgoing transfers of an agent, against an in-process sink."""

import json
import os
import shutil
import tempfile
import time
import uuid

from oslo_config import cfg
import oslo_messaging as messaging

from dtn_migrate.agent import manager
from dtn_migrate.agent import transfers
from dtn_migrate.common import states
from dtn_migrate.conf import agent as agent_conf
from dtn_migrate import exception
from dtn_migrate.transfer import config as engine
from dtn_migrate.transfer.sink import server as sink
from dtn_migrate.transfer.source import transfer as source
from tests.unit import utils as test_utils
from tests.unit import testcase

KEY = b"q" * 32


class FakePeers:
    names = ["east"]

    def __init__(self, port):
        self.port = port

    def source_peer(self, name):
        if name != "east":
            raise exception.PeerNotFound(peer=name, known="east")
        return source.Peer("east", "127.0.0.1", self.port, KEY)

    def key(self, name):
        return KEY if name == "here" else None


class TestOutgoing(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="dtnm-agent-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.root = os.path.join(self.tmp, "staging")
        os.makedirs(self.root)
        self.cfg = engine.TransferConfig(
            object_size=64 << 10, sync_interval=0.01, min_free_bytes=0,
            reconnect_initial_interval=0.05)
        self.sink = sink.SinkServer(os.path.join(self.tmp, "dst"), self.cfg,
                                    "east", FakePeers(0).key,
                                    host="127.0.0.1").start()
        self.addCleanup(self.sink.stop)
        self.out = self.make(os.path.join(self.tmp, "state"))

    def make(self, state_dir, max_outgoing=2):
        conf = cfg.ConfigOpts()
        agent_conf.register_opts(conf)
        conf([], default_config_files=[])
        conf.set_override("staging_root", self.root, "agent")
        conf.set_override("state_dir", state_dir, "agent")
        conf.set_override("max_outgoing", max_outgoing, "agent")
        out = transfers.OutgoingTransfers(conf, "here", self.cfg,
                                          FakePeers(self.sink.port))
        self.addCleanup(out.stop)
        return out

    def write(self, name, size):
        path = os.path.join(self.root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(os.urandom(size))
        return path

    def wait(self, tid, states=states.FINAL_STATES, timeout=30):
        def reached():
            status = self.out.get(tid)
            return status if status["state"] in states else None

        status = test_utils.wait_until(reached, timeout)
        if not status:
            self.fail("transfer %s stuck: %s" % (tid, self.out.get(tid)))
        return status

    def test_transfer_completes_and_is_persisted(self):
        self.write("a.img", 300000)
        self.write("dir/b.img", 1000)
        status = self.out.start("east", ["a.img", "dir"])
        tid = status["transfer_id"]
        status = self.wait(tid)
        self.assertEqual("complete", status["state"], status.get("error"))
        self.assertEqual(2, status["files_done"])
        with open(os.path.join(self.tmp, "state", tid, "status.json")) as f:
            self.assertEqual("complete", json.load(f)["state"])
        self.assertEqual([tid], [s["transfer_id"] for s in self.out.list()])
        # Another instance (a restarted agent) reports the same.
        self.assertEqual("complete", self.make(
            os.path.join(self.tmp, "state")).get(tid)["state"])

    def test_last_completed_transfer_per_peer(self):
        self.assertIsNone(self.out.last_completed("east"))
        self.write("a.img", 400000)
        before = time.time()
        tid = self.out.start("east", ["a.img"])["transfer_id"]
        status = self.wait(tid)
        self.assertEqual("complete", status["state"], status.get("error"))
        when, rate = self.out.last_completed("east")
        self.assertLessEqual(before, when)
        self.assertLessEqual(when, time.time())
        # Bytes over the time the transfer took, as it recorded both.
        self.assertAlmostEqual(400000 / status["elapsed"], rate,
                               delta=0.01 * rate + 1)
        self.assertEqual(when, status["finished_at"])
        self.assertIsNone(self.out.last_completed("west"))
        # A restarted agent reads it back from the state directory; a
        # later transfer replaces it.
        again = self.make(os.path.join(self.tmp, "state"))
        self.assertEqual((when, rate), again.last_completed("east"))
        self.write("b.img", 1000)
        tid = again.start("east", ["b.img"])["transfer_id"]
        test_utils.wait_until(
            lambda: again.get(tid)["state"] in states.FINAL_STATES, 30)
        self.assertLess(when, again.last_completed("east")[0])

    def test_throughput_of_a_status(self):
        self.assertEqual(50.0, transfers.throughput(
            {"bytes_done": 150, "resumed_bytes": 50, "elapsed": 2.0}))
        for status in ({"bytes_done": 50, "resumed_bytes": 50,
                        "elapsed": 2.0},
                       {"bytes_done": 10, "elapsed": 0}, {}):
            self.assertIsNone(transfers.throughput(status))

    def test_same_transfer_id_does_not_run_twice(self):
        self.write("a.img", 1000)
        tid = uuid.uuid4().hex
        first = self.out.start("east", ["a.img"], transfer_id=tid)
        self.wait(tid)
        again = self.out.start("east", ["a.img"], transfer_id=tid)
        self.assertEqual(first["transfer_id"], again["transfer_id"])
        self.assertEqual("complete", again["state"])
        self.assertEqual(1, self.sink.status(tid)["files_total"])

    def test_validation(self):
        self.write("a.img", 10)
        outside = os.path.join(self.tmp, "secret")
        with open(outside, "w") as f:
            f.write("x")
        os.symlink(outside, os.path.join(self.root, "link"))
        bad = [
            ("nowhere", ["a.img"], None, exception.PeerNotFound),
            ("east", "a.img", None, exception.InvalidInput),
            ("east", [], None, exception.InvalidInput),
            ("east", [outside], None, exception.InvalidInput),
            ("east", ["../secret"], None, exception.InvalidInput),
            ("east", ["link"], None, exception.InvalidInput),
            ("east", ["missing"], None, exception.InvalidInput),
            ("east", [{"path": "a.img", "bogus": 1}], None,
             exception.InvalidInput),
            ("east", [{"path": "a.img", "sha512": "zz"}], None,
             exception.InvalidInput),
            ("east", [{"path": "a.img", "name": "../x"}], None,
             exception.InvalidInput),
            ("east", [{"path": "a.img", "size": 11}], None,
             exception.InvalidInput),
            ("east", [{"path": "g", "growing": True}], None,
             exception.InvalidInput),
            ("east", ["a.img", {"path": "a.img"}], None,
             exception.InvalidInput),
            ("east", ["a.img"], {"streams": "4"}, exception.InvalidInput),
            ("east", ["a.img"], {"streams": True}, exception.InvalidInput),
            ("east", ["a.img"], {"streams": 0}, exception.InvalidInput),
            ("east", ["a.img"], {"color": 1}, exception.InvalidInput),
            ("east", ["a.img"], [], exception.InvalidInput),
        ]
        for peer, files, options, exc in bad:
            self.assertRaises(exc, self.out.start, peer, files, options)
        self.assertRaises(exception.InvalidInput, self.out.start, "east",
                          ["a.img"], None, "not-a-uuid")
        self.assertRaises(exception.TransferNotFound, self.out.get,
                          uuid.uuid4().hex)
        self.assertEqual([], os.listdir(os.path.join(self.tmp, "state")))

    def test_per_transfer_options(self):
        self.write("a.img", 200000)
        status = self.out.start("east", ["a.img"],
                                {"object_size": 128 << 10,
                                 "verify_sha512": False})
        status = self.wait(status["transfer_id"])
        self.assertEqual("complete", status["state"])
        self.assertEqual(128 << 10, status["object_size"])

    def test_cancel_and_resume(self):
        self.write("a.img", 4 << 20)
        self.cfg.rate_limit = 2 << 20
        tid = self.out.start("east", ["a.img"])["transfer_id"]
        self.wait(tid, states=("running",))
        while self.out.get(tid).get("bytes_done", 0) == 0:
            time.sleep(0.02)
        status = self.out.cancel(tid)
        self.assertEqual("cancelled", status["state"])
        self.cfg.rate_limit = 0
        self.out.resume(tid)
        status = self.wait(tid)
        self.assertEqual("complete", status["state"], status.get("error"))
        self.assertGreater(status["resumed_bytes"], 0)

    def test_interrupted_transfers_resume_on_start(self):
        self.write("a.img", 4 << 20)
        self.cfg.rate_limit = 2 << 20
        tid = self.out.start("east", ["a.img"])["transfer_id"]
        self.wait(tid, states=("running",))
        self.out.stop()             # the agent stops (SIGTERM)
        self.assertEqual("running", self.out._load_status(tid)["state"])
        self.cfg.rate_limit = 0
        restarted = self.make(os.path.join(self.tmp, "state"))
        self.assertEqual([tid], restarted.resume_interrupted())
        self.out = restarted
        self.assertEqual("complete", self.wait(tid)["state"])

    def test_state_dir_inside_staging_root_is_refused(self):
        self.assertRaises(exception.ConfigError, self.make,
                          os.path.join(self.root, "state"))


class TestManager(testcase.TestCase):
    def assertExpected(self, exc, fn, *args):
        """Endpoint errors reach the RPC layer as expected exceptions."""
        e = self.assertRaises(messaging.ExpectedException, fn, *args)
        self.assertIsInstance(e.exc_info[1], exc)

    def test_incoming_unknown_transfer(self):
        class Sink:
            port = 1

            def status(self, tid=None, with_files=True):
                return None if tid else []

            def watermark(self, tid, name):
                return None

        class Out:
            peers = FakePeers(1)
        m = manager.AgentManager("here", Out(), Sink())
        self.assertEqual([], m.get_incoming({}))
        self.assertExpected(exception.TransferNotFound, m.get_incoming, {},
                            uuid.uuid4().hex)
        self.assertExpected(exception.TransferNotFound, m.get_watermark, {},
                            uuid.uuid4().hex, "x")
        self.assertExpected(exception.InvalidInput, m.get_incoming, {}, "zz")
        self.assertEqual({"host": "here", "peers": ["east"],
                          "listen_port": 1, "pushes": []}, m.ping({}))
