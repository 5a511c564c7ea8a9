import datetime
import os
import shutil
import socket
import tempfile
import time

import fixtures
from oslo_config import cfg

from dtn_migrate.agent import peers
from dtn_migrate.conf import agent as agent_conf
from dtn_migrate.conf import peer as peer_conf
from dtn_migrate.conf import tls as tls_conf
from dtn_migrate import exception
from dtn_migrate.transfer import config as transfer_config
from dtn_migrate.transfer.sink import server as sink

from tests.unit import testcase


def make_conf(sections):
    conf = cfg.ConfigOpts()
    agent_conf.register_opts(conf)
    tls_conf.register_opts(conf)
    conf([], default_config_files=[])
    conf.set_override("peers", list(sections), "agent")
    peer_conf.register_opts(conf)
    for name, values in sections.items():
        for k, v in values.items():
            conf.set_override(k, v, "peer:%s" % name)
    return conf


class TestPeerRegistry(testcase.TestCase):
    def test_keys_addresses_and_policies(self):
        key_file = tempfile.NamedTemporaryFile("w", delete=False)
        self.addCleanup(os.unlink, key_file.name)
        key_file.write("ab" * 32)
        key_file.close()
        reg = peers.PeerRegistry(make_conf({
            "east": {"address": "192.0.2.2", "key": "x" * 20},
            "west": {"address": "192.0.2.3", "port": 9000,
                     "key_file": key_file.name, "require_tls": True}}))
        self.assertEqual(["east", "west"], reg.names)
        self.assertEqual(b"x" * 20, reg.key("east"))
        self.assertEqual(bytes.fromhex("ab" * 32), reg.key("west"))
        self.assertIsNone(reg.key("north"))
        self.assertTrue(reg.require_tls("west"))
        self.assertFalse(reg.require_tls("east"))
        p = reg.source_peer("west")
        self.assertEqual(("192.0.2.3", 9000), (p.host, p.port))
        self.assertIsNone(p.tls_context)

    def test_unknown_peer(self):
        reg = peers.PeerRegistry(make_conf({"east": {"key": "k" * 16,
                                                     "address": "h"}}))
        exc = self.assertRaises(exception.PeerNotFound, reg.source_peer,
                                "west")
        self.assertIn("east", str(exc))

    def test_missing_or_short_key_is_a_config_error(self):
        self.assertRaises(exception.ConfigError, peers.PeerRegistry,
                          make_conf({"east": {"address": "h"}}))
        exc = self.assertRaises(exception.ConfigError, peers.PeerRegistry,
                                make_conf({"east": {"key": "short"}}))
        self.assertIn("at least 16", str(exc))

    def test_tls_peer_needs_a_ca(self):
        self.assertRaises(exception.ConfigError, peers.PeerRegistry,
                          make_conf({"east": {"key": "k" * 16,
                                              "tls": True}}))

    def test_source_addresses(self):
        reg = peers.PeerRegistry(make_conf({
            "east": {"key": "k" * 16,
                     "source_addresses": ["192.0.2.1", "2001:db8::/64"]},
            "west": {"key": "w" * 16}}))
        self.assertEqual(["192.0.2.1", "2001:db8::/64"],
                         reg.source_addresses())
        exc = self.assertRaises(exception.ConfigError, peers.PeerRegistry,
                                make_conf({"east": {
                                    "key": "k" * 16,
                                    "source_addresses": ["dtn-east"]}}))
        self.assertIn("[peer:east] source_addresses: 'dtn-east' is not",
                      str(exc))


class TestKeyFiles(testcase.TestCase):
    """Issue 36 item 13: a key file others can read is warned of."""

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.log = self.useFixture(fixtures.FakeLogger(
            name="dtn_migrate.agent.peers"))

    def key_file(self, name, mode):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write("k" * 32)
        os.chmod(path, mode)
        return path

    def test_readable_key_files_are_warned_of(self):
        east = self.key_file("east.key", 0o644)
        west = self.key_file("west.key", 0o600)
        tls_key = self.key_file("tls.key", 0o640)
        conf = make_conf({"east": {"key_file": east},
                          "west": {"key_file": west}})
        conf.set_override("key_file", tls_key, "tls")
        warnings = peers.check_key_files(conf)
        self.assertEqual(2, len(warnings), warnings)
        self.assertIn("[peer:east] key_file %s is readable by group or "
                      "others (mode 0644)" % east, self.log.output)
        self.assertIn("chmod 600 %s" % east, self.log.output)
        self.assertIn("[tls] key_file %s is readable by group or others "
                      "(mode 0640)" % tls_key, self.log.output)
        self.assertNotIn(west, self.log.output)

    def test_private_or_inline_keys_are_not(self):
        east = self.key_file("east.key", 0o400)
        conf = make_conf({"east": {"key_file": east},
                          "west": {"key": "w" * 16}})
        self.assertEqual([], peers.check_key_files(conf))
        self.assertEqual("", self.log.output)


