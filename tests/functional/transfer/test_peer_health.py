"""Peer health over the real bus (AgentAPI.peer_health): agents in their
own processes probe their peers with the transfer protocol's
authenticated handshake, and report the throughput of their last
completed transfer.
"""

import datetime
import os
import time

from dtn_migrate import exception
from tests.functional import base

MiB = base.MiB
#: The agent's default [agent] peer_probe_timeout.
PROBE_TIMEOUT = 3.0


class TestPeerHealth(base.FunctionalTestCase):
    def setUp(self):
        super().setUp()
        # "dead" is a peer src knows whose port nothing listens on.
        agents = self.mesh({
            "dst": (["src"], {}),
            "src": (["dst", "dead"],
                    {"extra": {"agent": {"peer_health_cache": "0"}}}),
            "dead": None})
        self.src, self.dst, self.dead = (agents["src"], agents["dst"],
                                         agents["dead"])

    def health(self, peer=None):
        started = time.monotonic()
        out = self.api.peer_health({}, self.src.name, peer=peer)
        return out, time.monotonic() - started

    def test_live_and_dead_peers(self):
        out, took = self.health()
        by_name = {p["name"]: p for p in out}
        self.assertEqual(sorted([self.dst.name, self.dead]),
                         [p["name"] for p in out])
        live, dead = by_name[self.dst.name], by_name[self.dead]
        self.assertTrue(live["reachable"], live)
        self.assertIsNone(live["error"])
        self.assertEqual(("127.0.0.1", self.dst.port),
                         (live["address"], live["port"]))
        self.assertGreater(live["rtt_ms"], 0)
        self.assertLess(live["rtt_ms"], 1000)
        self.assertFalse(dead["reachable"])
        self.assertIsNone(dead["rtt_ms"])
        self.assertIn("cannot connect", dead["error"])
        for p in out:
            datetime.datetime.fromisoformat(p["checked_at"])
            self.assertIsNone(p["last_throughput"])
            self.assertIsNone(p["last_transfer_at"])
        # Probed at once, each within the probe timeout.
        self.assertLess(took, PROBE_TIMEOUT + 10)
        # The probes left no transfer or record at the peer's sink.
        self.assertEqual([], self.api.get_incoming({}, self.dst.name))

    def test_throughput_of_the_last_transfer_and_a_peer_that_stops(self):
        base.make_file(os.path.join(self.src.staging, "img.raw"),
                       64 * MiB, seed=3)
        before = datetime.datetime.utcnow()
        tid = self.start_transfer(self.src, self.dst, ["img.raw"])
        status = self.wait_for(self.src, tid)
        self.assertEqual("complete", status["state"], status.get("error"))
        [live], _ = self.health(self.dst.name)
        self.assertTrue(live["reachable"], live)
        self.assertAlmostEqual(64 * MiB / status["elapsed"],
                               live["last_throughput"],
                               delta=0.01 * live["last_throughput"])
        when = datetime.datetime.fromisoformat(live["last_transfer_at"])
        self.assertLessEqual(before, when)
        self.assertLessEqual(when, datetime.datetime.utcnow())
        # The peer stops: unreachable, and the record stays.
        self.dst.stop()
        [gone], took = self.health(self.dst.name)
        self.assertFalse(gone["reachable"])
        self.assertIn("cannot connect", gone["error"])
        self.assertEqual(live["last_throughput"], gone["last_throughput"])
        self.assertLess(took, PROBE_TIMEOUT + 10)

    def test_unknown_peer(self):
        exc = self.assertRaises(exception.PeerNotFound,
                                self.api.peer_health, {}, self.src.name,
                                peer="north")
        self.assertIn(self.dst.name, str(exc))
