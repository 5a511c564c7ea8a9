"""Migrations of one engine: create, deduplicate, run, resume, report.

Outgoing migrations export an image of this cloud to a peer DTN;
incoming ones import what this cloud's DTN received.  Each is a
TaskFlow flow persisted in :class:`persistence.Store`; at most
``max_concurrent_migrations`` outgoing and ``max_concurrent_imports``
incoming flows run at once, the rest wait in a queue.  An engine that
starts finds the flows a previous run left unfinished and runs them
again: their tasks are idempotent and skip what is done.
"""

import json
import queue
import threading
import time
import uuid

from oslo_log import log as logging
from oslo_utils import timeutils
import taskflow.engines
from taskflow import exceptions as tf_exc
from taskflow import states as tf_states

from dtn_migrate.engine.flows import incoming as incoming_flow
from dtn_migrate.engine.flows import outgoing as outgoing_flow
from dtn_migrate.engine import requests
from dtn_migrate.engine import resources as res_mod
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


def incoming_id(transfer_id):
    """Id of the import of ``transfer_id`` in this cloud."""
    return uuid.uuid5(_INCOMING_NS, transfer_id).hex


def _now():
    return timeutils.utcnow().isoformat()


def _reason(exc):
    """The message an operator should see for a flow's failure."""
    if isinstance(exc, tf_exc.WrappedFailure):
        for failure in exc:
            if not failure.check(base.Cancelled):
                return failure.exception_str
        return exc[0].exception_str
    return str(exc) or exc.__class__.__name__


