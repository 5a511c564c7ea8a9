"""Durable replacement of a small file: old or new content after a
crash at any step, the file and its directory synced.
"""

import os
import shutil
import stat
import tempfile
from unittest import mock

from dtn_migrate.transfer import durable
from tests.unit import testcase


class TestWriteAtomic(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp(prefix="dtnm-durable-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.path = os.path.join(self.dir, "record.json")

    def read(self):
        with open(self.path, "rb") as f:
            return f.read()

    def test_replaces_and_leaves_no_temporary(self):
        durable.write_atomic(self.path, b"old")
        durable.write_atomic(self.path, b"new" * 10000)
        self.assertEqual(b"new" * 10000, self.read())
        self.assertEqual(["record.json"], os.listdir(self.dir))

    def test_mode_and_temporary_name(self):
        tmp = os.path.join(self.dir, "index.tmp")
        durable.write_atomic(self.path, b"x", mode=0o600, tmp=tmp)
        self.assertEqual(0o600, stat.S_IMODE(os.stat(self.path).st_mode))
        self.assertFalse(os.path.exists(tmp))

    def test_file_and_directory_synced(self):
        with mock.patch.object(os, "fsync", wraps=os.fsync) as fsync:
            durable.write_atomic(self.path, b"x")
        self.assertEqual(2, fsync.call_count)

    def test_a_crash_before_the_rename_keeps_the_old_content(self):
        durable.write_atomic(self.path, b"old")
        for step in ("write", "fsync", "rename"):
            with mock.patch.object(os, step, side_effect=OSError(5, step)):
                self.assertRaises(OSError, durable.write_atomic,
                                  self.path, b"new")
            self.assertEqual(b"old", self.read(), step)
