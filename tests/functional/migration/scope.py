"""Clouds shared by a whole test class.

:class:`ClassScope` stands in for a test case where the two-cloud
harness (:mod:`tests.functional.migration.harness`) asks one for brokers,
agents, Glances, Keystones and cleanups: what it starts outlives each
test, and ``close()`` (in ``tearDownClass``) removes it.
"""

import os
import shutil
import tempfile

import testtools

from tests.functional import base
from tests.functional.devcloud import harness as devcloud_tests
from tests.functional.migration import harness as migration


class ClassScope:
    """What the two-cloud harness asks of a test case, for a class."""

    brokers = migration.MigrationTestCase.brokers
    agent = migration.MigrationTestCase.agent
    clouds = migration.MigrationTestCase.clouds
    glance = devcloud_tests.DevcloudTestCase.glance
    keystone = devcloud_tests.DevcloudTestCase.keystone
    fault_proxy = devcloud_tests.DevcloudTestCase.fault_proxy

    def __init__(self, prefix="dtnm-class-"):
        self.workdir = tempfile.mkdtemp(prefix=prefix, dir=base.data_root())
        self.cleanups = [(shutil.rmtree, (self.workdir, True), {})]
        self.key = os.urandom(32).hex()

    def addCleanup(self, call, *args, **kwargs):
        self.cleanups.append((call, args, kwargs))

    def _started(self, server):
        self.addCleanup(server.close)
        return server.start()

    def addOnException(self, handler):
        pass                # each test attaches the logs itself

    @staticmethod
    def skipTest(reason):
        base.check_skip(reason)
        raise testtools.TestCase.skipException(reason)

    def close(self):
        while self.cleanups:
            call, args, kwargs = self.cleanups.pop()
            try:
                call(*args, **kwargs)
            except Exception:  # noqa: B902 - the other cleanups still run
                pass
