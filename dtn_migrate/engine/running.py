"""Running migrations: each one's TaskFlow flow on a worker of its
direction's pool, the flow's outcome, and the progress written while it
runs.

A flow runs on a thread pool of its own (:func:`_flow_threads`) with
TaskFlow's parallel engine, so the stages of a pipelined migration run
at once; its outcome goes to :class:`outcomes.Outcomes`.  A worker that
ends on a database error leaves the migration *stranded*, for
:meth:`outcomes.Outcomes.recover`.
"""

from concurrent import futures
import datetime
import functools
import queue
import threading
import time

from oslo_log import log as logging
import taskflow.engines
from taskflow import exceptions as tf_exc
from taskflow import states as tf_states

from dtn_migrate.common import states
from dtn_migrate.engine.flows import incoming as incoming_flow
from dtn_migrate.engine.flows import outgoing as outgoing_flow
from dtn_migrate.engine import persistence
from dtn_migrate.engine import records
from dtn_migrate.engine.tasks import base
from dtn_migrate import exception
from dtn_migrate.common import polling

LOG = logging.getLogger(__name__)

#: Failures of a stage that only follow another stage's.
_SECONDARY = base.SECONDARY
#: Threads of one run of a migration's flow (its stages run in parallel).
FLOW_THREADS = 4


def _reason(exc):
    """The message an operator should see for a flow's failure."""
    if isinstance(exc, tf_exc.WrappedFailure):
        for failure in exc:
            if not failure.check(*_SECONDARY):
                return _failure_text(failure)
        return _failure_text(exc[0])
    return _text(exc)


def _failure_text(failure):
    if failure.exception is not None:
        return _text(failure.exception)
    return failure.exception_str


def _text(exc):
    """What ``exc`` says, less the "Migration <id> failed: " of a
    MigrationFailed: the record it goes to is that migration's, and
    whoever shows it names the migration.
    """
    if isinstance(exc, exception.MigrationFailed) and \
            exc.kwargs.get("reason"):
        return str(exc.kwargs["reason"])
    return str(exc) or exc.__class__.__name__


def _cancelled(exc):
    failures = list(exc) if isinstance(exc, tf_exc.WrappedFailure) else None
    if failures is None:
        return isinstance(exc, exception.MigrationCancelled)
    return all(f.check(*_SECONDARY) for f in failures) and \
        any(f.check(exception.MigrationCancelled) for f in failures)


class Pool:
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