def _cancelled(exc):
    if isinstance(exc, tf_exc.WrappedFailure):
        return all(f.check(base.Cancelled) for f in exc)
    return isinstance(exc, base.Cancelled)


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
            if item is None:
                return
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
        self.engines = {}               # id -> running taskflow engine
        self.pools = {
            OUTGOING: _Pool("migration", conf.engine.max_concurrent_migrations,
                            self._run),
            INCOMING: _Pool("import", conf.engine.max_concurrent_imports,
                            self._run),
        }
        self._stop = threading.Event()

    # Requests.
    def request(self, peer, images=None, selector=None, options=None,
                request_id=None):
        """Validate a request and start one migration per image."""
        peer = requests.peer(peer)
        ids, selector = requests.image_ids(images, selector)
        opts = requests.options(options, self.conf.engine.mode)
        request_id = requests.uuid_hex(request_id, "request_id") \
            if request_id else uuid.uuid4().hex
        info = self.res.agent.ping(base.CTXT, self.res.agent_host)
        if peer not in info.get("peers", ()):
            raise exception.PeerNotFound(
                peer=peer, known=", ".join(info.get("peers", ())) or "none")
        if selector is not None:
            found = self.res.images.select(**selector)
            if not found:
                raise exception.InvalidInput(
                    reason="no active image matches the selector %s"
                           % selector)
            ids = [i["id"] for i in found]
        found = []
        for image_id in ids:            # all checked before any starts
            image = self.res.images.get(image_id)
            metadata.check_migratable(image)
            found.append(image)
        out = []
        with self.lock:
            latest = self._latest_outgoing()
            for image in found:
                out.append(self._outgoing(
                    request_id, peer, image, opts,
                    latest.get((image["id"], peer))))
        return {"request_id": request_id, "peer": peer,
                "migrations": out}

    def _outgoing(self, request_id, peer, image, opts, prior):
        if prior is not None:
            meta = prior.meta
            same = meta.get("os_hash_value") == image["os_hash_value"]
            if meta["state"] in ACTIVE_STATES or (
                    meta["state"] == "complete" and same and
                    not opts["force"]):
                LOG.info("image %s to %s: migration %s exists (%s)",
                         image["id"], peer, meta["migration_id"],
                         meta["state"])
                return dict(self._record(prior), reused=True)
        migration_id = uuid.uuid4().hex
        transfer_id, attempt = migration_id, 1
        if prior is not None and prior.meta["state"] in (
                "failed", "cancelled") and same and \
                _comparable(prior.meta["options"]) == _comparable(opts):
            # Resume the previous attempt's staged and sent data.
            transfer_id = prior.meta["transfer_id"]
            attempt = prior.meta.get("attempt", 1) + 1
        meta = {
            "migration_id": migration_id, "direction": OUTGOING,
            "request_id": request_id, "image_id": image["id"],
            "image_name": image.get("name"), "peer": peer,
            "options": opts, "mode": opts["mode"],
            "size": image["size"], "os_hash_value": image["os_hash_value"],
            "transfer_id": transfer_id, "attempt": attempt,
            "state": "queued", "error": None, "created_at": _now(),
            "updated_at": _now(), "finished_at": None, "peer_image": None,
            "stages": {},
        }
        self.store.create(migration_id, meta)
        LOG.info("migration %s: image %s to %s queued (%s, transfer %s, "
                 "attempt %d)", migration_id, image["id"], peer,
                 opts["mode"], transfer_id, attempt)
        self._submit(migration_id, OUTGOING)
        return self.get(migration_id)

    def _latest_outgoing(self):
        """{(image id, peer): latest outgoing migration's flow detail}."""
        latest = {}
        for _book, detail in self.store.all():
            meta = detail.meta
            if meta.get("direction") != OUTGOING:
                continue
            key = (meta.get("image_id"), meta.get("peer"))
            best = latest.get(key)
            if best is None or meta["created_at"] > best.meta["created_at"]:
                latest[key] = detail
        return latest

    def _latest(self, image_id, peer):
        return self._latest_outgoing().get((image_id, peer))

    def incoming(self, transfer_id, peer):
        """The agent says ``transfer_id`` arrives from ``peer``: import it
        unless this engine already does or did.
        """
        transfer_id = requests.uuid_hex(transfer_id, "transfer_id")
        peer = requests.peer(peer)
        migration_id = incoming_id(transfer_id)
        with self.lock:
            if migration_id in self.pending:
                return self.get(migration_id)
            loaded = self.store.load(migration_id)
            if loaded is None:
                meta = {"migration_id": migration_id, "direction": INCOMING,
                        "transfer_id": transfer_id, "peer": peer,
                        "state": "queued", "error": None, "attempt": 0,
                        "created_at": _now(), "updated_at": _now(),
                        "finished_at": None, "stages": {},
                        "image_id": None, "peer_image": None}
                self.store.create(migration_id, meta)
                LOG.info("import %s of transfer %s from %s queued",
                         migration_id, transfer_id, peer)
            else:
                book, detail = loaded
                state = detail.meta["state"]
                if state == "complete":
                    return self._record(detail)
                if state in ("failed", "cancelled"):
                    seen = self._peek_attempt(transfer_id)
                    if seen is None or seen <= detail.meta.get("attempt",
                                                               0):
                        return self._record(detail)
                    meta = dict(detail.meta, state="queued", error=None,
                                updated_at=_now(), finished_at=None)
                    self.store.new_attempt(book, meta)
                    LOG.info("import %s: attempt %d of transfer %s",
                             migration_id, seen, transfer_id)
            self._submit(migration_id, INCOMING)
        return self.get(migration_id)

    def _peek_attempt(self, transfer_id):
        name = res_mod.staged_name(transfer_id, res_mod.DESCRIPTOR)
        try:
            data = self.res.backend().read_small(name, limit=1 << 17)
            return int(json.loads(data)["attempt"]) if data else None
        except Exception:  # noqa: B902 - not there (yet) or unreadable
            return None

    def reconcile(self):
        """Import incoming transfers whose notification was lost."""
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
                self.incoming(tid, peer)
            except exception.DtnMigrateException as exc:
                LOG.warning("incoming transfer %s: %s", tid, exc)

    # Queries.
    def get(self, migration_id):
        migration_id = requests.uuid_hex(migration_id, "migration id")
        loaded = self.store.load(migration_id, lazy=True)
        if loaded is None:
            raise exception.MigrationNotFound(migration_id=migration_id)
        return self._record(loaded[1])

    def list(self, request_id=None, direction=None):
        out = []
        for _book, detail in self.store.all():
            meta = detail.meta
            if request_id and meta.get("request_id") != request_id:
                continue
            if direction and meta.get("direction") != direction:
                continue
            out.append(self._record(detail))
        out.sort(key=lambda r: r.get("created_at") or "")
        return out

    def cancel(self, migration_id):
        record = self.get(migration_id)
        migration_id = record["migration_id"]
        if record["state"] in FINAL_STATES:
            return record
        self.res.live_for(migration_id).cancel.set()
        with self.lock:
            running = migration_id in self.engines
        if not running:
            loaded = self.store.load(migration_id, lazy=True)
            if loaded is not None:
                self._finish(loaded[1], "cancelled", "cancelled before it "
                             "started")
        LOG.info("migration %s: cancel requested", migration_id)
        return self.get(migration_id)

    def _record(self, detail):
        rec = {k: v for k, v in detail.meta.items()}
        live = self.res.live.get(rec["migration_id"])
        stages = dict(rec.get("stages") or {})
        if live is not None:
            stages.update(live.snapshot())
        rec["stages"] = stages
        size = rec.get("size") or (stages.get("import") or {}).get("size")
        if rec.get("state") == "complete":
            rec["progress"] = 1.0
        elif size:
            names = STAGES if rec.get("direction") == OUTGOING else \
                ("import",)
            rec["progress"] = round(sum(
                min(1.0, ((stages.get(s) or {}).get("done") or 0) / size)
                for s in names) / len(names), 4)
        else:
            rec["progress"] = 0.0
        return rec

    # Running.
    def resume_unfinished(self):
        """Queue the flows a previous run of the engine left running."""
        resumed = []
        for _book, detail in self.store.all():
            meta = detail.meta
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

    def _store_for(self, detail):
        meta = detail.meta
        if meta["direction"] == OUTGOING:
            return {"migration_id": meta["migration_id"],
                    "image_id": meta["image_id"], "peer": meta["peer"],
                    "transfer_id": meta["transfer_id"],
                    "options": meta["options"],
                    "attempt": meta.get("attempt", 1)}
        return {"migration_id": meta["migration_id"],
                "transfer_id": meta["transfer_id"], "peer": meta["peer"]}

    def _run(self, migration_id):
        try:
            self._run_flow(migration_id)
        finally:
            with self.lock:
                self.pending.discard(migration_id)
                self.engines.pop(migration_id, None)
            self.res.forget(migration_id)

    def _run_flow(self, migration_id):
        book, detail = self.store.load(migration_id)
        meta = detail.meta
        if meta["state"] not in ACTIVE_STATES:
            return
        live = self.res.live_for(migration_id)
        if live.cancel.is_set():
            return self._finish(detail, "cancelled", "cancelled")
        if meta["direction"] == OUTGOING:
            flow = outgoing_flow.get_flow(self.res, meta["mode"])
        else:
            flow = incoming_flow.get_flow(self.res)
        engine = taskflow.engines.load(
            flow, store=self._store_for(detail), flow_detail=detail,
            book=book, backend=self.store.backend, engine="parallel",
            executor="threaded", max_workers=4)
        with self.lock:
            self.engines[migration_id] = engine
        resumed = meta["state"] == "running"
        self.store.save_meta(detail, state="running", updated_at=_now(),
                             started_at=meta.get("started_at") or _now())
        self._notify("start", dict(self._record(detail), resumed=resumed))
        try:
            engine.run()
        except Exception as exc:  # noqa: B902 - recorded and notified
            if _cancelled(exc):
                self._finish(detail, "cancelled", "cancelled by request")
            else:
                LOG.error("%s migration %s failed: %s", meta["direction"],
                          migration_id, _reason(exc))
                self._finish(detail, "failed", _reason(exc))
            return
        if engine.storage.get_flow_state() != tf_states.SUCCESS:
            return self._finish(detail, "failed", "flow ended %s"
                                % engine.storage.get_flow_state())
        result = {}
        for key in ("peer_image", "image_id"):
            try:
                result[key] = engine.storage.fetch(key)
            except tf_exc.NotFound:
                pass
        if meta["direction"] == INCOMING:
            incoming = engine.storage.fetch("incoming")
            result.update(attempt=incoming["attempt"],
                          image_id=result.get("image_id"),
                          source_image_id=incoming["image"].get("id"),
                          size=incoming["image"].get("size"),
                          os_hash_value=incoming["image"].get(
                              "os_hash_value"))
        self._finish(detail, "complete", None, **result)

    def _finish(self, detail, state, error, **extra):
        live = self.res.live.get(detail.meta["migration_id"])
        stages = live.snapshot() if live else detail.meta.get("stages")
        self.store.save_meta(detail, state=state, error=error,
                             updated_at=_now(), finished_at=_now(),
                             stages=stages, **extra)
        record = self._record(detail)
        if detail.meta["direction"] == INCOMING and state != "complete":
            self._report_failure(detail)
        if state == "complete":
            LOG.info("%s migration %s complete", detail.meta["direction"],
                     detail.meta["migration_id"])
            self._notify("end", record)
        else:
            self._notify("error", record)

    def _report_failure(self, detail):
        meta = detail.meta
        attempt = meta.get("attempt") or self._peek_attempt(
            meta["transfer_id"]) or 0
        if not meta.get("attempt") and attempt:
            self.store.save_meta(detail, attempt=attempt)
        try:
            self.res.agent.set_import_report(
                base.CTXT, self.res.agent_host, meta["transfer_id"],
                {"state": "failed", "error": meta.get("error"),
                 "attempt": attempt})
        except Exception as exc:  # noqa: B902 - the source times out
            LOG.warning("could not report the failed import of %s: %s",
                        meta["transfer_id"], exc)

    # Progress.
    def report_progress(self):
        """Persist and notify the progress of running migrations."""
        with self.lock:
            running = list(self.engines)
        for migration_id in running:
            loaded = self.store.load(migration_id, lazy=True)
            live = self.res.live.get(migration_id)
            if loaded is None or live is None:
                continue
            detail = loaded[1]
            self.store.save_meta(detail, stages=live.snapshot(),
                                 updated_at=_now())
            self._notify("progress", self._record(detail))

    def _notify(self, event, payload):
        if self.notifier is None:
            return
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


def _comparable(opts):
    return {k: v for k, v in opts.items() if k != "force"}
