"""One engine per persistence database.

Two engines on one database would run the same migrations twice: until
they cooperate, an engine holds a lock on its database, and a second one
refuses to start.  The lock is one that the database or the operating
system drops when its holder dies, so that an engine killed with -9 can
be restarted at once on the same database:

* SQLite: ``flock`` on ``<database file>.lock``, next to the database;
* MariaDB/MySQL: ``GET_LOCK`` (named after the database) held by a
  dedicated connection;
* PostgreSQL: a session advisory lock held by a dedicated connection.

A restart of the database server ends the dedicated connection, and with
it the lock: :meth:`EngineLock.check` (a timer of the engine service)
takes it again on a new connection when the server is back, and says so
(the service then reconciles its migrations).  If another engine took it
meanwhile, ``check`` raises PersistenceInUse and the engine stops.
"""

import fcntl
import os
import socket
import zlib

from oslo_log import log as logging
import sqlalchemy as sa
from sqlalchemy import pool as sa_pool
import tenacity

from dtn_migrate.engine import persistence
from dtn_migrate import exception

LOG = logging.getLogger(__name__)

#: The advisory lock's name (MariaDB: with the database's name).
NAME = "dtn_migrate_engine"
#: PostgreSQL advisory lock key: (classid, objid) of pg_locks.
PG_KEY = (zlib.crc32(NAME.encode()) & 0x7fffffff, 1)


def _owner():
    return "dtn-migrate-engine on %s, pid %d" % (socket.gethostname(),
                                                 os.getpid())