class Running:
    """Migrations' running: the worker pools' work, each flow's run,
    and its progress (a mixin of :class:`migrations.Migrations`; needs
    conf, store, res, notifier, lock, pending, running, wanted,
    stranded, progress_written and pools, and the outcomes'
    ``_finish``).
    """

    def resume_unfinished(self):
        """Queue the flows a previous run of the engine left running (on
        a jobboard: post those that have no job).
        """
        if self.jobs is not None:
            return self.jobs.orphans()
        resumed = []
        for meta in self.store.records(
                {"state": list(states.ACTIVE_STATES)},
                sort_keys=["created_at"], sort_dirs=["asc"]):
            if meta.get("state") in states.ACTIVE_STATES:
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
        if self.jobs is not None:
            # Whichever engine claims its job runs it.
            self.jobs.post(migration_id, direction)
            return
        self.pending.add(migration_id)
        self.pools[direction].submit(migration_id)

    def run_claimed(self, migration_id):
        """Run a migration whose job this engine's conductor claimed."""
        with self.lock:
            self.pending.add(migration_id)
        self._run(migration_id)

    def fence(self, migration_id, why):
        """This engine lost ``migration_id`` to another (``why``, or the
        MigrationClaimLost that said so): its flow here stops at once,
        and writes and undoes nothing more (``Live.fence``).
        """
        live = self.res.live.get(migration_id)
        if live is None or not live.fenced.is_set():
            LOG.warning("migration %s: %s; its flow here stops",
                        migration_id, why)
        if live is not None:
            live.fence(str(why))

    def suspend_all(self, why):
        """Stop every flow running here (fenced), for another engine."""
        with self.lock:
            running = list(self.pending)
        for migration_id in running:
            self.fence(migration_id, why)

    def _store_for(self, meta):
        if meta["direction"] == records.OUTGOING:
            return {"migration_id": meta["migration_id"],
                    "image_id": meta["image_id"], "peer": meta["peer"],
                    "transfer_id": meta["transfer_id"],
                    "options": meta["options"],
                    "attempt": meta.get("attempt", 1),
                    "project_id": meta.get("project_id")}
        return {"migration_id": meta["migration_id"],
                "transfer_id": meta["transfer_id"], "peer": meta["peer"],
                "attempt": meta.get("attempt") or 1}

    def _run(self, migration_id):
        try:
            self._run_flow(migration_id)
        except exception.MigrationClaimLost as exc:
            self.fence(migration_id, exc)
        except persistence.DATABASE_ERRORS as exc:
            LOG.error("migration %s: the persistence database failed (%s); "
                      "it is recovered when the database answers again",
                      migration_id, exc)
            with self.lock:
                self.stranded.setdefault(migration_id, None)
        finally:
            again = self._let_go(migration_id)
            self.res.forget(migration_id)
            self.store.release(migration_id)
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
        except exception.MigrationClaimLost as exc:
            self.fence(migration_id, exc)
        except persistence.DATABASE_ERRORS as exc:
            LOG.warning("migration %s: %s %s not saved: %s", migration_id,
                        stage, state, exc)

    def _peer_changed(self, migration_id, since):
        """The peer of a running migration stopped answering ``since``
        (time.time()), or answers again (None): the record says so, and
        its timeline has the loss and the resume.
        """
        live = self.res.live.get(migration_id)
        if live is None or migration_id not in self.running:
            return
        if since is not None:
            when = records.iso(datetime.datetime.fromtimestamp(
                since, datetime.timezone.utc).replace(tzinfo=None))
            note = ("import", "peer-lost",
                    "the peer has not answered since %s" % when, None)
            LOG.warning("migration %s: %s", migration_id, note[2])
        else:
            when = None
            note = ("import", "peer-back", "the peer answers again", None)
            LOG.info("migration %s: %s", migration_id, note[2])
        try:
            self.store.save(migration_id, notes=[note],
                            peer_silent_since=when, stages=live.snapshot())
        except exception.MigrationClaimLost as exc:
            self.fence(migration_id, exc)
        except persistence.DATABASE_ERRORS as exc:
            LOG.warning("migration %s: %s not saved: %s", migration_id,
                        note[1], exc)

    def _run_flow(self, migration_id):
        loaded = self.store.load(migration_id)
        if loaded is None:
            LOG.warning("migration %s is not in the database", migration_id)
            return
        book, detail, meta = loaded
        if meta["state"] not in states.ACTIVE_STATES:
            return
        live = self.res.live_for(migration_id)
        if live.cancel.is_set():
            return self._finish(meta, "cancelled", "cancelled")
        live.seed(meta.get("stages"))
        live.on_state = functools.partial(self._stage_changed,
                                          migration_id)
        live.on_peer = functools.partial(self._peer_changed, migration_id)
        changes = {}
        if meta["direction"] == records.OUTGOING:
            flow = outgoing_flow.get_flow(self.res, meta["mode"])
        else:
            flow = incoming_flow.get_flow(self.res)
            with self.lock:
                wanted = self.wanted.pop(migration_id, 0)
            if wanted > (meta.get("attempt") or 1):
                # A later attempt of an import left running: its stages
                # start afresh, as a failed one's do (incoming()).
                changes.update(attempt=wanted, stages={})
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
        started = meta.get("started_at") or records.now()
        notes = []
        if resumed:
            # Left running by an engine that stopped: its timeline says
            # when it was last heard of, and that it goes on.
            notes = [(None, "interrupted", "the engine stopped; last "
                      "written at %s" % records.iso(meta.get("updated_at")),
                      None),
                     (None, "resumed", "by a restarted engine", None)]
        meta = self.store.save(migration_id, notes=notes, state="running",
                               started_at=started, peer_silent_since=None,
                               **changes)
        self.notify("start", dict(self.get(migration_id), resumed=resumed))
        finish = functools.partial(self._finish, meta, storage=storage)
        try:
            engine.run()
        except Exception as exc:  # noqa: B902 - recorded and notified
            if live.fenced.is_set():
                # Another engine holds it: its outcome is that one's.
                LOG.info("migration %s: its flow stopped here: %s",
                         migration_id, live.fenced_why)
                return
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
        if meta["direction"] != records.INCOMING:
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
            except exception.MigrationClaimLost as exc:
                self.fence(migration_id, exc)
                continue
            except persistence.DATABASE_ERRORS as exc:
                # The next write carries the bytes.
                LOG.warning("progress not saved: %s", exc)
                return
            self.notify("progress", records.to_rpc(self._record(record)))

    def notify(self, event, payload):
        if self.notifier is None:
            return
        payload = {k: records.iso(v) for k, v in payload.items()}
        try:
            getattr(self.notifier, "error" if event == "error" else "info")(
                {}, "dtn_migrate.migration.%s" % event, payload)
        except Exception as exc:  # noqa: B902 - never fail a migration
            LOG.warning("notification %s failed: %s", event, exc)

    def wait_idle(self, timeout=None):
        """Block until nothing is queued or running (tests, demo)."""
        def idle():
            with self.lock:
                return not self.pending

        return polling.poll(idle, timeout)


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
