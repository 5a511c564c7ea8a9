"""The outcome of a migration: saved, reported to the source (a failed
import), notified, and its staged files removed; and the outcomes that
a database error kept from being saved.

A migration whose worker ends on a database error (the database is down
or restarting) is *stranded*: its outcome, when it has one, is kept in
memory, and :meth:`Outcomes.recover` saves it (or runs the flow again)
as soon as the database answers.  A request never reuses a record that
has no live worker: it settles a stranded one first.
"""

from oslo_log import log as logging

from dtn_migrate.common import states
from dtn_migrate.engine import persistence
from dtn_migrate.engine import records
from dtn_migrate import exception

LOG = logging.getLogger(__name__)


class Outcomes:
    """Migrations' outcomes: saved, told and cleaned up; and those a
    database error stranded, settled once it answers (a mixin of
    :class:`migrations.Migrations`; needs conf, store, res, lock,
    pending, stranded, progress_written and finished, and ``get``,
    ``notify``, ``_submit``, ``_let_go`` and ``_wanted_again``).
    """

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
        changes = dict(changes,
                       cleanup=records.CLEANUP_PENDING if why else None)
        try:
            meta = self.store.save(migration_id, finished_at=records.now(),
                                   **changes)
        except persistence.DATABASE_ERRORS:
            with self.lock:
                self.stranded[migration_id] = changes
            raise
        with self.lock:
            self.stranded.pop(migration_id, None)
            self.progress_written.pop(migration_id, None)
        if state != "complete" and meta["direction"] == records.INCOMING:
            self._report_failure(meta)
        record = self.get(meta["migration_id"])
        if state == "complete":
            LOG.info("%s migration %s complete", meta["direction"],
                     meta["migration_id"])
            self.notify("end", record)
        else:
            self.notify("error", record)
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
        if meta["direction"] == records.OUTGOING and \
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
            left = self.store.records({"cleanup": records.CLEANUP_PENDING,
                                       "state": list(states.FINAL_STATES)},
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
                meta = records.saved(self.store.record, migration_id)
                if meta is not None and \
                        meta.get("cleanup") == records.CLEANUP_PENDING and \
                        meta["state"] in states.FINAL_STATES:
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
        loaded = records.saved(self.store.load, migration_id, lazy=True)
        if loaded is None or changes is None:
            del self.stranded[migration_id]
            if loaded is not None:
                LOG.info("migration %s: runs again after a database error",
                         migration_id)
                self._submit(migration_id, loaded[2]["direction"])
            return
        # Under the lock: the next sweep removes the staged files.
        records.saved(self._close, loaded[2], changes, remove=False)
        LOG.info("migration %s: its outcome (%s) saved after a database "
                 "error", migration_id, changes["state"])

    def _report_failure(self, meta):
        try:
            self.res.command(
                meta["migration_id"], "set_import_report",
                meta["transfer_id"],
                {"state": "failed", "error": meta.get("error"),
                 "attempt": meta.get("attempt") or 1})
        except Exception as exc:  # noqa: B902 - the source times out
            LOG.warning("could not report the failed import of %s: %s",
                        meta["transfer_id"], exc)
