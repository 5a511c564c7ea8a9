"""Helpers shared by the object log unit tests."""

import os

import fixtures

from dtn_migrate.transfer import objectlog
from dtn_migrate.transfer.objectlog import records

from tests.unit import testcase

LogFile = objectlog.LogFile
LOGGERS = ("file", "transaction", "universal")
APPEND_METHODS = ("char", "int", "binary", "varint")
BITMAP_METHODS = ("bit8", "bit64")

# Odd sizes (1 object, exact and inexact multiples of 8 and 64, a region
# spanning three 4 KiB pages) and awkward names.  Seven files make two
# transactions of the default size 4.
FILES = [
    LogFile(10, "a.img", 1),
    LogFile(11, 'dir/b c, "d".img', 37),
    LogFile(12, "\u00fcn\u00ef/c\u00f8d\u00e9 'x' \u2603.qcow2", 5000),
    LogFile(13, "big file,with commas", 70000),
    LogFile(20, "e\\f", 8),
    LogFile(21, "[g]: {h}", 64),
    LogFile(30, "i", 65),
]


def state(log, files=FILES):
    """{file_id: (frozenset of done indices, is_complete)}."""
    return {f.file_id: (frozenset(log.done(f.file_id).present()),
                        log.is_complete(f.file_id))
            for f in files}


def empty_state(files=FILES):
    return {f.file_id: (frozenset(), False) for f in files}


def log_files(directory):
    """Names of the log files (not the index) in ``directory``."""
    return sorted(name for name in os.listdir(directory)
                  if name.endswith(".log"))


def paged_file(log, file_id):
    """The PagedFile holding ``file_id`` (white box, bitmap methods)."""
    slot = log._slots[file_id]
    if log.mechanism == "file":
        return log._units[slot].file
    return log._unit_for(slot).file


def append_file(log, file_id):
    """The AppendFile holding ``file_id`` (white box, append methods)."""
    return paged_file(log, file_id)


class LogTestCase(testcase.TestCase):
    """Opens logs in a temporary directory and closes them afterwards."""

    mechanism = "universal"
    method = "bit64"

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.dir = os.path.join(self.tmp, "log")

    def open(self, files=FILES, mechanism=None, method=None, **kwargs):
        log = objectlog.open_log(self.dir, mechanism or self.mechanism,
                                 method or self.method, files, **kwargs)
        self.addCleanup(log.close)
        return log

    def reopen(self, log, files=FILES, **kwargs):
        log.close()
        return self.open(files, **kwargs)

    def path(self, name):
        return os.path.join(self.dir, name)

    def read_index(self):
        return records.read_index(self.dir)
