"""What the engine's tasks use: this cloud's image service, its DTN's
export and agent, and the live state of running migrations.

Tasks are rebuilt from code whenever a flow is loaded, so they hold a
reference to these resources instead of persisting them.
"""

import secrets
import threading
import time

from oslo_log import log as logging

from dtn_migrate.agent import rpcapi as agent_rpcapi
from dtn_migrate.common import staged
from dtn_migrate.conf import staging as staging_conf
from dtn_migrate.engine import events as events_mod
from dtn_migrate import exception
from dtn_migrate.image import marker
from dtn_migrate.staging import backend as staging_backend
from dtn_migrate.staging import copy
from dtn_migrate.staging import factory

LOG = logging.getLogger(__name__)

#: Names of a migration's files, under the staging root of both DTNs.
DESCRIPTOR = staged.DESCRIPTOR
DATA = staged.DATA
staged_name = staged.staged_name


#: Seconds the agent's answer to ping (what it pushes) is kept.
PING_TTL = 60.0


class _Stop(threading.Event):
    """A migration's stop event: setting it also wakes the tasks that
    wait on the event board.
    """

    def __init__(self, wake=None):
        super().__init__()
        self._wake = wake

    def set(self):
        super().set()
        if self._wake is not None:
            self._wake()


class _Cancel(threading.Event):
    """The operator's cancel of a migration: setting it also sets
    ``stop``, which every stage waits on.
    """

    def __init__(self, stop):
        super().__init__()
        self._stop = stop

    def set(self):
        super().set()
        self._stop.set()


class Live:
    """In-memory state of a running migration: per-stage progress, its
    cancel event (the operator's) and its stop event (a cancel, or a
    stage that failed: the other stages stop at once rather than run on
    until they stall).
    """

    def __init__(self, wake=None):
        self.stop = _Stop(wake)
        self.cancel = _Cancel(self.stop)
        #: Set when this engine lost the migration to another (its
        #: claim): every stage stops, nothing is undone (:meth:`fence`).
        self.fenced = _Cancel(self.stop)
        self.fenced_why = None
        self.failed = None              # the first stage that failed
        self.stages = {}
        self.lock = threading.Lock()
        self.updated = time.time()
        #: Called with (stage, state) when a stage changes state (the
        #: engine writes the migration's row then).
        self.on_state = None
        #: Since when (time.time()) the peer has not answered, or None.
        self.peer_silent_since = None
        #: Called with that time (or None: it answers again) when it
        #: changes (the engine writes the row and the event).
        self.on_peer = None

    def stage(self, name, **info):
        with self.lock:
            st = self.stages.setdefault(name, {})
            before = st.get("state", False)
            st.update(info)
            changed = "state" in info and info["state"] != before
            self.updated = time.time()
        if changed:
            self._changed(name, info["state"])

    def _changed(self, name, state):
        callback = self.on_state
        if callback is not None:
            try:
                callback(name, state)
            except Exception:  # noqa: B902 - never fail a stage
                LOG.exception("stage %s %s: could not be recorded", name,
                              state)

    def peer_silent(self, since):
        """The peer has not answered since ``since`` (time.time()), or
        (None) it answers again.
        """
        with self.lock:
            changed = (since is None) != (self.peer_silent_since is None)
            self.peer_silent_since = since
        callback = self.on_peer
        if changed and callback is not None:
            try:
                callback(since)
            except Exception:  # noqa: B902 - never fail a stage
                LOG.exception("the peer's silence could not be recorded")

    def fence(self, why):
        """Another engine holds the migration now (``why``): its stages
        stop at once, and neither its outcome nor its reverts run here.
        """
        with self.lock:
            if self.fenced_why is None:
                self.fenced_why = why
        self.fenced.set()

    def fail(self, name):
        """Stage ``name`` failed: stop the others."""
        with self.lock:
            if self.failed is None:
                self.failed = name
            changed = self.stages.setdefault(name, {}).get("state") != \
                "failed"
            self.stages[name].update(state="failed")
            self.updated = time.time()
        self.stop.set()
        if changed:
            self._changed(name, "failed")

    def snapshot(self):
        with self.lock:
            return {k: dict(v) for k, v in self.stages.items()}

    def seed(self, stages):
        """Take the complete stages of an earlier run (the record's):
        a resumed flow does not run its finished tasks again, and they
        would be missing from the record it saves at the end.
        """
        with self.lock:
            for name, info in (stages or {}).items():
                if name not in self.stages and isinstance(info, dict) and \
                        info.get("state") == "complete":
                    self.stages[name] = dict(info)


