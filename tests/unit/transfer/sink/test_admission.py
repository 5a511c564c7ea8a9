"""Unauthenticated clients cannot pin the sink's memory or threads
(issue 11, item 2): an absolute handshake deadline, a small pre-auth
body limit, caps on connections still authenticating (in all and per
source address) and on connections in all, while a real transfer goes
on.
"""

import ipaddress
import os
import socket
import threading
import time

import fixtures

from dtn_migrate.transfer import errors
from dtn_migrate.transfer import report
from dtn_migrate.transfer.sink import admission
from dtn_migrate.transfer.source import transfer as source
from dtn_migrate.transfer.wire import protocol as P
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
            name="dtn_migrate.transfer.sink.admission"))
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


class TestSources(testcase.TestCase):
    """Issue 36 item 9: what the pre-auth caps count as one source, the
    peers' addresses first, and what one authenticated peer may hold.
    """

    def admission(self, **kw):
        a = admission.Admission(kw.pop("max_connections", 100),
                                kw.pop("max_unauthenticated", 8),
                                kw.pop("max_per_address", 3), 10.0, **kw)
        self.addCleanup(a.stop)
        return a

    def admit(self, a, address):
        """(ticket or None, reason, the client end of its socket)."""
        ours, theirs = socket.socketpair()
        self.addCleanup(ours.close)
        self.addCleanup(theirs.close)
        ticket, why = a.admit(ours, address)
        if ticket is not None:
            self.addCleanup(ticket.close)
        return ticket, why, theirs

    def test_an_ipv6_64_is_one_source(self):
        a = self.admission()
        held = [self.admit(a, "2001:db8:1:2::%x" % i)[0]
                for i in range(1, 9)]
        self.assertEqual(3, sum(t is not None for t in held))
        _t, why, _s = self.admit(a, "2001:db8:1:2:ffff::1")
        self.assertIn("from 2001:db8:1:2::/64 still authenticating", why)
        # Another /64 still gets in.
        self.assertIsNotNone(self.admit(a, "2001:db8:1:3::1")[0])

    def test_an_ipv4_mapped_address_counts_as_ipv4(self):
        a = self.admission()
        for _ in range(3):
            self.assertIsNotNone(self.admit(a, "192.0.2.7")[0])
        ticket, why, _s = self.admit(a, "::ffff:192.0.2.7")
        self.assertIsNone(ticket)
        self.assertIn("from 192.0.2.7 still", why)
        # IPv4 addresses are counted one by one.
        self.assertIsNotNone(self.admit(a, "192.0.2.8")[0])

    def test_a_peer_address_gets_a_slot_when_all_are_taken(self):
        a = self.admission(preferred=["192.0.2.10", "2001:db8:1:2::10/128"])
        first = self.admit(a, "198.51.100.1")
        for i in range(2, 9):
            self.assertIsNotNone(self.admit(a, "198.51.100.%d" % i)[0])
        self.assertIsNone(self.admit(a, "198.51.100.9")[0])
        ticket, why, _s = self.admit(a, "192.0.2.10")
        self.assertIsNone(why)
        self.assertTrue(ticket.preferred)
        # The oldest connection from elsewhere made room: closed.
        first[2].settimeout(5)
        self.assertEqual(b"", first[2].recv(1))
        self.assertEqual("closed to make room for a peer address",
                         a.authenticated(first[0], "x"))
        counts = a.counts()
        self.assertEqual(1, counts["evicted"])
        self.assertEqual(8, counts["unauthenticated"])
        # A peer's IPv6 address counts as itself, not as its /64.
        for i in range(1, 4):
            self.admit(a, "2001:db8:1:2::%x" % i)
        self.assertIsNotNone(self.admit(a, "2001:db8:1:2::10")[0])
        self.assertIsNotNone(self.admit(a, "::ffff:192.0.2.10")[0])
        # Peer addresses never evict each other.
        for _ in range(8):
            self.admit(a, "192.0.2.10")
        self.assertEqual(8, a.counts()["unauthenticated"])

    def test_a_peer_is_held_to_its_connection_cap(self):
        a = self.admission(max_per_peer=2)
        tickets = [self.admit(a, "192.0.2.%d" % i)[0] for i in range(1, 5)]
        self.assertIsNone(a.authenticated(tickets[0], "east"))
        self.assertIsNone(a.authenticated(tickets[1], "east"))
        why = a.authenticated(tickets[2], "east")
        self.assertEqual("peer east already holds 2 connections, this "
                         "sink's limit per peer", why)
        # Another peer is not affected; a released slot is free again.
        self.assertIsNone(a.authenticated(tickets[3], "west"))
        a.release(tickets[0])
        ticket = self.admit(a, "192.0.2.9")[0]
        self.assertIsNone(a.authenticated(ticket, "east"))
        self.assertEqual({"east": 2, "west": 1}, a.counts()["peers"])

    def test_preferred_networks_are_checked(self):
        self.assertRaises(ValueError, admission.networks, ["dtn-east"])
        self.assertEqual(
            (ipaddress.ip_network("10.0.0.0/8"),),
            admission.networks(["::ffff:10.0.0.0/104"]))


class TestPeerCaps(test_engine.EngineTestCase):
    """The sink refuses what one peer holds beyond its caps."""

    def control(self, server, cfg):
        peer = source.Peer("sink", "127.0.0.1", server.port, KEY)
        conn, ack = source.open_connection(peer, P.Connect(
            P.VERSION, P.VERSION, P.Role.CONTROL, 0, 0, os.urandom(16), 0,
            cfg.object_size, 1, os.urandom(32), "source"), cfg)
        self.addCleanup(conn.close)
        return conn

    def test_connections_over_the_peer_cap_are_refused(self):
        cfg = self.cfg(max_connections_per_peer=2)
        server = self.start_sink(cfg)
        self.control(server, cfg)
        self.control(server, cfg)
        exc = self.assertRaises(errors.PeerError, self.control, server, cfg)
        # LIMIT: a source tries again later.
        self.assertEqual(errors.Code.LIMIT, exc.code)
        self.assertIn("peer source already holds 2 connections, this sink's "
                      "limit per peer", str(exc))

    def test_open_files_over_the_peer_cap_are_refused(self):
        cfg = self.cfg(max_open_files_per_peer=3)
        server = self.start_sink(cfg)
        first, second = self.control(server, cfg), self.control(server, cfg)

        def new_file(conn, file_id):
            conn.send(P.NewFile(file_id, P.FileFlags.NO_SHA512, 1 << 20, 0,
                                0o644, cfg.object_size, bytes(64),
                                "f%d-%s.img" % (file_id, os.urandom(4).hex())))
            return conn.recv(expect=(P.MsgType.FILE_ID,))
        for i in range(2):
            self.assertEqual(P.FileStatus.OPEN, new_file(first, i).status)
        self.assertEqual(P.FileStatus.OPEN, new_file(second, 0).status)
        refused = new_file(second, 1)
        self.assertEqual(P.FileStatus.REFUSED, refused.status)
        self.assertEqual(errors.Code.LIMIT, refused.code)
        self.assertIn("peer source already holds 3 open files, the sink's "
                      "limit per peer", refused.message)
