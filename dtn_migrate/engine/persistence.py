"""Migrations in TaskFlow's persistence (the SQLAlchemy backend).

One logbook per migration (its uuid is the migration id); each run of the
migration's flow is a flow detail of that logbook, whose ``meta`` holds
the migration record (request, image, peer, progress, result).  The
engine keeps nothing else, so everything it knows survives kill -9.

The engine is the only writer of its database, so the latest record of
every migration is also kept in memory: read once when the engine
starts, then updated with every write.  Listing migrations, finding the
previous migration of an image and resuming read that index instead of
the database.
"""

import contextlib
import copy
import os
import threading

from oslo_log import log as logging
from sqlalchemy import exc as sa_exc
from taskflow import exceptions as tf_exc
from taskflow.persistence import backends
from taskflow.persistence import models

LOG = logging.getLogger(__name__)

#: Keys TaskFlow keeps in a flow detail's meta beside the record.
_TASKFLOW_KEYS = ("injected", "progress", "progress_details")
#: What the database being down (or restarting) raises: TaskFlow's
#: wrapper of SQLAlchemy's errors, or SQLAlchemy's own.
DATABASE_ERRORS = (tf_exc.StorageFailure, sa_exc.SQLAlchemyError)


def is_database_error(exc):
    """Whether ``exc`` (maybe a flow's WrappedFailure) is the database's."""
    if isinstance(exc, tf_exc.WrappedFailure):
        return any(f.check(*DATABASE_ERRORS) for f in exc)
    return isinstance(exc, DATABASE_ERRORS)


def sqlite_path(connection):
    """The file of an SQLite URL, or None (another database, or SQLite in
    memory).
    """
    prefix = "sqlite:///"
    if connection.startswith(prefix) and connection != prefix:
        return connection[len(prefix):]
    return None


def _ensure_sqlite_dir(connection):
    directory = os.path.dirname(sqlite_path(connection) or "")
    if directory:
        os.makedirs(directory, exist_ok=True)


def _backend_conf(connection):
    conf = {"connection": connection}
    if not connection.startswith("sqlite"):
        # Pooled connections die with a database restart: test each one
        # before use, so that the first query after the restart works.
        conf["engine_args"] = {"pool_pre_ping": True}
    return conf


class Store:
    """Logbooks and flow details on ``connection`` (an SQLAlchemy URL)."""

    def __init__(self, connection):
        _ensure_sqlite_dir(connection)
        self.backend = backends.fetch(_backend_conf(connection))
        self.lock = threading.RLock()
        with self.connection() as conn:
            conn.upgrade()
        self._index = {}        # migration id -> (run number, record)
        self._scan()

    @contextlib.contextmanager
    def connection(self):
        conn = self.backend.get_connection()
        try:
            yield conn
        finally:
            conn.close()

    def _scan(self):
        """Index the latest record of every migration in the database."""
        with self.lock, self.connection() as conn:
            for book in list(conn.get_logbooks(lazy=True)):
                for detail in conn.get_flows_for_book(book.uuid, lazy=True):
                    self._note(detail)
        LOG.debug("%d migrations in the database", len(self._index))

    def _note(self, detail):
        """Index ``detail``'s record unless a later run is indexed."""
        migration_id, number = _split_id(detail.uuid)
        record = {k: v for k, v in detail.meta.items()
                  if k not in _TASKFLOW_KEYS}
        with self.lock:
            known = self._index.get(migration_id)
            if known is None or known[0] <= number:
                self._index[migration_id] = (number, copy.deepcopy(record))

    def create(self, migration_id, meta):
        """A new logbook with one flow detail carrying ``meta``."""
        book = models.LogBook("migration-%s" % migration_id,
                              uuid=migration_id)
        return book, self.new_attempt(book, meta)

    def new_attempt(self, book, meta):
        """Add a flow detail (a fresh run) to an existing logbook."""
        number = len(list(book)) + 1
        detail = models.FlowDetail("attempt-%d" % number,
                                   uuid=_detail_id(book.uuid, number))
        detail.meta = dict(meta)
        book.add(detail)
        with self.lock, self.connection() as conn:
            conn.save_logbook(book)
            self._note(detail)
        return detail

    def load(self, migration_id, lazy=False):
        """(logbook, latest flow detail) or None; ``lazy`` leaves out the
        tasks' details (enough for the migration record).  Database
        errors are raised.
        """
        with self.lock, self.connection() as conn:
            try:
                book = conn.get_logbook(migration_id, lazy=True)
                details = list(conn.get_flows_for_book(migration_id,
                                                       lazy=lazy))
            except tf_exc.NotFound:
                return None
        for detail in details:
            book.add(detail)
        detail = latest(book)
        if detail is not None:
            self._note(detail)
        return book, detail

    def save_meta(self, detail, storage=None, **changes):
        """Update the record of ``detail``.  ``storage``: the TaskFlow
        storage of the engine running it, which then saves it (with the
        flow's own state, which must not be written back stale).
        """
        if storage is not None:
            # Also updates ``detail``: it is the storage's flow detail.
            storage.update_flow_metadata(changes)
        else:
            with self.lock, self.connection() as conn:
                fresh = conn.get_flow_details(detail.uuid, lazy=True)
                fresh.meta.update(changes)
                conn.update_flow_details(fresh)
            detail.meta.update(changes)
        self._note(detail)

    def record(self, migration_id):
        """The latest record of a migration, or None.  Records are
        shared: change a copy, not them.
        """
        with self.lock:
            known = self._index.get(migration_id)
            return None if known is None else dict(known[1])

    def records(self):
        """The latest record of every migration (see :meth:`record`)."""
        with self.lock:
            return [dict(r) for _n, r in self._index.values()]

    def close(self):
        self.backend.close()


def _detail_id(migration_id, number):
    return "%s-%d" % (migration_id, number)


def _split_id(detail_id):
    migration_id, number = detail_id.rsplit("-", 1)
    return migration_id, int(number)


def latest(book):
    details = sorted(book, key=lambda d: int(d.name.rsplit("-", 1)[-1]))
    return details[-1] if details else None
