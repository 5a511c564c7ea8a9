"""Staging has one exception hierarchy, in one module (backend.py)."""

import inspect


from dtn_migrate.staging import backend
from dtn_migrate.staging import copy
from dtn_migrate.staging import copycommon
from dtn_migrate.staging import factory
from dtn_migrate.staging import libnfs
from dtn_migrate.staging import localfs
from dtn_migrate.staging import nfslib
from dtn_migrate.staging import nfsmount
from dtn_migrate.staging import retry
from dtn_migrate.staging import stream
from dtn_migrate.staging import watermark

from tests.unit import testcase

MODULES = (backend, copy, copycommon, factory, libnfs, localfs, nfslib,
           nfsmount, retry, stream, watermark)


def _public_exceptions(module):
    return [obj for name, obj in vars(module).items()
            if inspect.isclass(obj) and issubclass(obj, BaseException)
            and obj.__module__ == module.__name__
            and not name.startswith("_")]


class TestHierarchy(testcase.TestCase):

    def test_every_error_is_defined_in_backend(self):
        for module in MODULES:
            if module is backend:
                continue
            self.assertEqual([], _public_exceptions(module), module)

    def test_every_error_is_a_staging_error(self):
        errors = _public_exceptions(backend)
        self.assertGreater(len(errors), 10)
        for cls in errors:
            self.assertTrue(issubclass(cls, backend.StagingError), cls)

    def test_copy_and_libnfs_errors(self):
        for name in ("CopyCancelled", "CopyStalled", "ChecksumMismatch",
                     "WriterFailed", "LibraryMissing", "ConnectionLost",
                     "WritesLost", "StagingNotFound"):
            self.assertTrue(issubclass(getattr(backend, name),
                                       backend.StagingError), name)
        self.assertTrue(issubclass(backend.WritesLost, backend.Unavailable))
        self.assertTrue(backend.ConnectionLost("x").retryable)
        self.assertIsInstance(backend.error_for_errno(2, "gone"),
                              backend.StagingNotFound)
