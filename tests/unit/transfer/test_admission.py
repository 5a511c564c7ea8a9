"""Unauthenticated clients cannot pin the sink's memory or threads
(issue 11, item 2): an absolute handshake deadline, a small pre-auth
body limit, caps on connections still authenticating (in all and per
source address) and on connections in all, while a real transfer goes
on.
"""

import os
import threading
import time

import fixtures

from dtn_migrate.transfer import admission
from dtn_migrate.transfer import protocol as P
from dtn_migrate.transfer import report
from dtn_migrate.transfer import source
from tests import trickle
from tests.unit.transfer import test_engine
from tests.unit import testcase

KEY = test_engine.KEY
MiB = 1 << 20
DEADLINE = 1.0
# The watchdog looks every 0.2 s; scheduling on a loaded machine.
SLACK = 1.5


def sink_threads():
    return [t for t in threading.enumerate() if t.name == "sink-conn"]


class TestPreAuthLimits(test_engine.EngineTestCase):

    def setUp(self):
        super().setUp()
        self.sink = self.start_sink(self.cfg(
            handshake_timeout=DEADLINE, max_unauthenticated=8,
            max_unauthenticated_per_address=3, max_connections=24))
        self.port = self.sink.port

    def swarm(self, addresses, per_address, **kw):
        swarm = trickle.Swarm(self.port, addresses, per_address, **kw)
        self.addCleanup(swarm.close)
        return swarm

    def assertDeadlineKept(self, swarm):
        """Every trickler is closed by the deadline, however it sends."""
        held = swarm.wait_all_closed(DEADLINE + SLACK + 2)
        self.assertEqual([], held, "tricklers still held")
        lifetimes = swarm.lifetimes()
        self.assertLess(lifetimes[-1], DEADLINE + SLACK, lifetimes)

    def test_trickling_clients_do_not_stop_a_transfer(self):
        test_engine.write_file(os.path.join(self.src, "a.img"), 8 * MiB, 3)
        t = self.transfer(self.port, ["a.img"],
                          self.cfg(rate_limit=4 * MiB))
        result = {}
        runner = threading.Thread(target=lambda: result.update(t.run()))
        runner.start()
        time.sleep(0.3)
        addresses = ["127.0.0.%d" % i for i in range(2, 4)]
        for _round in range(2):
            # Two addresses, ten each: three of each are held, the rest
            # closed as soon as they are accepted.
            swarm = self.swarm(addresses, 10, interval=0.1)
            time.sleep(0.5)
            for a in addresses:
                self.assertLessEqual(len(swarm.held_from(a)), 3)
            self.assertLessEqual(len(sink_threads()), 8 + 1 + 4)
            # Another host still gets in, and is answered, meanwhile.
            peer = source.Peer("sink", "127.0.0.1", self.port, KEY)
            self.assertIsNone(report.query_report(
                peer, os.urandom(16), "source", self.cfg()))
            self.assertDeadlineKept(swarm)
        runner.join(60)
        self.assertEqual("complete", result.get("state"), t.status())
        self.assertEqual(1, t.status()["attempts"])
        self.assertSameFile("a.img")

    def test_global_cap(self):
        """Six addresses, three each: at most eight held in all."""
        addresses = ["127.0.1.%d" % i for i in range(1, 7)]
        for _round in range(3):
            swarm = self.swarm(addresses, 3, interval=0.1)
            time.sleep(0.5)
            self.assertLessEqual(len(swarm.held()), 8)
            self.assertGreaterEqual(len(swarm.held()), 6)
            self.assertDeadlineKept(swarm)
            # Every handler has released its connection.
            end = time.monotonic() + 5
            while self.sink.admission.counts()["connections"] and \
                    time.monotonic() < end:
                time.sleep(0.05)
            counts = self.sink.admission.counts()
            self.assertEqual(0, counts["connections"], counts)
            self.assertEqual(0, counts["unauthenticated"], counts)

    def test_huge_connect_body_refused_before_allocation(self):
        """CONNECT headers that claim 8 MiB bodies, as many at once as
        the caps admit (a ninth would be closed unanswered at accept):
        each is refused at once with an ERROR, whatever follows.
        """
        frame = trickle.connect_frame(header_length=P.MAX_BODY)
        swarm = self.swarm(["127.0.2.%d" % i for i in range(1, 5)], 2,
                           interval=0.1, data=frame, burst=len(frame))
        self.assertEqual([], swarm.wait_all_closed(DEADLINE))
        for t in swarm.tricklers:
            self.assertLess(t.closed_after, DEADLINE, t.closed_after)
            self.assertIn(b"CONNECT body of %d bytes" % P.MAX_BODY,
                          t.received)
            self.assertIn(b"exceeds %d" % P.MAX_PREAUTH_BODY, t.received)


class TestAcceptTrouble(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.now = 100.0
        self.log = self.useFixture(fixtures.FakeLogger(
            name="dtn_migrate.transfer.admission"))
        self.trouble = admission.AcceptTrouble(
            "s", clock=lambda: self.now)

    def test_the_wait_doubles_up_to_its_longest(self):
        waits = [self.trouble.failed("EMFILE") for _ in range(8)]
        self.assertEqual([0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0], waits)

    def test_a_run_is_logged_once_a_minute_then_its_end(self):
        self.trouble.failed("EMFILE")
        for _ in range(100):
            self.now += 0.5
            self.trouble.failed("EMFILE")
        # 50 s of failures: only the first one said so.
        self.assertEqual(["sink s: cannot accept connections: EMFILE; "
                          "trying again"], self.log.output.splitlines())
        self.now += 10
        self.trouble.failed("EMFILE")
        lines = self.log.output.splitlines()
        self.assertEqual(["sink s: cannot accept connections: EMFILE; "
                          "trying again",
                          "sink s: still cannot accept connections: EMFILE "
                          "(102 failures in 60 s)"], lines)
        self.trouble.mended()
        self.assertIn("accepting connections again after 102 failures in "
                      "60.0 s", self.log.output)

    def test_a_new_run_starts_afresh(self):
        self.trouble.failed("EMFILE")
        self.trouble.failed("EMFILE")
        self.trouble.mended()
        self.assertEqual(0.05, self.trouble.failed("ENOBUFS"))
        self.assertEqual(2, self.log.output.count("cannot accept "
                                                  "connections: "))

    def test_mended_without_a_run_says_nothing(self):
        self.trouble.mended()
        self.assertEqual("", self.log.output)
