import os
import tempfile

from oslo_config import cfg
import testtools

from dtn_migrate.agent import peers
from dtn_migrate.conf import agent as agent_conf
from dtn_migrate.conf import peer as peer_conf
from dtn_migrate.conf import tls as tls_conf
from dtn_migrate import exception


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


class TestPeerRegistry(testtools.TestCase):
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