class FileLock:
    """flock on ``<path>.lock`` (next to an SQLite database, or to any
    file or directory one process at a time may use), naming its holder
    (``owner``, by default this engine) in the file.
    """

    def __init__(self, path, owner=None):
        self.path = path + ".lock"
        self.owner = owner
        self.file = None

    def acquire(self):
        f = open(self.path, "a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            return False
        f.truncate(0)
        f.write((self.owner or _owner()) + "\n")
        f.flush()
        self.file = f
        return True

    def held(self):
        return self.file is not None

    def holder(self):
        try:
            with open(self.path) as f:
                return f.read().strip() or "unknown holder"
        except OSError:
            return "unknown holder"

    def release(self):
        if self.file is not None:
            self.file.close()       # drops the flock
            self.file = None


class _SqlLock:
    """A lock held by a dedicated connection to the database server."""

    try_sql = held_sql = holder_sql = None

    def __init__(self, url):
        self.url = sa.engine.make_url(url)
        self.engine = sa.create_engine(self.url, poolclass=sa_pool.NullPool,
                                       connect_args=self.connect_args())
        self.conn = None

    def connect_args(self):
        return {}

    def params(self):
        return {}

    def _scalar(self, conn, sql):
        return conn.execute(sa.text(sql), self.params()).scalar()

    def acquire(self):
        conn = self.engine.connect()
        try:
            got = self._scalar(conn, self.try_sql)
            conn.commit()
        except BaseException:
            conn.close()
            raise
        if not got:
            conn.close()
            return False
        self.conn = conn
        return True

    def held(self):
        if self.conn is None:
            return False
        try:
            held = self._scalar(self.conn, self.held_sql)
            self.conn.commit()
        except sa.exc.SQLAlchemyError as exc:
            LOG.warning("persistence database: the engine lock's "
                        "connection failed: %s", exc)
            self.conn.invalidate()      # nothing to roll back on it
            held = False
        if not held:
            self.release()
        return bool(held)

    def holder(self):
        try:
            with self.engine.connect() as conn:
                return str(self._scalar(conn, self.holder_sql))
        except sa.exc.SQLAlchemyError as exc:
            return "holder unknown: %s" % exc

    def release(self):
        if self.conn is not None:
            try:
                self.conn.close()   # the server drops the lock
            except sa.exc.SQLAlchemyError:
                pass
            self.conn = None


class _MySQLLock(_SqlLock):
    try_sql = "SELECT GET_LOCK(:name, 0)"
    held_sql = "SELECT IS_USED_LOCK(:name) = CONNECTION_ID()"
    holder_sql = ("SELECT CONCAT('connection ', p.ID, ' from ', p.HOST) "
                  "FROM information_schema.PROCESSLIST p "
                  "WHERE p.ID = IS_USED_LOCK(:name)")

    def params(self):
        # Lock names are global to the server: one per database.
        return {"name": ("%s.%s" % (NAME, self.url.database))[:64]}


class _PostgreSQLLock(_SqlLock):
    try_sql = "SELECT pg_try_advisory_lock(:classid, :objid)"
    held_sql = ("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                "AND granted AND pid = pg_backend_pid() "
                "AND classid = :classid AND objid = :objid")
    holder_sql = ("SELECT 'backend ' || a.pid || ' from ' || "
                  "coalesce(host(a.client_addr), 'local socket') || ', ' "
                  "|| a.application_name FROM pg_locks l "
                  "JOIN pg_stat_activity a ON a.pid = l.pid "
                  "WHERE l.locktype = 'advisory' AND l.granted "
                  "AND l.classid = :classid AND l.objid = :objid")

    def connect_args(self):
        return {"application_name": _owner()[:63]}

    def params(self):
        return {"classid": PG_KEY[0], "objid": PG_KEY[1]}


def _impl(connection):
    path = persistence.sqlite_path(connection)
    if path is not None:
        return FileLock(path)
    if connection.startswith("sqlite"):
        return None                 # in memory: this process's own
    backend = sa.engine.make_url(connection).get_backend_name()
    if backend == "mysql":
        return _MySQLLock(connection)
    if backend == "postgresql":
        return _PostgreSQLLock(connection)
    raise exception.ConfigError(reason="[database] connection: "
                                "%s databases are not supported" % backend)


class EngineLock:
    """The engine's lock on its persistence database ``connection``."""

    def __init__(self, connection, timeout=10.0):
        self.impl = _impl(connection)
        self.timeout = timeout
        if connection.startswith("sqlite"):
            self.database = connection
        else:
            self.database = sa.engine.make_url(connection).render_as_string(
                hide_password=True)

    def _try(self):
        """True: taken; False: another engine holds it.  Database errors
        are raised.
        """
        try:
            return self.impl.acquire()
        except persistence.DATABASE_ERRORS as exc:
            raise exception.PersistenceUnavailable(reason=str(exc))

    def acquire(self):
        """Take the lock, waiting up to ``timeout`` seconds for a dead
        holder's lock to be dropped (or the database to answer).
        """
        if self.impl is None:
            return

        take = tenacity.retry(
            retry=(tenacity.retry_if_result(lambda got: not got) |
                   tenacity.retry_if_exception_type(
                       exception.PersistenceUnavailable)),
            stop=tenacity.stop_after_delay(self.timeout),
            wait=tenacity.wait_fixed(0.5),
            # The last answer: False, or the database's error raised.
            retry_error_callback=lambda state: state.outcome.result(),
        )(self._try)
        if not take():
            raise exception.PersistenceInUse(database=self.database,
                                             holder=self.impl.holder())
        LOG.info("holding the engine lock of the persistence database %s",
                 self.database)

    def check(self):
        """True when the lock had been lost (the database restarted) and
        is taken again; False when it is held, or the database is still
        away.  Raises PersistenceInUse when another engine took it.
        """
        if self.impl is None or self.impl.held():
            return False
        try:
            got = self._try()
        except exception.PersistenceUnavailable as exc:
            LOG.warning("%s", exc)
            return False
        if not got:
            raise exception.PersistenceInUse(database=self.database,
                                             holder=self.impl.holder())
        LOG.warning("the engine lock of the persistence database %s is "
                    "held again after the database came back",
                    self.database)
        return True

    def release(self):
        if self.impl is not None:
            self.impl.release()
