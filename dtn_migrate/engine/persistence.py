"""Migrations in TaskFlow's persistence (the SQLAlchemy backend).

One logbook per migration (its uuid is the migration id); each run of the
migration's flow is a flow detail of that logbook, whose ``meta`` holds
the migration record (request, image, peer, progress, result).  The
engine keeps nothing else, so everything it knows survives kill -9.
"""

import contextlib
import os
import threading

from oslo_log import log as logging
from taskflow.persistence import backends
from taskflow.persistence import models

LOG = logging.getLogger(__name__)


def _ensure_sqlite_dir(connection):
    prefix = "sqlite:///"
    if connection.startswith(prefix) and connection != prefix:
        path = connection[len(prefix):]
        directory = os.path.dirname(path)
        if directory:
            os.makedirs(directory, exist_ok=True)


class Store:
    """Logbooks and flow details on ``connection`` (an SQLAlchemy URL)."""

    def __init__(self, connection):
        _ensure_sqlite_dir(connection)
        self.backend = backends.fetch({"connection": connection})
        self.lock = threading.RLock()
        with self.connection() as conn:
            conn.upgrade()

    @contextlib.contextmanager
    def connection(self):
        conn = self.backend.get_connection()
        try:
            yield conn
        finally:
            conn.close()

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
        return detail

    def load(self, migration_id, lazy=False):
        """(logbook, latest flow detail) or None; ``lazy`` leaves out the
        tasks' details (enough for the migration record).
        """
        with self.lock, self.connection() as conn:
            try:
                book = conn.get_logbook(migration_id, lazy=True)
                details = list(conn.get_flows_for_book(migration_id,
                                                       lazy=lazy))
            except Exception:  # noqa: B902 - taskflow NotFound and kin
                return None
        for detail in details:
            book.add(detail)
        return book, latest(book)

    def save_meta(self, detail, **changes):
        with self.lock, self.connection() as conn:
            fresh = conn.get_flow_details(detail.uuid, lazy=True)
            fresh.meta.update(changes)
            conn.update_flow_details(fresh)
        detail.meta.update(changes)

    def all(self):
        """Every (logbook, latest flow detail), without tasks' details."""
        out = []
        with self.lock, self.connection() as conn:
            for book in list(conn.get_logbooks(lazy=True)):
                for detail in conn.get_flows_for_book(book.uuid, lazy=True):
                    book.add(detail)
                detail = latest(book)
                if detail is not None:
                    out.append((book, detail))
        return out

    def close(self):
        self.backend.close()


def _detail_id(migration_id, number):
    return "%s-%d" % (migration_id, number)


def latest(book):
    details = sorted(book, key=lambda d: int(d.name.rsplit("-", 1)[-1]))
    return details[-1] if details else None
