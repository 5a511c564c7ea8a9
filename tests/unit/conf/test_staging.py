"""[staging] options: defaults, validation, profile and free-space margin."""

from oslo_config import cfg

from dtn_migrate import conf as global_conf
from dtn_migrate.conf import staging
from dtn_migrate.staging import factory
from dtn_migrate.staging import nfsmount

from tests.unit import testcase

MiB = 1 << 20


def fresh_conf():
    conf = cfg.ConfigOpts()
    staging.register_opts(conf)
    conf([], default_config_files=[])
    return conf


class TestStagingOpts(testcase.TestCase):
    def test_defaults(self):
        s = fresh_conf().staging
        self.assertEqual("path", s.backend)
        self.assertEqual("/mnt/dtn-staging", s.path)
        self.assertIsNone(s.url)
        self.assertEqual("warn", s.mount_check)
        self.assertFalse(s.allow_local)
        self.assertEqual((MiB, MiB), (s.min_rsize, s.min_wsize))
        self.assertTrue(s.require_async)
        self.assertEqual(4 * MiB, s.block_size)
        self.assertEqual(4, s.queue_depth)
        self.assertEqual(64 * MiB, s.commit_interval_bytes)
        self.assertFalse(s.sync_writes)
        self.assertEqual("5%", s.free_space_margin)
        self.assertTrue(s.keep_failed)
        self.assertEqual(".watermark", s.watermark_suffix)

    def test_registered_on_the_global_conf(self):
        self.assertIn("staging", global_conf.CONF)
        self.assertIn("mount_check", global_conf.CONF.staging)

    def test_every_option_has_help(self):
        for opt in staging.staging_opts:
            self.assertTrue(opt.help, opt.name)

    def test_invalid_values_are_rejected(self):
        conf = fresh_conf()
        for name, value in (("backend", "ftp"), ("mount_check", "maybe"),
                            ("block_size", 1024), ("queue_depth", 0),
                            ("min_rsize", -1),
                            ("free_space_margin", "lots"),
                            ("free_space_margin", "5 %%"),
                            ("free_space_margin", "10X"),
                            ("watermark_suffix", "a/b")):
            self.assertRaises(ValueError, conf.set_override, name, value,
                              "staging")

    def test_valid_margins(self):
        conf = fresh_conf()
        for value in ("0", "5%", "2.5 %", "200G", "200GiB", "512m",
                      "1048576", "1TB"):
            conf.set_override("free_space_margin", value, "staging")
            self.assertEqual(value, conf.staging.free_space_margin)

    def test_margin_bytes(self):
        self.assertEqual(50, staging.margin_bytes("5%", 1000))
        self.assertEqual(25, staging.margin_bytes("2.5 %", 1000))
        self.assertEqual(0, staging.margin_bytes("0%", 1000))
        self.assertEqual(200 << 30, staging.margin_bytes("200G", 0))
        self.assertEqual(200 << 30, staging.margin_bytes("200GiB", 10))
        self.assertEqual(512 * MiB, staging.margin_bytes("512m", 0))
        self.assertEqual(1000, staging.margin_bytes("1000", 0))
        self.assertRaises(ValueError, staging.margin_bytes, "101%", 1000)
        self.assertRaises(ValueError, staging.margin_bytes, "x", 1000)
        self.assertRaises(ValueError, staging.margin_bytes, None, 1000)

    def test_profile_from_options(self):
        conf = fresh_conf()
        self.assertEqual(nfsmount.Profile(), factory.profile(conf.staging))
        conf.set_override("min_wsize", 262144, "staging")
        conf.set_override("min_rsize", 0, "staging")
        conf.set_override("require_async", False, "staging")
        p = factory.profile(conf.staging)
        self.assertEqual((0, 262144, False),
                         (p.min_rsize, p.min_wsize, p.require_async))
        self.assertTrue(p.require_hard)
