"""The staging backend interface's defaults."""

import os

import fixtures

from dtn_migrate.staging import backend
from dtn_migrate.staging import localfs

from tests.unit import testcase


class Minimal(backend.Backend):
    """Only what a backend must provide."""

    def open_write(self, name, sync=False, truncate=False):
        raise NotImplementedError

    def open_read(self, name):
        raise NotImplementedError

    def size(self, name):
        return None

    def remove(self, name):
        pass

    def rename(self, old, new):
        pass

    def rmdir(self, name):
        pass

    def free_bytes(self):
        return 100


class TestBackend(testcase.TestCase):
    def test_total_bytes_unknown_by_default(self):
        be = Minimal()
        self.assertIsNone(be.total_bytes())
        self.assertEqual(100, be.free_bytes())
        self.assertIsNone(be.read_small("x"))


class TestLocalBackend(testcase.TestCase):
    def test_total_bytes_is_the_file_system_size(self):
        root = self.useFixture(fixtures.TempDir()).path
        be = localfs.LocalBackend(root)
        st = os.statvfs(root)
        self.assertEqual(st.f_blocks * st.f_frsize, be.total_bytes())
        self.assertLessEqual(be.free_bytes(), be.total_bytes())

    def test_rmdir(self):
        root = self.useFixture(fixtures.TempDir()).path
        be = localfs.LocalBackend(root)
        os.makedirs(os.path.join(root, "t", "u"))
        self.assertRaises(backend.NotEmpty, be.rmdir, "t")
        be.rmdir("t/u")
        be.rmdir("t")
        be.rmdir("t")               # missing: not an error
        self.assertEqual([], os.listdir(root))
        self.assertRaises(ValueError, be.rmdir, "../x")
