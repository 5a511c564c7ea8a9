"""Option groups: listing for the sample config, peers, engine config."""

import os
import tempfile

from oslo_config import cfg

from dtn_migrate import conf as dtn_conf
from dtn_migrate.conf import agent
from dtn_migrate.conf import opts
from dtn_migrate.conf import peer
from dtn_migrate.conf import transfer
from dtn_migrate.transfer import config as engine

from tests.unit import testcase


def fresh_conf():
    conf = cfg.ConfigOpts()
    agent.register_opts(conf)
    transfer.register_opts(conf)
    return conf


class TestOpts(testcase.TestCase):
    def test_every_group_is_listed_once_with_help(self):
        groups = {}
        for group, group_opts in opts.list_opts():
            name = group if isinstance(group, str) else group.name
            self.assertNotIn(name, groups)
            groups[name] = group_opts
            for opt in group_opts:
                self.assertTrue(opt.help, "%s.%s has no help" % (name,
                                                                 opt.name))
        self.assertEqual({"DEFAULT", "agent", "transfer", "tls", "rdma",
                          "staging", "engine", "task_flow", "coordination",
                          "protection",
                          "database", "api", "glance",
                          peer.SAMPLE_GROUP},
                         set(groups))

    def test_transfer_opts_cover_the_engine_config(self):
        names = {o.dest for o in transfer.transfer_opts}
        fields = set(engine.TransferConfig.__dataclass_fields__)
        # Every option maps to an engine field (engine_config relies on it).
        self.assertEqual(set(), names - fields)
        self.assertLessEqual({"object_size", "streams", "logger",
                              "log_method", "verify_sha512", "transport"},
                             names)

    def test_engine_config_from_options(self):
        conf = fresh_conf()
        conf([], default_config_files=[])
        conf.set_override("streams", 8, "transfer")
        conf.set_override("logger", "file", "transfer")
        cfg_ = transfer.engine_config(conf)
        self.assertEqual(8, cfg_.streams)
        self.assertEqual("file", cfg_.logger)
        self.assertEqual(engine.TransferConfig().object_size,
                         cfg_.object_size)

    def test_invalid_choice_is_rejected(self):
        conf = fresh_conf()
        conf([], default_config_files=[])
        self.assertRaises(ValueError, conf.set_override, "logger", "bogus",
                          "transfer")

    def test_peer_sections_registered_from_the_list(self):
        conf = fresh_conf()
        conf([], default_config_files=[])
        conf.set_override("peers", ["east", "west"], "agent")
        peer.register_opts(conf)
        self.assertEqual(47100, conf["peer:east"].port)
        self.assertIsNone(conf["peer:west"].address)
        self.assertRaises(cfg.NoSuchOptError, lambda: conf["peer:north"])

    def test_register_opts_registers_every_group(self):
        conf = cfg.ConfigOpts()
        dtn_conf.register_opts(conf)
        with tempfile.NamedTemporaryFile("w", suffix=".conf",
                                         delete=False) as f:
            f.write("[agent]\npeers = east\n[peer:east]\nport = 1234\n")
        self.addCleanup(os.unlink, f.name)
        conf([], default_config_files=[f.name])
        for group, group_opts in opts.list_opts():
            name = group if isinstance(group, str) else group.name
            if name == peer.SAMPLE_GROUP:
                continue
            names = {o.dest for o in group_opts}
            if name == "DEFAULT":
                self.assertLessEqual(names, set(conf))
            else:
                # [glance] lists the auth plugin's options too.
                self.assertTrue(set(conf[name]))
                self.assertLessEqual(set(conf[name]), names)
        self.assertEqual(["east"], conf.agent.peers)
        # The peers' groups come once [agent] peers is read.
        self.assertRaises(cfg.NoSuchOptError, lambda: conf["peer:east"])
        peer.register_opts(conf)
        self.assertEqual(1234, conf["peer:east"].port)
