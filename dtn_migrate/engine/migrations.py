"""Migrations of one engine: create, deduplicate, run, resume, report.

Outgoing migrations export an image of this cloud to a peer DTN;
incoming ones import what this cloud's DTN received.  Each has a record,
its row of the ``migrations`` table, and runs as a TaskFlow flow whose
state TaskFlow persists in the same database (:class:`persistence.Store`);
at most
``max_concurrent_migrations`` outgoing and ``max_concurrent_imports``
incoming flows run at once, the rest wait in a queue.  An engine that
starts finds the flows a previous run left unfinished and runs them
again: their tasks are idempotent and skip what is done.

A migration whose worker ends on a database error (the database is down
or restarting) is *stranded*: its outcome, when it has one, is kept in
memory, and :meth:`Migrations.recover` saves it (or runs the flow again)
as soon as the database answers.  A request never reuses a record that
has no live worker: it settles a stranded one first.
"""

from concurrent import futures
import datetime
import functools
import queue
import threading
import time
import uuid

from oslo_log import log as logging
from oslo_utils import timeutils
import taskflow.engines
from taskflow import exceptions as tf_exc
from taskflow import states as tf_states

from dtn_migrate import context as context_mod
from dtn_migrate.engine.flows import incoming as incoming_flow
from dtn_migrate.engine.flows import outgoing as outgoing_flow
from dtn_migrate.engine import persistence
from dtn_migrate.engine import requests
from dtn_migrate.engine.tasks import base
from dtn_migrate import exception
from dtn_migrate.image import metadata

LOG = logging.getLogger(__name__)

OUTGOING = "outgoing"
INCOMING = "incoming"
ACTIVE_STATES = requests.ACTIVE_STATES
FINAL_STATES = requests.FINAL_STATES
_INCOMING_NS = uuid.UUID("8f0d3b8e-2f36-4c55-9d52-6d7c1b7f3a11")
STAGES = requests.STAGES
#: Failures of a stage that only follow another stage's.
_SECONDARY = base.SECONDARY


#: Seconds a retry waits for the worker of the migration's last attempt
#: to let go of it.
RETRY_WAIT = 10.0
#: A record's ``cleanup`` while its staged files are still to go.
CLEANUP_PENDING = "pending"
#: Threads of one run of a migration's flow (its stages run in parallel).
FLOW_THREADS = 4


def incoming_id(transfer_id):
    """Id of the import of ``transfer_id`` in this cloud."""
    return uuid.uuid5(_INCOMING_NS, transfer_id).hex


def _now():
    return timeutils.utcnow()


def _iso(value):
    return value.isoformat(timespec="microseconds") \
        if isinstance(value, datetime.datetime) else value


def to_rpc(record, events=None):
    """A record as RPC replies carry it: the row's columns (times as
    ISO 8601 strings), ``bytes`` per stage, and the engine's own keys
    (``migration_id``, ``stages``, ``peer_image``, ``reused``).
    """
    out = {k: _iso(v) for k, v in record.items()}
    out["bytes"] = {s: record.get("bytes_%s" % s) or 0
                    for s in requests.STAGES}
    if events is not None:
        out["events"] = [{k: _iso(v) for k, v in e.items()}
                         for e in events]
    return out


def _reason(exc):
    """The message an operator should see for a flow's failure."""
    if isinstance(exc, tf_exc.WrappedFailure):
        for failure in exc:
            if not failure.check(*_SECONDARY):
                return failure.exception_str
        return exc[0].exception_str
    return str(exc) or exc.__class__.__name__


def _cancelled(exc):
    failures = list(exc) if isinstance(exc, tf_exc.WrappedFailure) else None
    if failures is None:
        return isinstance(exc, base.MigrationCancelled)
    return all(f.check(*_SECONDARY) for f in failures) and \
        any(f.check(base.MigrationCancelled) for f in failures)


