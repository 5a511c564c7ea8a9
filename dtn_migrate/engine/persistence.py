"""Migration records in the ``migrations`` table, flow state in TaskFlow.

A migration's record is its row of ``migrations`` (dtn_migrate.db),
with its timeline in ``migration_events``: the API, dtn-migrate-manage
and every engine read them.  TaskFlow's persistence, in the same
database, keeps only the state of the migration's flows: one logbook per
migration (its uuid is the migration id), one flow detail per run.

Inside the engine a record is the row as a dict plus:

* ``migration_id`` (the row's ``id``);
* ``stages``: {stage: {"state", "done", "size", "rate", "eta", ...}},
  kept in the row's ``details`` beside the ``bytes_*``, ``stage``,
  ``progress``, ``rate`` and ``eta`` columns derived from it;
* ``peer_image``: the peer's verified image (``peer_image_id`` and
  ``peer_image_hash``, the rest in ``details``);
* whatever else the engine keeps (an import's ``source_image_id``), in
  ``details``.

A record also shows the row's ``owner`` and ``epoch``: the engine that
claimed it last and the epoch of that claim (:meth:`Store.claim`).  A
save carries the epoch its engine holds (``epoch=``, by default the
claim it made, until :meth:`Store.release`), and is refused once
another engine has claimed the migration since; one that carries none
is not checked (a single engine, which claims nothing).

:meth:`Store.save` writes a record's changes and appends the events
they mean (state changes, stages started, finished or failed).
"""

import contextlib
import copy
import threading
import time

from oslo_log import log as logging
from oslo_utils import timeutils
from oslo_utils import uuidutils
from sqlalchemy import exc as sa_exc
from taskflow import exceptions as tf_exc
from taskflow.persistence import backends
from taskflow.persistence import models

from dtn_migrate.common import states
from dtn_migrate.db import api as db_api
from dtn_migrate.db import migration as db_migration
from dtn_migrate.db import models as db_models
from dtn_migrate.common import stages as stages_mod
from dtn_migrate import exception

LOG = logging.getLogger(__name__)

#: What the database being down (or restarting) raises: dtn_migrate.db's
#: DatabaseUnavailable, TaskFlow's wrapper of SQLAlchemy's errors, or
#: SQLAlchemy's own.
DATABASE_ERRORS = (exception.DatabaseUnavailable, tf_exc.StorageFailure,
                   sa_exc.SQLAlchemyError)
#: State of a migration -> its event.
_STATE_EVENTS = {"queued": "queued", "running": "started",
                 "complete": "finished", "failed": "failed",
                 "cancelled": "cancelled"}
#: In the error of a migration that the receiving cloud refused
#: (exception.ImportNotAllowed, on both sides).
REFUSAL = " may not import "
#: Record keys that are not columns and not kept in ``details``.
_TRANSIENT = ("migration_id", "reused", "bytes", "details")
#: Columns a record shows but only :meth:`Store.claim` writes: a save
#: that carried them would move the fence without claiming.
_FENCE = ("owner", "epoch")
_COLUMNS = frozenset(db_models.MIGRATION_COLUMNS) - {"details", "id"} - \
    frozenset(_FENCE)


def is_database_error(exc):
    """Whether ``exc`` (maybe a flow's WrappedFailure) is the database's."""
    if isinstance(exc, tf_exc.WrappedFailure):
        return any(f.check(*DATABASE_ERRORS) for f in exc)
    return isinstance(exc, DATABASE_ERRORS)


def sqlite_path(connection):
    """The file of an SQLite URL, or None (another database, or SQLite in
    memory).
    """
    return db_api.sqlite_path(connection)


def _backend_conf(connection):
    conf = {"connection": connection}
    if not connection.startswith("sqlite"):
        # Pooled connections die with a database restart: test each one
        # before use, so that the first query after the restart works.
        conf["engine_args"] = {"pool_pre_ping": True}
    return conf


def _names(record):
    """The stages of a record, in order."""
    return states.STAGES if record.get("direction") == "outgoing" \
        else ("import",)


