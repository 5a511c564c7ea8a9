"""The engine lock on an SQLite persistence database: a flock that the
operating system drops when its holder dies (MariaDB and PostgreSQL:
tests/functional/migration/test_database.py).
"""

import os
import shutil
import tempfile

from sqlalchemy import exc as sa_exc

from dtn_migrate.engine import lock
from dtn_migrate import exception
from tests.unit import testcase


class SqliteLockCase(testcase.TestCase):
    """An engine lock on an SQLite database of the test's own."""

    def setUp(self):
        super().setUp()
        tmp = tempfile.mkdtemp(prefix="dtnm-lock-")
        self.addCleanup(shutil.rmtree, tmp, True)
        self.db = "sqlite:///%s/engine.sqlite" % tmp

    def engine_lock(self, timeout=0.2):
        held = lock.EngineLock(self.db, timeout)
        self.addCleanup(held.release)
        return held


class TestSqliteLock(SqliteLockCase):
    def test_second_engine_refused(self):
        first = self.engine_lock()
        first.acquire()
        for _ in range(3):
            err = self.assertRaises(exception.PersistenceInUse,
                                    self.engine_lock().acquire)
            self.assertIn("Another dtn-migrate-engine uses the persistence "
                          "database %s" % self.db, str(err))
            self.assertIn("pid %d" % os.getpid(), str(err))
        self.assertFalse(first.check())         # still held
        first.release()
        self.engine_lock().acquire()

    def test_in_memory_needs_no_lock(self):
        for _ in range(2):
            self.assertFalse(lock.EngineLock("sqlite://").check())
            lock.EngineLock("sqlite://").acquire()

    def test_unsupported_database(self):
        self.assertRaises(exception.ConfigError, lock.EngineLock,
                          "oracle://u@h/db")


class FakeServerLock:
    """A server-side lock (MariaDB, PostgreSQL) whose database restarts:
    ``lost`` drops it, ``down`` makes connecting fail, ``other`` is
    another engine taking it.
    """

    def __init__(self):
        self.mine = self.down = self.other = False

    def acquire(self):
        if self.down:
            raise sa_exc.OperationalError("connect", {}, Exception(
                "Connection refused"))
        if self.other:
            return False
        self.mine = True
        return True

    def held(self):
        return self.mine

    def holder(self):
        return "connection 7 from 192.0.2.9"

    def release(self):
        self.mine = False


class TestCheck(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.held = lock.EngineLock("sqlite://", timeout=0.5)
        self.held.impl = self.server = FakeServerLock()
        self.held.database = "mysql+pymysql://root@db/dtnm"

    def test_taken_again_after_restarts(self):
        self.held.acquire()
        for _ in range(3):              # restarts, one after the other
            self.assertFalse(self.held.check())
            self.server.mine = False        # the restart drops it
            self.server.down = True
            self.assertFalse(self.held.check())
            self.assertFalse(self.held.check())
            self.server.down = False
            self.assertTrue(self.held.check())
            self.assertFalse(self.held.check())

    def test_taken_by_another_engine_meanwhile(self):
        self.held.acquire()
        self.server.mine, self.server.other = False, True
        err = self.assertRaises(exception.PersistenceInUse, self.held.check)
        self.assertIn("mysql+pymysql://root@db/dtnm (connection 7 from "
                      "192.0.2.9)", str(err))

    def test_start_waits_for_the_database_then_says_why(self):
        self.server.down = True
        err = self.assertRaises(exception.PersistenceUnavailable,
                                self.held.acquire)
        self.assertIn("Connection refused", str(err))
        self.server.down, self.server.other = False, True
        self.assertRaises(exception.PersistenceInUse, self.held.acquire)
