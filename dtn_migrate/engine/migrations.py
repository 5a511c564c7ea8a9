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

This module takes requests and answers queries; the flows run in
:mod:`running`, and :mod:`outcomes` saves how each one ended, including
the outcomes a database error stranded (:meth:`Migrations.recover`).  A
request never reuses a record that has no live worker: it settles a
stranded one first.
"""

import contextlib
import threading
import uuid

from oslo_log import log as logging

from dtn_migrate import context as context_mod
from dtn_migrate.common import states
from dtn_migrate.common import text
from dtn_migrate.coordination import leader
from dtn_migrate.engine import outcomes
from dtn_migrate.engine import persistence
from dtn_migrate.engine import records
from dtn_migrate.engine import requests
from dtn_migrate.engine import reuse
from dtn_migrate.engine import running as running_mod
from dtn_migrate.engine.tasks import base
from dtn_migrate import exception
from dtn_migrate.image import marker
from dtn_migrate.image import metadata
from dtn_migrate.common import polling

LOG = logging.getLogger(__name__)

OUTGOING = records.OUTGOING
INCOMING = records.INCOMING
_INCOMING_NS = uuid.UUID("8f0d3b8e-2f36-4c55-9d52-6d7c1b7f3a11")


#: Seconds a retry waits for the worker of the migration's last attempt
#: to let go of it.
RETRY_WAIT = 10.0


def incoming_id(transfer_id, peer):
    """Id of the import of ``peer``'s ``transfer_id`` in this cloud: a
    transfer id that another peer also sends is another import.
    """
    return uuid.uuid5(_INCOMING_NS, "%s/%s" % (peer, transfer_id)).hex


@contextlib.contextmanager
def _held(holding, name):
    try:
        with holding(name):
            yield
    except leader.LockUnavailable as exc:
        raise exception.ServiceUnavailable(
            reason="the engines' coordination backend: %s" % exc)


class Migrations(running_mod.Running, outcomes.Outcomes):
    """The migrations of one engine: its requests and queries here, the
    running of their flows in :class:`running.Running`, their outcomes
    in :class:`outcomes.Outcomes`.
    """

    def __init__(self, conf, store, resources, notifier=None):
        self.conf = conf
        self.store = store
        self.res = resources
        # Only this service's database holds the import seal's key.
        resources.use_seal_key(
            lambda: store.db.service_key(marker.KEY_NAME))
        # The agent's commands carry this engine's claims.
        resources.use_claims(store.held)
        self.notifier = notifier
        self.lock = threading.RLock()
        self.pending = set()            # ids queued or running here
        self.running = {}               # id -> (flow detail, storage)
        self.wanted = {}                # import id -> attempt asked for
        # id -> changes of its unsaved outcome, or None (run it again):
        # its worker ended on a database error.
        self.stranded = {}
        self.progress_written = {}      # id -> monotonic time
        #: The jobboard (jobs.Jobs) when engines share one; None: this
        #: engine runs every migration on its pools.
        self.jobs = None
        #: ``holding(name)``, the engines' lock of that name (a context
        #: manager, coordination.leader.Leadership.holding) when engines
        #: share the work; None: this engine's lock is the only one.
        self.holding = None
        #: Called with the record of every migration that ends (its
        #: outcome saved): the protection policies' bookkeeping.
        self.finished = []
        self.pools = {
            OUTGOING: running_mod.Pool(
                "migration", conf.engine.max_concurrent_migrations,
                self._run),
            INCOMING: running_mod.Pool(
                "import", conf.engine.max_concurrent_imports, self._run),
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
                    "migrations": [records.to_rpc(self._record(r))
                                   for r in known]}
        self.res.check_peer(peer)
        # As the caller, when it came with a token: what it may read.
        images = self.res.images if not ctx.auth_token else \
            self.res.images.for_token(ctx.auth_token)
        if selector is not None:
            found = images.select(**selector)
            if not found:
                raise exception.InvalidInput(
                    reason="no active image this project can see has %s"
                           % _asked(selector))
        else:
            found = [images.readable(image_id) if ctx.auth_token
                     else images.get(image_id) for image_id in ids]
        for image in found:             # all checked before any starts
            metadata.check_migratable(image)
        owner = {"project_id": ctx.project_id, "user_id": ctx.user_id}
        out, stale = [], []
        # Across engines too: two engines asked for one image at once
        # (a Glance event and a scan) would both start a migration.
        with self._across_engines("request-%s" % peer), self.lock:
            self._settle_all()
            # Every image decided (a 409 raised) before any starts.
            plans = [(image, self._plan(peer, image, opts, ctx.project_id))
                     for image in found]
            for image, (reused, prior) in plans:
                record, replaced = self._outgoing(
                    request_id, peer, image, opts, reused, prior, owner)
                out.append(records.to_rpc(record))
                if replaced:
                    stale.append(replaced)
        for transfer_id in stale:
            self.res.remove_staged_quietly(
                transfer_id, "it is migrated again under another transfer")
        return {"request_id": request_id, "peer": peer,
                "migrations": out}

    def _across_engines(self, name):
        """The engines' lock ``name`` (nothing with one engine);
        ServiceUnavailable when it cannot be had.
        """
        if self.holding is None:
            return contextlib.nullcontext()
        return _held(self.holding, name)

    def _request_records(self, request_id, project_id):
        filters = {"request_id": request_id, "direction": OUTGOING}
        if project_id is not None:
            filters["project_id"] = project_id
        return records.saved(self.store.records, filters,
                             sort_keys=["created_at"], sort_dirs=["asc"])

    def _plan(self, peer, image, opts, project_id):
        """(the migration of ``image`` to ``peer`` a request of
        ``project_id`` reuses, or None; the newest attempt, or None).
        MigrationInProgress when one runs that the request asks
        something else of (see :mod:`reuse`).
        """
        latest = self._latest_outgoing(image["id"], peer, project_id)
        if latest is None:
            return None, None
        if latest["state"] in states.ACTIVE_STATES:
            # A request starts none while one runs, and a retry only the
            # latest: one that runs is the latest.
            reuse.check_running(latest, image, opts)
            return latest, latest
        if opts["force"]:
            return None, latest
        complete = [latest] if latest["state"] == states.COMPLETE else []
        done = records.saved(reuse.copy_to_reuse, complete, image, opts,
                             self.store.db)
        if done is None:
            complete = self._outgoing_of(image["id"], peer, project_id,
                                         [states.COMPLETE], reuse.LOOK_BACK)
            done = records.saved(reuse.copy_to_reuse, complete, image,
                                 opts, self.store.db)
        return done, latest

    def _outgoing(self, request_id, peer, image, opts, reused, prior,
                  owner):
        """(record, transfer id whose staged files nothing will resume):
        ``reused`` (see :meth:`_plan`) again, or a new migration that
        resumes ``prior`` (the newest attempt) when it can.
        """
        if reused is not None:
            LOG.info("image %s to %s: migration %s reused (%s)",
                     image["id"], peer, reused["migration_id"],
                     reused["state"])
            if reused["state"] in states.ACTIVE_STATES and \
                    reused["migration_id"] not in self.pending:
                # Left without a worker: it gets one.
                self._submit(reused["migration_id"], OUTGOING)
            return dict(self._record(reused), reused=True), None
        same = prior is not None and \
            prior.get("os_hash_value") == image["os_hash_value"]
        migration_id = uuid.uuid4().hex
        transfer_id, attempt, replaced, epoch = migration_id, 1, None, 0
        if prior is not None and prior["state"] in states.UNSUCCESSFUL_STATES:
            resumable = same and \
                _comparable(prior["options"]) == _comparable(opts)
            removing = prior.get("cleanup") == records.CLEANUP_PENDING and \
                prior["migration_id"] in self.pending
            if resumable and not removing:
                # Resume the previous attempt's staged and sent data,
                # which are this attempt's now: no sweep removes them.
                transfer_id = prior["transfer_id"]
                attempt = prior.get("attempt", 1) + 1
                # Its claims come after the previous attempt's.
                epoch = prior.get("epoch") or 0
                if prior.get("cleanup") is not None:
                    records.saved(self.store.save, prior["migration_id"],
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
            "state": "queued", "error": None, "created_at": records.now(),
            "updated_at": records.now(), "finished_at": None,
            "peer_image": None,
            "stages": {}, "project_id": owner.get("project_id"),
            "user_id": owner.get("user_id"),
        }
        records.saved(self.store.create, migration_id, meta, epoch=epoch)
        LOG.info("migration %s: image %s to %s queued (%s, transfer %s, "
                 "attempt %d)", migration_id, image["id"], peer,
                 opts["mode"], transfer_id, attempt)
        self._submit(migration_id, OUTGOING)
        return self.get(migration_id), replaced

    def _latest_outgoing(self, image_id, peer, project_id=None):
        """The latest outgoing migration of ``image_id`` to ``peer`` (of
        ``project_id``, when given), or None.
        """
        found = self._outgoing_of(image_id, peer, project_id, None, 1)
        return found[0] if found else None

    def _outgoing_of(self, image_id, peer, project_id, state, limit):
        """Outgoing migrations of ``image_id`` to ``peer`` (of
        ``project_id``, when given; in ``state``, when given), newest
        first, at most ``limit``.
        """
        filters = {"image_id": image_id, "peer": peer,
                   "direction": OUTGOING, "state": state}
        if project_id is not None:
            filters["project_id"] = project_id
        return records.saved(self.store.records, filters, limit=limit)

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
        with self.lock:
            migration_id = incoming_id(transfer_id, peer)
            self._settle(migration_id)
            if migration_id in self.pending:
                if attempt:
                    self.wanted[migration_id] = max(
                        attempt, self.wanted.get(migration_id, 0))
                return self.get(migration_id)
            meta = records.saved(self.store.record, migration_id)
            if meta is None:
                meta = {"migration_id": migration_id, "direction": INCOMING,
                        "transfer_id": transfer_id, "peer": peer,
                        "state": "queued", "error": None,
                        "attempt": attempt or 1,
                        "created_at": records.now(),
                        "updated_at": records.now(),
                        "finished_at": None, "stages": {},
                        "image_id": None, "peer_image": None}
                records.saved(self.store.create, migration_id, meta)
                LOG.info("import %s of transfer %s from %s queued",
                         migration_id, transfer_id, peer)
            else:
                state, current = meta["state"], meta.get("attempt") or 1
                if state == "complete":
                    return self._record(meta)
                if state in states.UNSUCCESSFUL_STATES:
                    if not attempt or attempt <= current:
                        return self._record(meta)
                    records.saved(self.store.new_run, migration_id,
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
        meta = records.saved(self.store.record, migration_id)
        if meta is None or (project_id is not None and
                            meta.get("project_id") != project_id):
            raise exception.MigrationNotFound(migration_id=migration_id)
        return self._record(meta)

    def events(self, migration_id):
        return records.saved(self.store.events, migration_id)

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
        return [self._record(meta) for meta in records.saved(
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
                record["state"] not in states.UNSUCCESSFUL_STATES:
            raise exception.MigrationStateConflict(
                migration_id=migration_id,
                state="%s %s" % (record["state"], record["direction"]),
                action="retry")
        # Its worker saves the outcome, then lets go of it: a retry
        # right after the outcome waits for that.
        polling.poll(lambda: migration_id not in self.pending,
                     RETRY_WAIT, 0.05)
        with self.lock:
            self._settle_all()
            # Within its project: another project's migrations of the
            # same image are theirs, and never named to this one.
            latest = self._latest_outgoing(record["image_id"],
                                           record["peer"],
                                           record.get("project_id"))
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
            records.saved(
                self.store.new_run, migration_id,
                notes=[(None, "retried", "attempt %d" % attempt, None)],
                state="queued", error=None, attempt=attempt,
                started_at=None, finished_at=None, stages={}, cleanup=None)
            self.res.forget(migration_id)
            LOG.info("migration %s: retried (attempt %d, transfer %s)",
                     migration_id, attempt, record["transfer_id"])
            self._submit(migration_id, OUTGOING)
        return self.get(migration_id)

    def cancel(self, migration_id, project_id=None):
        record = self.get(migration_id, project_id)
        migration_id = record["migration_id"]
        if record["state"] in states.FINAL_STATES:
            raise exception.MigrationStateConflict(
                migration_id=migration_id,
                state="already %s" % record["state"], action="cancel")
        with self.lock:
            running = migration_id in self.running
            pending = migration_id in self.pending
            if pending:
                self.res.live_for(migration_id).cancel.set()
        if not pending and self.jobs is not None:
            # Maybe another engine's: this one takes it over (the owner
            # is fenced), cancels its transfer and ends it.
            self.jobs.take_over(migration_id)
            if record["direction"] == OUTGOING:
                self.res.cancel_transfer_quietly(record["transfer_id"],
                                                 migration_id)
        if not running:
            # Queued, left unfinished by a previous run of the engine, or
            # stranded by a database error.
            loaded = records.saved(self.store.load, migration_id, lazy=True)
            if loaded is not None and \
                    loaded[2]["state"] not in states.FINAL_STATES:
                records.saved(self._finish, loaded[2], "cancelled",
                              "cancelled before it started")
        LOG.info("migration %s: cancel requested", migration_id)
        self.store.release(migration_id)
        return self.get(migration_id)

    def fail_poison(self, migration_id, reason):
        """End a migration whose job went to the jobboard's trash."""
        meta = records.saved(self.store.record, migration_id)
        LOG.error("migration %s fails: %s", migration_id, reason)
        records.saved(self._finish, meta, "failed", reason)

    def _record(self, meta):
        """The record, with the live progress of a migration running
        here (newer than its row, written every progress_interval).
        """
        rec = dict(meta)
        live = self.res.live.get(rec["migration_id"])
        if live is not None and rec.get("state") in states.ACTIVE_STATES:
            stages = dict(rec.get("stages") or {})
            for name, st in live.snapshot().items():
                # The row's smoothed rates stay (the live stage has none).
                stages[name] = dict(stages.get(name) or {}, **st)
            rec["stages"] = stages
            rec.update(persistence.derive(rec))
        return rec


def _asked(selector):
    """A selector in words: ``tag 'dr' and properties os=linux``."""
    asked = []
    if selector.get("tag") is not None:
        asked.append("tag %s" % text.quote(selector["tag"]))
    props = selector.get("properties") or {}
    if props:
        asked.append("properties %s" % ", ".join(
            "%s=%s" % (text.shorten(str(k)), text.shorten(str(v)))
            for k, v in sorted(props.items())))
    return " and ".join(asked)


def _comparable(opts):
    return {k: v for k, v in opts.items() if k != "force"}