def derive(record):
    """The columns a record's ``stages`` give: bytes per stage (each at
    most the bytes of the stage before it, see
    :func:`stages_mod.ordered`), current stage, progress (0..1, never
    below the record's own for the same attempt), rate (bytes/s,
    smoothed once known) and ETA (s, once the rates it needs are known);
    see :mod:`dtn_migrate.common.stages`.
    """
    names = _names(record)
    stages = stages_mod.ordered(record.get("stages") or {}, names)
    size = record.get("size") or (stages.get("import") or {}).get("size")
    state = record.get("state")
    out = {"bytes_%s" % s: (stages.get(s) or {}).get("done")
           for s in states.STAGES}
    if state == "complete":
        out.update(progress=1.0, stage=None, rate=None, eta=0.0)
        return out
    # Empty stages: a new attempt, whose progress starts again.
    floor = (record.get("progress") or 0.0) if stages else 0.0
    out["progress"] = stages_mod.progress(stages, size, names, floor)
    current = None
    # A preflight moves no bytes: it counts for the stage, not progress.
    checks = states.ALL_STAGES if record.get("direction") == "outgoing" \
        else names
    for s in checks:
        if s in stages and not stages_mod.done(stages[s], size):
            current = s
            break
    if state in states.FINAL_STATES:
        if state == "failed":
            # The stage that failed (the only one marked so: the others
            # stopped because of it), else the first not done.
            current = next((s for s in checks if (stages.get(s) or {}).get(
                "state") == "failed"), current)
        out.update(stage=current if state == "failed" else None,
                   rate=None, eta=None)
        return out
    out["stage"] = current
    st = stages.get(current) or {}
    out["rate"] = stages_mod.known_rate(st) or st.get("rate") or None
    out["eta"] = stages_mod.eta(stages, size, names,
                                record.get("mode") != "serial")
    return out


def _rates(old, new, seconds, names):
    """Give the stages of ``new`` their smoothed rate, with the sample
    of what they moved since ``old`` (``seconds`` ago; each later stage
    at most the stage before it).
    """
    ordered = stages_mod.ordered(new, names)
    for name, st in new.items():
        st.update(stages_mod.sample(old.get(name), ordered[name], seconds))


def from_row(row):
    """A record from a row of ``migrations``."""
    record = dict(row)
    details = record.pop("details", None) or {}
    record["migration_id"] = row["id"]
    for key, value in details.items():
        record.setdefault(key, value)
    record["stages"] = details.get("stages") or {}
    peer_image = details.get("peer_image")
    if peer_image is None and row.get("peer_image_id"):
        peer_image = {"image_id": row["peer_image_id"],
                      "os_hash_value": row.get("peer_image_hash")}
    record["peer_image"] = peer_image
    return record


def to_row(record):
    """The columns of a record (``details`` included)."""
    row, details = {}, {}
    for key, value in record.items():
        if key in _TRANSIENT or key in _FENCE:
            continue
        if key in _COLUMNS:
            row[key] = value
        elif key == "peer_image":
            value = value or {}
            row["peer_image_id"] = value.get("image_id")
            row["peer_image_hash"] = value.get("os_hash_value")
            details["peer_image"] = value or None
        else:
            details[key] = value
    row.update(derive(record))
    row["details"] = details
    return row


def _events(old, new):
    """(stage, event, message, bytes) of the changes from record ``old``
    (None: a new record) to ``new``.
    """
    out, last = [], []
    state = new.get("state")
    if old is None or old.get("state") != state:
        if state in _STATE_EVENTS:
            message = new.get("error") if state in (
                "failed", "cancelled") else None
            if state == "failed" and REFUSAL in (message or ""):
                # The receiving cloud's import rules refused it.
                last.append((None, "refused", message, None))
            # An outcome comes after its stages' last events.
            (last if state in states.FINAL_STATES else out).append(
                (new.get("stage") if state == "failed" else None,
                 _STATE_EVENTS[state], message, None))
    before = (old or {}).get("stages") or {}
    for name in states.ALL_STAGES:
        st = (new.get("stages") or {}).get(name)
        if st is None:
            continue
        prev = before.get(name)
        done = st.get("done")
        if prev is None:
            out.append((name, "started", None, done))
            prev = {}
        if st.get("state") != prev.get("state"):
            if st.get("state") in states.STAGE_DONE_STATES and \
                    prev.get("state") not in states.STAGE_DONE_STATES:
                out.append((name, "finished", None, done))
            elif st.get("state") in states.UNSUCCESSFUL_STATES:
                out.append((name, st["state"], None, done))
    return out + last