class _Pool:
    """Daemon worker threads: an engine that stops leaves its flows as
    they are in the database (running), to be resumed, rather than
    waiting for them.
    """

    def __init__(self, name, size, work):
        self.queue = queue.Queue()
        self.work = work
        for i in range(size):
            threading.Thread(target=self._loop, name="%s-%d" % (name, i),
                             daemon=True).start()

    def submit(self, item):
        self.queue.put(item)

    def _loop(self):
        while True:
            item = self.queue.get()
            try:
                self.work(item)
            except Exception:  # noqa: B902 - a worker must survive
                LOG.exception("migration %s: unexpected error", item)


class Migrations:
    def __init__(self, conf, store, resources, notifier=None):
        self.conf = conf
        self.store = store
        self.res = resources
        self.notifier = notifier
        self.lock = threading.RLock()
        self.pending = set()            # ids queued or running here
        self.running = {}               # id -> (flow detail, storage)
        self.wanted = {}                # import id -> attempt asked for
        # id -> changes of its unsaved outcome, or None (run it again):
        # its worker ended on a database error.
        self.stranded = {}
        self.progress_written = {}      # id -> monotonic time
        #: Called with the record of every migration that ends (its
        #: outcome saved): the protection policies' bookkeeping.
        self.finished = []
        self.pools = {
            OUTGOING: _Pool("migration", conf.engine.max_concurrent_migrations,
                            self._run),
            INCOMING: _Pool("import", conf.engine.max_concurrent_imports,
                            self._run),
        }

    # Requests.
    def request(self, peer, images=None, selector=None, options=None,
                request_id=None, context=None):
        """Validate a request and start one migration per image.

        ``context``: the caller's (dtn_migrate.context); its project and
        user own the records, and with its token the caller must be
        able to read each image in this cloud's Glance.  The same
        ``request_id`` again from the same project answers the records
        it made.
        """
        ctx = context or context_mod.get_admin_context()
        peer = requests.peer(peer)
        ids, selector = requests.image_ids(images, selector)
        opts = requests.options(options, self.conf.engine.mode)
        request_id = requests.uuid_hex(request_id, "request_id") \
            if request_id else uuid.uuid4().hex
        known = self._request_records(request_id, ctx.project_id)
        if known:
            LOG.info("request %s: answered again (%d migrations)",
                     request_id, len(known))
            return {"request_id": request_id, "peer": known[0]["peer"],
                    "migrations": [to_rpc(self._record(r))
                                   for r in known]}
        self.res.check_peer(peer)
        # As the caller, when it came with a token: what it may read.
        images = self.res.images if not ctx.auth_token else \
            self.res.images.for_token(ctx.auth_token)
        if selector is not None:
            found = images.select(**selector)
            if not found:
                raise exception.InvalidInput(
                    reason="no active image matches the selector %s"
                           % selector)
        else:
            found = [images.readable(image_id) if ctx.auth_token
                     else images.get(image_id) for image_id in ids]
        for image in found:             # all checked before any starts
            metadata.check_migratable(image)
        owner = {"project_id": ctx.project_id, "user_id": ctx.user_id}
        out, stale = [], []
        with self.lock:
            self._settle_all()
            for image in found:
                record, replaced = self._outgoing(
                    request_id, peer, image, opts,
                    self._latest_outgoing(image["id"], peer,
                                          ctx.project_id), owner)
                out.append(to_rpc(record))
                if replaced:
                    stale.append(replaced)
        for transfer_id in stale:
            self.res.remove_staged_quietly(
                transfer_id, "it is migrated again under another transfer")
        return {"request_id": request_id, "peer": peer,
                "migrations": out}

    def _request_records(self, request_id, project_id):
        filters = {"request_id": request_id, "direction": OUTGOING}
        if project_id is not None:
            filters["project_id"] = project_id
        return _saved(self.store.records, filters,
                      sort_keys=["created_at"], sort_dirs=["asc"])

    def _outgoing(self, request_id, peer, image, opts, prior, owner):
        """(record, transfer id whose staged files nothing will resume)."""
        same = prior is not None and \
            prior.get("os_hash_value") == image["os_hash_value"]
        if prior is not None and (prior["state"] in ACTIVE_STATES or (
                prior["state"] == "complete" and same and
                not opts["force"])):
            LOG.info("image %s to %s: migration %s exists (%s)",
                     image["id"], peer, prior["migration_id"],
                     prior["state"])
            if prior["state"] in ACTIVE_STATES and \
                    prior["migration_id"] not in self.pending:
                # Left without a worker: it gets one.
                self._submit(prior["migration_id"], OUTGOING)
            return dict(self._record(prior), reused=True), None
        migration_id = uuid.uuid4().hex
        transfer_id, attempt, replaced = migration_id, 1, None
        if prior is not None and prior["state"] in ("failed", "cancelled"):
            resumable = same and \
                _comparable(prior["options"]) == _comparable(opts)
            removing = prior.get("cleanup") == CLEANUP_PENDING and \
                prior["migration_id"] in self.pending
            if resumable and not removing:
                # Resume the previous attempt's staged and sent data,
                # which are this attempt's now: no sweep removes them.
                transfer_id = prior["transfer_id"]
                attempt = prior.get("attempt", 1) + 1
                if prior.get("cleanup") is not None:
                    _saved(self.store.save, prior["migration_id"],
                           cleanup=None)
            elif not resumable:
                replaced = prior["transfer_id"]
            # Else its files are being removed: a transfer of its own.
        meta = {
            "migration_id": migration_id, "direction": OUTGOING,
            "request_id": request_id, "image_id": image["id"],
            "image_name": image.get("name"), "peer": peer,
            "options": opts, "mode": opts["mode"],
            "size": image["size"], "os_hash_value": image["os_hash_value"],
            "transfer_id": transfer_id, "attempt": attempt,
            "state": "queued", "error": None, "created_at": _now(),
            "updated_at": _now(), "finished_at": None, "peer_image": None,
            "stages": {}, "project_id": owner.get("project_id"),
            "user_id": owner.get("user_id"),
        }
        _saved(self.store.create, migration_id, meta)
        LOG.info("migration %s: image %s to %s queued (%s, transfer %s, "
                 "attempt %d)", migration_id, image["id"], peer,
                 opts["mode"], transfer_id, attempt)
        self._submit(migration_id, OUTGOING)
        return self.get(migration_id), replaced

    def _latest_outgoing(self, image_id, peer, project_id=None):
        """The latest outgoing migration of ``image_id`` to ``peer`` (of
        ``project_id``, when given), or None.
        """
        filters = {"image_id": image_id, "peer": peer,
                   "direction": OUTGOING}
        if project_id is not None:
            filters["project_id"] = project_id
        found = _saved(self.store.records, filters, limit=1)
        return found[0] if found else None

    def incoming(self, transfer_id, peer, attempt=None):
        """The agent says ``transfer_id`` arrives from ``peer``, and the
        source waits for the report of import attempt ``attempt`` (None:
        not known): import it unless this engine already does or did.

        A failed or cancelled import is imported again when a later
        attempt is asked for; a complete one never is, and a running one
        is left alone (its agent answers the source for it).
        """
        transfer_id = requests.uuid_hex(transfer_id, "transfer_id")
        peer = requests.peer(peer)
        attempt = requests.attempt(attempt)
        migration_id = incoming_id(transfer_id)
        with self.lock:
            self._settle(migration_id)
            if migration_id in self.pending:
                if attempt:
                    self.wanted[migration_id] = max(
                        attempt, self.wanted.get(migration_id, 0))
                return self.get(migration_id)
            meta = _saved(self.store.record, migration_id)
            if meta is None:
                meta = {"migration_id": migration_id, "direction": INCOMING,
                        "transfer_id": transfer_id, "peer": peer,
                        "state": "queued", "error": None,
                        "attempt": attempt or 1,
                        "created_at": _now(), "updated_at": _now(),
                        "finished_at": None, "stages": {},
                        "image_id": None, "peer_image": None}
                _saved(self.store.create, migration_id, meta)
                LOG.info("import %s of transfer %s from %s queued",
                         migration_id, transfer_id, peer)
            else:
                state, current = meta["state"], meta.get("attempt") or 1
                if state == "complete":
                    return self._record(meta)
                if state in ("failed", "cancelled"):
                    if not attempt or attempt <= current:
                        return self._record(meta)
                    _saved(self.store.new_run, migration_id,
                           state="queued", error=None, attempt=attempt,
                           started_at=None, finished_at=None, stages={})
                    LOG.info("import %s: attempt %d of transfer %s",
                             migration_id, attempt, transfer_id)
                elif attempt and attempt > current:
                    # Left queued or running by a previous run of the
                    # engine: it runs again with this attempt.
                    self.wanted[migration_id] = attempt
            self._submit(migration_id, INCOMING)
        return self.get(migration_id)

    def reconcile(self):
        """Remove the staged files finished migrations left; import
        incoming transfers whose notification was lost, and those whose
        source now waits for a later attempt.
        """
        self.sweep_staged()
        try:
            incoming = self.res.agent.list_incoming(base.CTXT,
                                                    self.res.agent_host)
        except Exception as exc:  # noqa: B902 - agent down: next time
            LOG.warning("cannot list incoming transfers: %s", exc)
            return
        for item in incoming or ():
            tid, peer = item.get("transfer_id"), item.get("peer")
            if not tid or not peer or item.get("report_state") == "active":
                continue
            try:
                self.incoming(tid, peer, item.get("wanted_attempt"))
            except exception.DtnMigrateException as exc:
                LOG.warning("incoming transfer %s: %s", tid, exc)

    # Queries.
    def get(self, migration_id, project_id=None):
        """A migration's record (of ``project_id``, when given)."""
        migration_id = requests.uuid_hex(migration_id, "migration id")
        meta = _saved(self.store.record, migration_id)
        if meta is None or (project_id is not None and
                            meta.get("project_id") != project_id):
            raise exception.MigrationNotFound(migration_id=migration_id)
        return self._record(meta)

    def events(self, migration_id):
        return _saved(self.store.events, migration_id)

    def list(self, request_id=None, direction=None, filters=None,
             marker=None, limit=None, sort_keys=None, sort_dirs=None,
             project_id=None):
        """Records, oldest first unless sorted otherwise."""
        filters = dict(filters or {})
        if request_id:
            filters["request_id"] = requests.uuid_hex(request_id,
                                                      "request_id")
        if direction:
            filters["direction"] = direction
        if not sort_keys:
            sort_keys, sort_dirs = ["created_at"], ["asc"]
        return [self._record(meta) for meta in _saved(
            self.store.records, filters, marker=marker, limit=limit,
            sort_keys=sort_keys, sort_dirs=sort_dirs,
            project_id=project_id)]

    def retry(self, migration_id, project_id=None):
        """Run a failed or cancelled outgoing migration again, as a new
        attempt of the same transfer: what is staged and sent is kept.
        """
        record = self.get(migration_id, project_id)
        migration_id = record["migration_id"]
        if record["direction"] != OUTGOING or \
                record["state"] not in ("failed", "cancelled"):
            raise exception.MigrationStateConflict(
                migration_id=migration_id,
                state="%s %s" % (record["state"], record["direction"]),
                action="retry")
        # Its worker saves the outcome, then lets go of it: a retry
        # right after the outcome waits for that.
        deadline = time.monotonic() + RETRY_WAIT
        while migration_id in self.pending and time.monotonic() < deadline:
            time.sleep(0.05)
        with self.lock:
            self._settle_all()
            latest = self._latest_outgoing(record["image_id"],
                                           record["peer"])
            if latest is not None and \
                    latest["migration_id"] != migration_id:
                raise exception.MigrationStateConflict(
                    migration_id=migration_id,
                    state="superseded by migration %s (%s)"
                          % (latest["migration_id"], latest["state"]),
                    action="retry")
            if migration_id in self.pending:
                raise exception.MigrationStateConflict(
                    migration_id=migration_id, state="still stopping",
                    action="retry")
            attempt = (record.get("attempt") or 1) + 1
            _saved(self.store.new_run, migration_id,
                   notes=[(None, "retried", "attempt %d" % attempt, None)],
                   state="queued",
                   error=None, attempt=attempt, started_at=None,
                   finished_at=None, stages={}, cleanup=None)
            self.res.forget(migration_id)
            LOG.info("migration %s: retried (attempt %d, transfer %s)",
                     migration_id, attempt, record["transfer_id"])
            self._submit(migration_id, OUTGOING)
        return self.get(migration_id)

    def cancel(self, migration_id, project_id=None):
        record = self.get(migration_id, project_id)
        migration_id = record["migration_id"]
        if record["state"] in FINAL_STATES:
            return record
        with self.lock:
            running = migration_id in self.running
            pending = migration_id in self.pending
            if pending:
                self.res.live_for(migration_id).cancel.set()
        if not running:
            # Queued, left unfinished by a previous run of the engine, or
            # stranded by a database error.
            loaded = _saved(self.store.load, migration_id, lazy=True)
            if loaded is not None and \
                    loaded[2]["state"] not in FINAL_STATES:
                _saved(self._finish, loaded[2], "cancelled",
                       "cancelled before it started")
        LOG.info("migration %s: cancel requested", migration_id)
        return self.get(migration_id)

    def _record(self, meta):
        """The record, with the live progress of a migration running
        here (newer than its row, written every progress_interval).
        """
        rec = dict(meta)
        live = self.res.live.get(rec["migration_id"])
        if live is not None and rec.get("state") in ACTIVE_STATES:
            stages = dict(rec.get("stages") or {})
            stages.update(live.snapshot())
            rec["stages"] = stages
            rec.update(persistence.derive(rec))
        return rec

    # Running.
    def resume_unfinished(self):
        """Queue the flows a previous run of the engine left running."""
        resumed = []
        for meta in self.store.records(
                {"state": list(ACTIVE_STATES)}, sort_keys=["created_at"],
                sort_dirs=["asc"]):
            if meta.get("state") in ACTIVE_STATES:
                with self.lock:
                    if meta["migration_id"] in self.pending:
                        continue
                    LOG.info("resuming %s migration %s (%s)",
                             meta["direction"], meta["migration_id"],
                             meta["state"])
                    self._submit(meta["migration_id"], meta["direction"])
                resumed.append(meta["migration_id"])
        return resumed

    def _submit(self, migration_id, direction):
        self.pending.add(migration_id)
        self.pools[direction].submit(migration_id)

    def _store_for(self, meta):
        if meta["direction"] == OUTGOING:
            return {"migration_id": meta["migration_id"],
                    "image_id": meta["image_id"], "peer": meta["peer"],
                    "transfer_id": meta["transfer_id"],
                    "options": meta["options"],
                    "attempt": meta.get("attempt", 1)}
        return {"migration_id": meta["migration_id"],
                "transfer_id": meta["transfer_id"], "peer": meta["peer"],
                "attempt": meta.get("attempt") or 1}

    def _run(self, migration_id):
        try:
            self._run_flow(migration_id)
        except persistence.DATABASE_ERRORS as exc:
            LOG.error("migration %s: the persistence database failed (%s); "
                      "it is recovered when the database answers again",
                      migration_id, exc)
            with self.lock:
                self.stranded.setdefault(migration_id, None)
        finally:
            again = self._let_go(migration_id)
            self.res.forget(migration_id)
        if again:
            self._wanted_again(migration_id, again)

    def _let_go(self, migration_id):
        """This engine no longer works on ``migration_id``; returns the
        later attempt its source asked for meanwhile, if any.
        """
        with self.lock:
            self.pending.discard(migration_id)
            self.running.pop(migration_id, None)
            # A stranded one is reconciled by recover().
            return None if migration_id in self.stranded else \
                self.wanted.pop(migration_id, None)

    def _wanted_again(self, migration_id, attempt):
        """The source asked for a later attempt while this one ran."""
        meta = self.store.record(migration_id)
        self.incoming(meta["transfer_id"], meta["peer"], attempt)

    def _stage_changed(self, migration_id, stage, state):
        """A stage of a running migration changed state: its row and
        events are written at once.
        """
        live = self.res.live.get(migration_id)
        if live is None or migration_id not in self.running:
            return
        try:
            self.store.save(migration_id, stages=live.snapshot())
            self.progress_written[migration_id] = time.monotonic()
        except persistence.DATABASE_ERRORS as exc:
            LOG.warning("migration %s: %s %s not saved: %s", migration_id,
                        stage, state, exc)

    def _run_flow(self, migration_id):
        loaded = self.store.load(migration_id)
        if loaded is None:
            LOG.warning("migration %s is not in the database", migration_id)
            return
        book, detail, meta = loaded
        if meta["state"] not in ACTIVE_STATES:
            return
        live = self.res.live_for(migration_id)
        if live.cancel.is_set():
            return self._finish(meta, "cancelled", "cancelled")
        live.seed(meta.get("stages"))
        live.on_state = functools.partial(self._stage_changed,
                                          migration_id)
        changes = {}
        if meta["direction"] == OUTGOING:
            flow = outgoing_flow.get_flow(self.res, meta["mode"])
        else:
            flow = incoming_flow.get_flow(self.res)
            with self.lock:
                wanted = self.wanted.pop(migration_id, 0)
            if wanted > (meta.get("attempt") or 1):
                changes["attempt"] = wanted
        store = self._store_for(dict(meta, **changes))
        threads = _flow_threads(migration_id)
        engine = taskflow.engines.load(
            flow, store=store, flow_detail=detail, book=book,
            backend=self.store.backend, engine="parallel",
            executor=threads)
        storage = engine.storage
        with self.lock:
            self.running[migration_id] = (detail, storage)
        resumed = meta["state"] == "running"
        meta = self.store.save(migration_id, state="running",
                               started_at=meta.get("started_at") or _now(),
                               **changes)
        self._notify("start", dict(self.get(migration_id), resumed=resumed))
        finish = functools.partial(self._finish, meta, storage=storage)
        try:
            engine.run()
        except Exception as exc:  # noqa: B902 - recorded and notified
            if persistence.is_database_error(exc):
                raise tf_exc.StorageFailure(_reason(exc))
            extra = self._import_result(meta, storage)
            if _cancelled(exc):
                finish("cancelled", "cancelled by request", **extra)
            else:
                LOG.error("%s migration %s failed: %s", meta["direction"],
                          migration_id, _reason(exc))
                finish("failed", _reason(exc), **extra)
            return
        finally:
            threads.shutdown()
        if storage.get_flow_state() != tf_states.SUCCESS:
            return finish("failed", "flow ended %s"
                          % storage.get_flow_state(),
                          **self._import_result(meta, storage))
        result = {}
        for key in ("peer_image", "image_id"):
            try:
                result[key] = storage.fetch(key)
            except tf_exc.NotFound:
                pass
        result.update(self._import_result(meta, storage))
        finish("complete", None, **result)

    def _import_result(self, meta, storage):
        """What an import's record keeps of its descriptor: the attempt
        (that its reports carry) and the source image.
        """
        if meta["direction"] != INCOMING:
            return {}
        try:
            incoming = storage.fetch("incoming")
        except tf_exc.NotFound:
            return {}
        if not isinstance(incoming, dict):
            return {}               # the descriptor could not be read
        image = incoming["image"]
        return {"attempt": incoming["attempt"],
                "protection": incoming.get("protection"),
                "source_image_id": image.get("id"),
                "image_name": image.get("name"),
                "size": image.get("size"),
                "os_hash_value": image.get("os_hash_value")}

    def _finish(self, meta, state, error, storage=None, **extra):
        live = self.res.live.get(meta["migration_id"])
        stages = live.snapshot() if live else meta.get("stages")
        if live is not None:
            live.on_state = None
        events = self.res.events
        LOG.info("migration %s %s; agent events so far: %d pushed, %d "
                 "asked for", meta["migration_id"], state, events.pushed,
                 events.asked)
        self._close(meta, dict(extra, state=state, error=error,
                               stages=stages))

    def _close(self, meta, changes, remove=True):
        """Save a migration's outcome (``changes`` of its record), then
        report, notify and clean up.  A database error strands the
        migration with its outcome, and is raised.

        The staged files go after the outcome is saved and told, so that
        a migration is complete as soon as the peer holds the image, not
        seconds later (a file system that discards freed blocks takes
        about 0.2 s per GiB to unlink).  The saved ``cleanup = pending``
        says they are still to go: an engine stopped in between, or a
        removal that failed, leaves them to :meth:`sweep_staged`, as
        does ``remove=False``.
        """
        migration_id, state = meta["migration_id"], changes["state"]
        why = self._removal(meta, state)
        changes = dict(changes, cleanup=CLEANUP_PENDING if why else None)
        try:
            meta = self.store.save(migration_id, finished_at=_now(),
                                   **changes)
        except persistence.DATABASE_ERRORS:
            with self.lock:
                self.stranded[migration_id] = changes
            raise
        with self.lock:
            self.stranded.pop(migration_id, None)
            self.progress_written.pop(migration_id, None)
        if state != "complete" and meta["direction"] == INCOMING:
            self._report_failure(meta)
        record = self.get(meta["migration_id"])
        if state == "complete":
            LOG.info("%s migration %s complete", meta["direction"],
                     meta["migration_id"])
            self._notify("end", record)
        else:
            self._notify("error", record)
        for callback in self.finished:
            callback(record)
        if why and remove:
            self.remove_staged(meta, why)

    def _removal(self, meta, state):
        """Why a migration that ends ``state`` loses its staged files, or
        None: a failed import keeps what its DTN received, for the
        source's next attempt; a failed export keeps its staged file
        only with ``[staging] keep_failed``.
        """
        if state == "complete":
            return "the image is where it belongs"
        if meta["direction"] == OUTGOING and \
                not self.conf.staging.keep_failed:
            return "the migration is %s ([staging] keep_failed = false)" \
                % state
        return None

    def remove_staged(self, meta, why):
        """Remove a finished migration's staged files, then clear its
        ``cleanup``; a failure is logged and left for the next sweep.
        """
        migration_id = meta["migration_id"]
        if not self.res.remove_staged_quietly(meta["transfer_id"], why):
            return False
        try:
            self.store.save(migration_id, cleanup=None)
        except persistence.DATABASE_ERRORS as exc:
            # The files are gone; the next sweep finds nothing to remove.
            LOG.warning("migration %s: its staged files are removed, but "
                        "the database was not told: %s", migration_id, exc)
        return True

    def sweep_staged(self):
        """Remove the staged files that finished migrations left (their
        engine stopped between saving the outcome and removing them, or
        the removal failed).  Each one is held as pending meanwhile, so
        that a retry or a later attempt waits for it.  Returns how many
        were removed.
        """
        try:
            left = self.store.records({"cleanup": CLEANUP_PENDING,
                                       "state": list(FINAL_STATES)},
                                      sort_keys=["created_at"],
                                      sort_dirs=["asc"])
        except persistence.DATABASE_ERRORS as exc:
            LOG.warning("cannot look for staged files left: %s", exc)
            return 0
        removed = 0
        for meta in left:
            migration_id = meta["migration_id"]
            with self.lock:
                if migration_id in self.pending:
                    continue
                self.pending.add(migration_id)
            try:
                meta = _saved(self.store.record, migration_id)
                if meta is not None and \
                        meta.get("cleanup") == CLEANUP_PENDING and \
                        meta["state"] in FINAL_STATES:
                    removed += self.remove_staged(
                        meta, "left when migration %s ended %s"
                        % (migration_id, meta["state"]))
            except exception.PersistenceUnavailable as exc:
                LOG.warning("migration %s: staged files left: %s",
                            migration_id, exc)
            finally:
                again = self._let_go(migration_id)
            if again:
                self._wanted_again(migration_id, again)
        return removed

    def recover(self):
        """Reconcile the stranded migrations once the database answers:
        save their outcome, or run them again.  Returns how many were
        reconciled.
        """
        with self.lock:
            if not self.stranded:
                return 0
            count = len(self.stranded)
            try:
                self._settle_all()
            except exception.PersistenceUnavailable as exc:
                LOG.warning("%d migrations wait for the database: %s",
                            len(self.stranded), exc)
            return count - len(self.stranded)

    def _settle_all(self):
        for migration_id in list(self.stranded):
            self._settle(migration_id)

    def _settle(self, migration_id):
        """Give a stranded migration its saved outcome, or a worker that
        runs it again.  Raises PersistenceUnavailable when the database
        still fails.  Call with ``self.lock`` held.
        """
        if migration_id not in self.stranded or \
                migration_id in self.pending:
            return
        changes = self.stranded[migration_id]
        # Also the test that the database answers again.
        loaded = _saved(self.store.load, migration_id, lazy=True)
        if loaded is None or changes is None:
            del self.stranded[migration_id]
            if loaded is not None:
                LOG.info("migration %s: runs again after a database error",
                         migration_id)
                self._submit(migration_id, loaded[2]["direction"])
            return
        # Under the lock: the next sweep removes the staged files.
        _saved(self._close, loaded[2], changes, remove=False)
        LOG.info("migration %s: its outcome (%s) saved after a database "
                 "error", migration_id, changes["state"])

    def _report_failure(self, meta):
        try:
            self.res.agent.set_import_report(
                base.CTXT, self.res.agent_host, meta["transfer_id"],
                {"state": "failed", "error": meta.get("error"),
                 "attempt": meta.get("attempt") or 1})
        except Exception as exc:  # noqa: B902 - the source times out
            LOG.warning("could not report the failed import of %s: %s",
                        meta["transfer_id"], exc)

    # Progress.
    def report_progress(self):
        """Write and notify the progress of running migrations: at most
        once every ``[engine] progress_interval`` seconds per migration
        (state changes are written at once, elsewhere).
        """
        interval = self.conf.engine.progress_interval
        with self.lock:
            running = list(self.running)
        for migration_id in running:
            live = self.res.live.get(migration_id)
            if live is None:
                continue
            now = time.monotonic()
            last = self.progress_written.get(migration_id)
            if last is not None and now - last < interval * 0.9:
                continue
            self.progress_written[migration_id] = now
            try:
                record = self.store.save(migration_id,
                                         stages=live.snapshot())
            except exception.MigrationNotFound:
                continue
            except persistence.DATABASE_ERRORS as exc:
                # The next write carries the bytes.
                LOG.warning("progress not saved: %s", exc)
                return
            self._notify("progress", to_rpc(self._record(record)))

    def _notify(self, event, payload):
        if self.notifier is None:
            return
        payload = {k: _iso(v) for k, v in payload.items()}
        try:
            getattr(self.notifier, "error" if event == "error" else "info")(
                {}, "dtn_migrate.migration.%s" % event, payload)
        except Exception as exc:  # noqa: B902 - never fail a migration
            LOG.warning("notification %s failed: %s", event, exc)

    def wait_idle(self, timeout=None):
        """Block until nothing is queued or running (tests, demo)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self.lock:
                if not self.pending:
                    return True
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.1)


def _flow_threads(migration_id):
    """The threads of one run of a migration's flow, for TaskFlow's
    parallel engine.  Its own ("threaded", futurist's pool) would end
    every run up to a second late: the engine joins the pool's workers
    at the end, and an idle futurist worker looks for work, or for the
    order to stop, once a second.  These stop as soon as they are told.
    """
    return futures.ThreadPoolExecutor(
        max_workers=FLOW_THREADS, thread_name_prefix="flow-%s"
        % migration_id[:8])


def _saved(call, *args, **kwargs):
    """``call(...)``, a database error raised as PersistenceUnavailable
    (what an operator's request gets back).
    """
    try:
        return call(*args, **kwargs)
    except persistence.DATABASE_ERRORS as exc:
        raise exception.PersistenceUnavailable(reason=str(exc) or
                                               exc.__class__.__name__)


def _comparable(opts):
    return {k: v for k, v in opts.items() if k != "force"}
