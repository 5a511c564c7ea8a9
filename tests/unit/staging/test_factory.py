"""Tests of dtn_migrate.staging.factory."""

import types

import fixtures

from dtn_migrate.staging import backend
from dtn_migrate.staging import factory
from dtn_migrate.staging import libnfs
from dtn_migrate.staging import localfs

from tests.unit import testcase

MiB = 1 << 20

NFS_LINE = ("40 1 0:50 / {mp} rw,relatime shared:1 - nfs4 dtn:/export "
            "rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,hard,"
            "proto=tcp,timeo=600,retrans=2,sec=sys\n")
SMALL_LINE = NFS_LINE.replace("rsize=1048576", "rsize=65536")


def settings(**kw):
    values = dict(backend="path", path="/nonexistent", url=None,
                  mount_check="warn", allow_local=False, min_rsize=MiB,
                  min_wsize=MiB, require_async=True, block_size=MiB,
                  queue_depth=8, writers=2, readers=2,
                  commit_interval_bytes=64 * MiB, sync_writes=False,
                  watermark_suffix=".watermark", skip_zeros=True,
                  hash_checkpoint_bytes=256 * MiB, direct_io="auto")
    values.update(kw)
    return types.SimpleNamespace(**values)


class TestOpenBackend(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.mountinfo = self.dir + "/mountinfo"

    def write_mountinfo(self, line):
        with open(self.mountinfo, "w") as f:
            f.write("1 0 8:1 / / rw - ext4 /dev/vda rw\n")
            if line:
                f.write(line.format(mp=self.dir))

    def test_nfs_path(self):
        self.write_mountinfo(NFS_LINE)
        be = factory.open_backend(settings(path=self.dir), self.mountinfo)
        self.assertIsInstance(be, localfs.LocalBackend)

    def test_local_path_refused_unless_allowed(self):
        self.write_mountinfo(None)
        exc = self.assertRaises(backend.BadMount, factory.open_backend,
                                settings(path=self.dir), self.mountinfo)
        self.assertIn("ext4", str(exc))
        be = factory.open_backend(settings(path=self.dir, allow_local=True),
                                  self.mountinfo)
        self.assertEqual(self.dir, be.root)

    def test_direct_io_auto_off_nfs_only(self):
        self.write_mountinfo(NFS_LINE)
        be = factory.open_backend(settings(path=self.dir), self.mountinfo)
        self.assertFalse(be.direct_io)
        be = factory.open_backend(settings(path=self.dir, direct_io="on"),
                                  self.mountinfo)
        self.assertTrue(be.direct_io)
        self.write_mountinfo(None)
        be = factory.open_backend(settings(path=self.dir, allow_local=True),
                                  self.mountinfo)
        self.assertTrue(be.direct_io)
        be = factory.open_backend(settings(path=self.dir, allow_local=True,
                                           direct_io="off"), self.mountinfo)
        self.assertFalse(be.direct_io)

    def test_profile_refused_or_warned(self):
        self.write_mountinfo(SMALL_LINE)
        exc = self.assertRaises(
            backend.BadMount, factory.open_backend,
            settings(path=self.dir, mount_check="refuse"), self.mountinfo)
        self.assertIn("rsize", str(exc))
        self.assertIsNotNone(factory.open_backend(
            settings(path=self.dir, mount_check="warn"), self.mountinfo))

    def test_libnfs_needs_url(self):
        exc = self.assertRaises(ValueError, factory.open_backend,
                                settings(backend="libnfs"))
        self.assertIn("url", str(exc))

    def test_libnfs(self):
        calls = []
        self.useFixture(fixtures.MonkeyPatch(
            "dtn_migrate.staging.libnfs.LibnfsBackend",
            lambda url: calls.append(url) or "be"))
        self.assertEqual("be", factory.open_backend(
            settings(backend="libnfs", url="nfs://dtn/export")))
        self.assertEqual(["nfs://dtn/export"], calls)
        self.assertTrue(hasattr(libnfs, "LibnfsBackend"))

    def test_unknown_backend(self):
        self.assertRaises(ValueError, factory.open_backend,
                          settings(backend="s3"))


class TestCopyOptions(testcase.TestCase):

    def test_mapping(self):
        opts = factory.copy_options(settings(
            block_size=4 * MiB, writers=3, sync_writes=True,
            commit_interval_bytes=8 * MiB, watermark_suffix=".wm"), 123)
        self.assertEqual((4 * MiB, 3, True, 8 * MiB, ".wm", 123),
                         (opts.block_size, opts.writers, opts.sync,
                          opts.commit_interval, opts.watermark_suffix,
                          opts.free_margin))

    def test_zeros_and_hash_checkpoint(self):
        opts = factory.copy_options(settings(
            skip_zeros=False, hash_checkpoint_bytes=0), 0)
        self.assertEqual((False, 0), (opts.skip_zeros, opts.hash_checkpoint))
