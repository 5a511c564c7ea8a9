"""Sink durability: sync batches, BLOCK_SYNC, verification and
installation of complete files.

Written objects join a batch; the syncer makes a batch durable (fdatasync
of each file, or one syncfs for a batch of many files) and only then
reports it with BLOCK_SYNC.  A file whose objects are all durable and
whose sha512 (see ``sink.hash``) matches the source's is renamed to its
final name; its directory entry becomes durable with the next batch (one
directory fsync for all files installed meanwhile), and only then is it
reported complete.
"""

import logging
import os
import time

from dtn_migrate.transfer import errors
from dtn_migrate.transfer import mounts
from dtn_migrate.transfer import paths
from dtn_migrate.transfer.sink import file as sinkfile
from dtn_migrate.transfer.wire import protocol as P

LOG = logging.getLogger(__name__)

# A sync batch touching at least this many files (written or installed)
# flushes the file system once (syncfs) rather than each file and
# directory: small files cost one journal commit per batch, not per file.
SYNCFS_MIN_FILES = 8
COMPLETE_SYNC_DELAY = 0.01


class DurabilityMixin:
    """SinkSession's sync batches and file completion."""

    def _sync_within(self, delay):
        """Have the syncer run at most ``delay`` seconds from now (lock
        held).
        """
        due = time.monotonic() + delay
        if self.sync_due is None or due < self.sync_due:
            self.sync_due = due
            self.cond.notify_all()

    def _sync_loop(self):
        cfg = self.cfg
        while True:
            with self.cond:
                deadline = time.monotonic() + cfg.sync_interval
                while not self.closed:
                    due = deadline if self.sync_due is None else \
                        min(deadline, self.sync_due)
                    remaining = due - time.monotonic()
                    if remaining <= 0:
                        break
                    self.cond.wait(remaining)
                if self.closed:
                    return
                self.sync_due = None
            try:
                self._sync_now()
            except Exception:  # noqa: B902 - keep the syncer alive
                LOG.exception("sink: transfer %s: sync failed",
                              self.transfer_id)

    def _sync_now(self):
        """Make pending writes and installed files durable, then tell the
        source (BLOCK_SYNC, FILE_CLOSE).
        """
        with sinkfile.deferred_events(), self.sync_lock:
            with self.lock:
                batch, self.pending = self.pending, {}
                self.pending_bytes = 0
                installs, self.installed = self.installed, []
            live = [(f, i) for f, i in batch.items() if f.fd is not None]
            self._confirm([f for f, _ in live])
            whole = len(live) + len(installs) >= SYNCFS_MIN_FILES and \
                self._syncfs()
            if whole:
                synced = live
                for f, _ in live:
                    f.entry_durable = True
                self.pdir_durable = True
            else:
                synced = self._datasync(live)
            triples = []
            grew = []
            with self.lock:
                for f, indices in synced:
                    if f.state != "open" or self.files.get(f.file_id) is not f:
                        continue
                    indices.sort()
                    runs = sinkfile.ranges(f.file_id, indices)
                    for _, first, count in runs:
                        f.durable.add_range(first, first + count)
                    triples.extend(runs)
                    grew.append(f)
            if triples:
                self.outbox.post(P.BlockSync.from_ranges(triples))
            for f in grew:
                self.record.set_file(f.name, durable=f.durable_prefix())
                self._after_durable(f)
            self._confirm_installed(installs, dirs_durable=whole)
            # Files this batch completed (installed just now): their
            # directory entries are made durable at once, in one sync for
            # them all, rather than a batch later.
            with self.lock:
                installs, self.installed = self.installed, []
            if installs:
                whole = len(installs) >= SYNCFS_MIN_FILES and self._syncfs()
                self._confirm_installed(installs, dirs_durable=whole)

    def _syncfs(self):
        try:
            mounts.syncfs(self.pdir)
            return True
        except OSError as exc:
            # Fall back to per-file syncs, which say which file failed.
            LOG.warning("sink: transfer %s: syncfs failed (%s); syncing "
                        "file by file", self.transfer_id, exc)
            return False

    def _datasync(self, live):
        """fdatasync each file of the batch, then make the names of new
        partial copies durable (see the power-loss model in
        doc/source/architecture.rst); returns the files synced.
        """
        synced = []
        for f, indices in live:
            try:
                if self._sync_file(f):
                    synced.append((f, indices))
            except OSError as exc:
                self._fail(f, exc)
        fresh = [(f, i) for f, i in synced if not f.entry_durable]
        if not fresh:
            return synced
        try:
            self._sync_partial_dir()
        except OSError as exc:
            for f, _ in fresh:
                self._fail(f, exc)
            return [(f, i) for f, i in synced if f.entry_durable]
        for f, _ in fresh:
            f.entry_durable = True
        return synced

    def _sync_file(self, f):
        """fdatasync one file (fsync the first time: its inode is new).

        A RESTART may close the file meanwhile: its descriptor is taken
        under the lock and duplicated, so the sync never sees a closed
        or reused one.  False if the file was closed already.
        """
        with self.lock:
            if f.fd is None:
                return False
            fd = os.dup(f.fd)
        try:
            (os.fdatasync if f.entry_durable else os.fsync)(fd)
        finally:
            os.close(fd)
        return True

    def _sync_partial_dir(self):
        """fsync the partial directory (new entries in it), and the
        first time also the directories above it, up to the root.
        """
        os.fsync(self.pdir)
        if self.pdir_durable:
            return
        for parts in ([paths.PARTIAL_DIR, ""], [""]):
            dfd = self.root.open_dir(parts, create=False)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        self.pdir_durable = True

    def _after_durable(self, f):
        """The durable prefix of ``f`` grew: save a hash state kept for
        it, and complete the file if it is all there.
        """
        if f.hasher is not None:
            self._durable_checkpoint(f)
        self._maybe_finalize(f)

    def _maybe_finalize(self, f):
        with self.lock:
            if f.state != "open" or not f.durable.full:
                return
            if f.hasher is not None and (f.hashing or f.expected is None or
                                         f.hasher.offset < f.size):
                return
            f.state = "closing"
        digest = f.hasher.digest() if f.hasher is not None else bytes(64)
        if f.hasher is not None and digest != f.expected:
            with self.lock:
                f.state = "mismatch"
            message = ("sha512 of the received %s is %s..., the source "
                       "declared %s..." % (f.name, digest.hex()[:16],
                                           f.expected.hex()[:16]))
            LOG.error("sink: transfer %s: %s", self.transfer_id, message)
            self.record.set_file(f.name, state="mismatch", error=message)
            self.outbox.post(P.FileClose(f.file_id, P.CloseStatus.MISMATCH,
                                         errors.Code.HASH_MISMATCH, f.size,
                                         digest, message))
            return
        try:
            final = self._install(f, digest)
        except (OSError, errors.TransferError) as exc:
            with self.lock:
                f.state = "open"
            self._fail(f, exc, getattr(exc, "code", None))
            return
        # Readers following the file find it under its new name at once;
        # it is reported complete only once its entry is durable.
        self.record.set_file(f.name, path=final)
        # Its directory entry becomes durable with the next sync batch
        # (one directory fsync for all files installed meanwhile); only
        # then is the file reported complete.
        with self.lock:
            self.installed.append((f, digest, final))
            self._sync_within(COMPLETE_SYNC_DELAY)

    def _confirm_installed(self, batch, dirs_durable=False):
        """Make the directory entries of installed files durable (unless a
        syncfs already did), then report the files complete.
        """
        failed = {}
        if not dirs_durable:
            # Every directory on the way too: _install may have made some.
            keys = {tuple(f.parts[:-1]) for f, _, _ in batch}
            for key in sorted({k[:n] for k in keys
                               for n in range(len(k) + 1)}):
                try:
                    dfd = self.root.open_dir(list(key) + [""], create=False)
                    try:
                        os.fsync(dfd)
                    finally:
                        os.close(dfd)
                except (OSError, errors.TransferError) as exc:
                    failed[key] = exc
        for f, digest, final in batch:
            key = tuple(f.parts[:-1])
            exc = next((failed[key[:n]] for n in range(len(key) + 1)
                        if key[:n] in failed), None)
            if exc is not None:
                self._fail(f, exc, getattr(exc, "code", None))
                continue
            with self.lock:
                f.state = "done"
                self.files.pop(f.file_id, None)
                self.retired.add(f.file_id)
            # verified: its sha512 was compared with the source's.
            self.record.set_file(f.name, state="done", durable=f.size,
                                 path=final, verified=f.hasher is not None)
            self.outbox.post(P.FileClose(f.file_id, P.CloseStatus.OK, 0,
                                         f.size, digest))

    def _install(self, f, digest):
        """Give the verified partial copy its final name and metadata."""
        os.fchmod(f.fd, f.mode or 0o644)
        if f.mtime_ns:
            os.utime(f.fd, ns=(f.mtime_ns, f.mtime_ns))
        if f.hasher is not None:
            try:
                os.setxattr(f.fd, sinkfile.XATTR_SHA512, digest.hex().encode())
            except OSError:
                pass
        dfd = self.root.open_dir(f.parts, create=True)
        try:
            try:
                os.rename(f.part, f.parts[-1], src_dir_fd=self.pdir,
                          dst_dir_fd=dfd)
            except IsADirectoryError:
                raise errors.BadNameError("%s exists as a directory" % f.name)
        finally:
            os.close(dfd)
        self._close_file(f)
        if f.has_sidecar:
            self._unlink(f.sidecar)
        self._confirm([f])
        return os.path.join(self.root.path, f.name)