class Store:
    """Migration records and TaskFlow flow state on one database.

    ``conf``: the engine's configuration ([database] connection); or an
    SQLAlchemy URL.  ``clock``: the monotonic clock the stages' rates
    are measured with.
    Creating a Store brings the database's schema up to date.
    """

    def __init__(self, conf, clock=time.monotonic):
        self.clock = clock
        if isinstance(conf, str):
            self.url = conf
            self.db = db_api.Database(connection=conf)
        else:
            self.url = db_api.connection_url(conf)
            self.db = db_api.Database(conf)
        db_api.ensure_sqlite_dir(self.url)
        db_migration.db_sync(self.url)
        self.backend = backends.fetch(_backend_conf(self.url))
        db_api.serialize_sqlite(self.backend.engine)
        self.lock = threading.RLock()
        self._measured = {}     # migration id -> (monotonic, stages)
        self._held = {}         # migration id -> epoch of its claim
        with self.connection() as conn:
            conn.upgrade()

    @contextlib.contextmanager
    def connection(self):
        conn = self.backend.get_connection()
        try:
            yield conn
        finally:
            conn.close()

    # Records.
    def record(self, migration_id):
        """The record of a migration, or None.  Database errors are
        raised.
        """
        try:
            return from_row(self.db.migration_get(migration_id))
        except exception.MigrationNotFound:
            return None

    def records(self, filters=None, **kwargs):
        """Records matching ``filters`` (db.api's), newest first."""
        return [from_row(r) for r in self.db.migration_get_all(
            filters, **kwargs)]

    def events(self, migration_id):
        return self.db.migration_events_get(migration_id)

    def create(self, migration_id, record, epoch=0):
        """A new migration: its row, its 'queued' event, and a logbook
        with the flow detail of its first run.  ``epoch``: where its
        claims start, past those of an earlier migration whose transfer
        it resumes (the DTN agent fences a transfer's commands by epoch,
        dtn_migrate.agent.fences).
        """
        record = dict(record, migration_id=migration_id)
        row = dict(to_row(record), id=migration_id)
        if epoch:
            row["epoch"] = epoch
        self.db.migration_create(row, events=lambda _row: _events(
            None, record))
        book = models.LogBook("migration-%s" % migration_id,
                              uuid=migration_id)
        return book, self._add_run(book)

    def _add_run(self, book):
        number = len(list(book)) + 1
        detail = models.FlowDetail("attempt-%d" % number,
                                   uuid=_detail_id(book.uuid, number))
        book.add(detail)
        with self.lock, self.connection() as conn:
            conn.save_logbook(book)
        return detail

    def new_run(self, migration_id, notes=(), **changes):
        """Save ``changes`` (a retry's: state queued, ...) with ``notes``
        (and ``epoch=``, see :meth:`save`) and give the migration a fresh
        flow detail; returns the record.
        """
        record = self.save(migration_id, notes=notes, **changes)
        loaded = self._book(migration_id)
        book = loaded if loaded is not None else models.LogBook(
            "migration-%s" % migration_id, uuid=migration_id)
        self._add_run(book)
        return record

    def _book(self, migration_id, lazy=True):
        with self.lock, self.connection() as conn:
            try:
                book = conn.get_logbook(migration_id, lazy=True)
                details = list(conn.get_flows_for_book(migration_id,
                                                       lazy=lazy))
            except tf_exc.NotFound:
                return None
        for detail in details:
            book.add(detail)
        return book

    def load(self, migration_id, lazy=False):
        """(logbook, latest flow detail, record) or None; ``lazy`` leaves
        out the tasks' details.  Database errors are raised.
        """
        record = self.record(migration_id)
        if record is None:
            return None
        book = self._book(migration_id, lazy=lazy)
        if book is None:
            # The row was written, its logbook not (the database went
            # away in between): the flow starts from scratch.
            book = models.LogBook("migration-%s" % migration_id,
                                  uuid=migration_id)
            self._add_run(book)
        detail = latest(book)
        if detail is None:
            detail = self._add_run(book)
        return book, detail, record

    def claim(self, migration_id, owner, epoch):
        """Claim a migration for the engine ``owner``, over whoever held
        ``epoch`` (the record's): returns the new epoch, which this
        engine's saves of it then carry (until :meth:`release`).
        MigrationClaimLost when another engine claimed it first;
        MigrationNotFound.
        """
        new = self.db.migration_claim(migration_id, owner, epoch)
        with self.lock:
            # What this engine measured before (if it ever ran it) is
            # not the last sample: the rates start from the row's.
            self._measured.pop(migration_id, None)
            self._held[migration_id] = new
        if epoch:
            self._fork_run(migration_id)
        return new

    def _fork_run(self, migration_id):
        """Give a claim that takes a migration over a flow detail of its
        own: a copy of the latest run's, which this claim's flow resumes
        from and writes.  The engine that held the migration before
        writes on into the run it had (until it learns it was fenced):
        none of it reaches this one, so TaskFlow's logbook is fenced too.
        """
        book = self._book(migration_id, lazy=False)
        last = latest(book) if book is not None else None
        if last is None:
            return          # the flow starts from scratch (load)
        number = len(list(book)) + 1
        fork = models.FlowDetail("attempt-%d" % number,
                                 uuid=_detail_id(book.uuid, number))
        fork.merge(last, deep_copy=True)
        for atom in last:
            twin = type(atom)(atom.name, uuidutils.generate_uuid())
            fork.add(twin.merge(atom, deep_copy=True))
        book.add(fork)
        with self.lock, self.connection() as conn:
            conn.save_logbook(book)

    def held(self, migration_id):
        """The epoch of this engine's claim of a migration, or None."""
        with self.lock:
            return self._held.get(migration_id)

    def release(self, migration_id):
        """This engine no longer works on a migration it claimed: its
        saves of it carry no epoch again.
        """
        with self.lock:
            self._held.pop(migration_id, None)

    def save(self, migration_id, notes=(), epoch=None, **changes):
        """Write ``changes`` to a migration's record, with ``notes``
        (events of their own: (stage, event, message, bytes)) before the
        events the changes mean, all in one transaction; returns the
        record.

        ``epoch``: the epoch of this engine's claim (:meth:`claim`;
        by default the one it holds, if any); when another engine has
        claimed the migration since, MigrationClaimLost and nothing
        written.  None and no claim held: no check.
        """
        with self.lock:
            if epoch is None:
                epoch = self._held.get(migration_id)
            old = self.record(migration_id)
            if old is None:
                raise exception.MigrationNotFound(migration_id=migration_id)
            new = dict(old, **copy.deepcopy(changes))
            if changes.get("stages"):
                # A run resumed after a restart reports only the stages
                # it runs: the others keep what an earlier run said.
                # (Empty stages: a new attempt starts afresh.)
                new["stages"] = dict(old.get("stages") or {},
                                     **copy.deepcopy(changes["stages"]))
            if "stages" in changes and not changes["stages"]:
                # A new attempt: nothing measured of the last one counts.
                self._measured.pop(migration_id, None)
            elif "stages" in changes:
                now = self.clock()
                seen = self._measured.get(migration_id)
                if seen is not None:
                    _rates(seen[1], new["stages"], now - seen[0],
                           _names(new))
                else:
                    # The last sample's averages (an engine restarted).
                    _rates(old.get("stages") or {}, new["stages"], 0,
                           _names(new))
                self._measured[migration_id] = (
                    now, copy.deepcopy(stages_mod.ordered(
                        new["stages"], _names(new))))
            if new.get("state") in states.FINAL_STATES:
                self._measured.pop(migration_id, None)
            row = to_row(new)
            changed = {k: v for k, v in row.items()
                       if k == "details" or old.get(k) != v}
            changed.setdefault("updated_at", timeutils.utcnow())
            # The row and its events in one transaction: a database lost
            # between them would keep the change without its events.
            saved = []

            def events(row):
                saved.append(from_row(row))
                return list(notes) + _events(old, saved[-1])
            try:
                self.db.migration_update(migration_id, changed,
                                         events=events,
                                         expected_epoch=epoch)
            except exception.MigrationClaimLost:
                # The sample taken above was not saved.
                self._measured.pop(migration_id, None)
                raise
            return saved[-1]

    def close(self):
        self.backend.close()
        self.db.dispose()


def _detail_id(migration_id, number):
    return "%s-%d" % (migration_id, number)


def latest(book):
    details = sorted(book, key=lambda d: int(d.name.rsplit("-", 1)[-1]))
    return details[-1] if details else None