class Resources:
    def __init__(self, conf, images, agent=None, backend=None,
                 transport=None):
        self.conf = conf
        self.images = images
        self.agent = agent or agent_rpcapi.AgentAPI(
            timeout=conf.engine.rpc_timeout, retry=None,
            transport=transport)
        self.agent_host = conf.engine.agent_host
        if not self.agent_host:
            raise exception.ConfigError(
                reason="[engine] agent_host (this cloud's DTN agent) is "
                       "not set")
        self._backend = backend
        self._backend_lock = threading.Lock()
        self._staging_root = None
        self.live = {}
        self.live_lock = threading.Lock()
        #: What the agent pushed (RPC cast transfer_event).
        self.events = events_mod.EventBoard()
        self._pushes = (None, frozenset())   # (when asked, kinds)
        # The import seal's key (dtn_migrate.image.marker): read from
        # the service's database at its first use (see use_seal_key).
        self._seal_source = None
        self._seal_key = None
        self._seal_lock = threading.Lock()
        # The epoch of this engine's claim of a migration (Store.held).
        self._held = None

    # The import seal.
    def use_seal_key(self, source):
        """Take the import seal's key (hex) from ``source()``, at its
        first use: the service's database, which the engine's Store
        reads.  Without one, the key is this process's own: an engine
        restarted does not know its earlier imports' images.
        """
        self._seal_source = source

    def seal_key(self):
        with self._seal_lock:
            if self._seal_key is None:
                self._seal_key = bytes.fromhex(self._seal_source()) \
                    if self._seal_source is not None \
                    else secrets.token_bytes(32)
            return self._seal_key

    def imported(self, transfer_id, peer, owner):
        """This service's images of ``peer``'s ``transfer_id`` in
        project ``owner`` (see dtn_migrate.image.marker.find).
        """
        return marker.find(self.images, self.seal_key(), transfer_id, peer,
                           owner)

    # Staging.
    def backend(self):
        with self._backend_lock:
            if self._backend is None:
                try:
                    self._backend = factory.open_backend(self.conf.staging)
                except ValueError as exc:
                    raise exception.ConfigError(reason=str(exc))
            return self._backend

    def staging_root(self):
        """The DTN agent's staging root (where the backend's names
        start), asked once.
        """
        if self._staging_root is None:
            self._ping()
        return self._staging_root

    def _ping(self):
        info = self.agent.ping({}, self.agent_host)
        self._staging_root = info.get("staging_root")
        kinds = info.get("pushes")
        if not isinstance(kinds, (list, tuple)):
            kinds = ()
        self._pushes = (time.monotonic(), frozenset(
            k for k in kinds if isinstance(k, str)))
        return info

    def agent_pushes(self, kind):
        """The agent says it pushes events of ``kind`` (asked at most
        every PING_TTL seconds; an agent that does not answer pushes
        nothing).
        """
        when, kinds = self._pushes
        if when is None or time.monotonic() - when > PING_TTL:
            try:
                self._ping()
            except Exception as exc:  # noqa: B902 - polled meanwhile
                LOG.debug("agent ping failed: %s", exc)
                self._pushes = (time.monotonic(), frozenset())
            kinds = self._pushes[1]
        return kind in kinds

    def fresh_for(self, kind):
        """Seconds a value of ``kind`` on the event board is used before
        the agent is asked again: the fallback interval when the agent
        pushes such events, the poll interval otherwise.
        """
        engine = self.conf.engine
        fallback = max(engine.event_fallback_interval, engine.poll_interval)
        if self.events.pushing(kind, 2 * fallback) or \
                self.agent_pushes(kind):
            return fallback
        return engine.poll_interval

    def watched(self, kind, transfer_id, call, name=None):
        """The latest value of an event key, or ``call()``'s when it is
        not fresh (see EventBoard.fetch).
        """
        return self.events.fetch(events_mod.key(kind, transfer_id, name),
                                 call, self.fresh_for(kind))

    def copy_options(self):
        backend = self.backend()
        total = backend.total_bytes()
        if total is None:
            # A backend that cannot tell its size: the free space bounds
            # it from below, so the margin is smaller than asked.
            total = backend.free_bytes()
        margin = staging_conf.margin_bytes(
            self.conf.staging.free_space_margin, total)
        opts = factory.copy_options(self.conf.staging, margin)
        opts.stall_timeout = float(self.conf.engine.stall_timeout)
        return opts

    def remove_staged(self, transfer_id):
        """Remove a migration's files (and their watermarks) from this
        DTN's export, then its directory if nothing else is left there;
        missing files are not an error.
        """
        backend = self.backend()
        for leaf in (DATA, DESCRIPTOR):
            copy.cleanup(backend, staged_name(transfer_id, leaf),
                         self.conf.staging.watermark_suffix)
        try:
            backend.rmdir(transfer_id)
        except staging_backend.NotEmpty:
            LOG.info("kept the staging directory of transfer %s: it holds "
                     "files that are not the migration's", transfer_id)

    def remove_staged_quietly(self, transfer_id, why):
        """remove_staged, best effort: a failure only costs space, so it
        is logged.  Returns whether the files are gone.
        """
        LOG.info("removing the staged files of transfer %s: %s",
                 transfer_id, why)
        try:
            self.remove_staged(transfer_id)
        except Exception as exc:  # noqa: B902 - only space is lost
            LOG.warning("could not remove the staged files of transfer "
                        "%s: %s", transfer_id, exc)
            return False
        return True

    # This cloud's DTN agent.
    def use_claims(self, held):
        """``held(migration_id)``: the epoch of this engine's claim of a
        migration, or None (Store.held): the agent commands of
        :meth:`command` carry it.
        """
        self._held = held

    def command(self, migration_id, method, *args, **kwargs):
        """Call the agent's ``method`` for ``migration_id`` with the
        epoch of this engine's claim of it.  An agent that saw a later
        claim's command refuses it (StaleEpoch): this engine is then
        fenced off the migration at once, and MigrationSuspended raised.
        """
        epoch = None if self._held is None else self._held(migration_id)
        if epoch is not None:
            kwargs["epoch"] = epoch
        try:
            return getattr(self.agent, method)({}, self.agent_host, *args,
                                               **kwargs)
        except exception.StaleEpoch as exc:
            live = self.live.get(migration_id)
            if live is not None:
                live.fence(str(exc))
            raise exception.MigrationSuspended(migration_id=migration_id,
                                               reason=str(exc))

    def cancel_transfer_quietly(self, transfer_id, migration_id=None):
        """Ask this DTN's agent to cancel ``transfer_id`` (of
        ``migration_id``, whose claim the command carries), best effort:
        one it no longer runs, or an agent that does not answer or
        refuses a stale claim, is logged.
        """
        try:
            if migration_id is None:
                self.agent.cancel_transfer({}, self.agent_host, transfer_id)
            else:
                self.command(migration_id, "cancel_transfer", transfer_id)
        except Exception as exc:  # noqa: B902 - best effort
            LOG.warning("could not cancel transfer %s: %s", transfer_id, exc)

    def check_peer(self, peer):
        """The DTN agent answers and knows peer DTN ``peer``."""
        info = self._ping()
        peers = info.get("peers") or ()
        if peer not in peers:
            raise exception.PeerNotFound(peer=peer,
                                         known=", ".join(peers) or "none")

    # Live state.
    def live_for(self, migration_id):
        with self.live_lock:
            live = self.live.get(migration_id)
            if live is None:
                live = self.live[migration_id] = Live(self.events.wake)
            return live

    def forget(self, migration_id):
        with self.live_lock:
            self.live.pop(migration_id, None)

    def close(self):
        with self._backend_lock:
            if self._backend is not None:
                self._backend.close()
                self._backend = None