class HealthTestCase(testcase.TestCase):
    """A real sink ("east", reached over loopback) and a registry that
    knows it, a peer whose port nothing listens on ("gone"), and one
    with a wrong key ("liar").
    """

    KEY = "k" * 32

    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="dtnm-health-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.logger = self.useFixture(fixtures.FakeLogger(level=10))
        self.cfg = transfer_config.TransferConfig(
            object_size=64 << 10, min_free_bytes=0, connect_timeout=2.0)
        self.asked = []

        def key_of(peer):
            self.asked.append(peer)
            return self.KEY.encode() if peer == "here" else None

        self.sink = sink.SinkServer(os.path.join(self.tmp, "staging"),
                                    self.cfg, "east", key_of,
                                    host="127.0.0.1").start()
        self.addCleanup(self.sink.stop)
        self.registry = peers.PeerRegistry(make_conf({
            "east": {"address": "127.0.0.1", "port": self.sink.port,
                     "key": self.KEY},
            "liar": {"address": "127.0.0.1", "port": self.sink.port,
                     "key": "w" * 32},
            "gone": {"address": "127.0.0.1", "port": closed_port(),
                     "key": self.KEY},
            "mute": {"key": self.KEY}}))
        self.last = {}

    def health(self, **kw):
        kw.setdefault("timeout", 2.0)
        h = peers.PeerHealth(self.registry, "here", self.cfg,
                             last_transfer=self.last.get, **kw)
        self.addCleanup(h.close)
        return h


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TestPeerHealth(HealthTestCase):
    def test_a_live_peer_is_reachable_after_an_authenticated_handshake(
            self):
        self.last["east"] = (1795000000.5, 123456.7)
        [east] = self.health().check("east")
        self.assertTrue(east["reachable"], east)
        self.assertIsNone(east["error"])
        self.assertEqual(("east", "127.0.0.1", self.sink.port),
                         (east["name"], east["address"], east["port"]))
        self.assertIsInstance(east["rtt_ms"], float)
        self.assertGreater(east["rtt_ms"], 0)
        self.assertLess(east["rtt_ms"], 2000)
        self.assertEqual(123456.7, east["last_throughput"])
        self.assertEqual("2026-11-18T11:06:40.500000",
                         east["last_transfer_at"])
        checked = datetime.datetime.fromisoformat(east["checked_at"])
        self.assertLess(abs(datetime.datetime.utcnow() - checked),
                        datetime.timedelta(minutes=1))
        # The sink authenticated this agent by its name, and holds no
        # session or record of the probe.
        self.assertEqual(["here"], self.asked)
        self.assertEqual([], self.sink.status())

    def test_a_dead_port_is_unreachable_and_says_why(self):
        [gone] = self.health().check("gone")
        self.assertFalse(gone["reachable"])
        self.assertIsNone(gone["rtt_ms"])
        self.assertIn("cannot connect", gone["error"])
        self.assertIsNone(gone["last_throughput"])
        self.assertIsNone(gone["last_transfer_at"])

    def test_a_wrong_key_is_an_authentication_failure(self):
        [liar] = self.health().check("liar")
        self.assertFalse(liar["reachable"])
        self.assertIn("authentication failed", liar["error"])

    def test_a_peer_without_address(self):
        [mute] = self.health().check("mute")
        self.assertFalse(mute["reachable"])
        self.assertIn("no address", mute["error"])
        self.assertIsNone(mute["address"])

    def test_a_silent_peer_times_out_quickly(self):
        # Accepts connections (the kernel's backlog) and never answers.
        with socket.socket() as silent:
            silent.bind(("127.0.0.1", 0))
            silent.listen(8)
            conf = make_conf({"quiet": {"address": "127.0.0.1",
                                        "port": silent.getsockname()[1],
                                        "key": self.KEY}})
            self.registry = peers.PeerRegistry(conf)
            started = time.monotonic()
            [quiet] = self.health(timeout=0.5).check()
            took = time.monotonic() - started
        self.assertFalse(quiet["reachable"])
        self.assertIn("timed out", quiet["error"])
        self.assertLess(took, 0.5 + 10)

    def test_all_peers_are_probed_at_once(self):
        started = time.monotonic()
        out = self.health().check()
        self.assertLess(time.monotonic() - started, 10)
        self.assertEqual(["east", "gone", "liar", "mute"],
                         [p["name"] for p in out])
        self.assertEqual([True, False, False, False],
                         [p["reachable"] for p in out])

    def test_results_are_reused_within_the_ttl(self):
        health = self.health(ttl=60)
        first = health.check("east")
        self.sink.stop()
        self.assertEqual(first, health.check("east"))
        self.assertEqual(1, self.asked.count("here"))
        fresh = self.health(ttl=0)
        [east] = fresh.check("east")
        self.assertFalse(east["reachable"])

    def test_unknown_and_bad_names(self):
        health = self.health()
        exc = self.assertRaises(exception.PeerNotFound, health.check,
                                "north")
        self.assertIn("east, gone, liar, mute", str(exc))
        for bad in ("", 7, ["east"]):
            self.assertRaises(exception.InvalidInput, health.check, bad)


class TestKernelRtt(testcase.TestCase):
    def test_a_connected_socket_has_one(self):
        with socket.socket() as server:
            server.bind(("127.0.0.1", 0))
            server.listen(1)
            with socket.create_connection(server.getsockname()) as c:
                rtt = peers.kernel_rtt_ms(c)
        if rtt is not None:         # Linux
            self.assertGreater(rtt, 0)
            self.assertLess(rtt, 1000)

    def test_not_a_tcp_socket(self):
        self.assertIsNone(peers.kernel_rtt_ms(object()))
        with socket.socket(socket.AF_UNIX) as s:
            self.assertIsNone(peers.kernel_rtt_ms(s))
