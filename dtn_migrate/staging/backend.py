"""The interface every staging backend offers, and the errors of the
whole staging package (one hierarchy under :class:`StagingError`).

A backend is a directory on a DTN's export.  Names are relative to it
and are checked with :func:`check_name`.  Writers expose the durability
point explicitly: bytes are durable only once :meth:`Writer.commit`
returned (fsync on a kernel mount, NFS COMMIT or FILE_SYNC writes in
libnfs), and only durable bytes may be published to the transfer engine.
"""

import abc
import errno
import posixpath

from dtn_migrate.staging import retry


class StagingError(Exception):
    """A staging operation failed; the message says what and where."""

    retryable = False


class StagingNotFound(StagingError):
    """A staged file or the staging directory does not exist."""


class NoSpace(StagingError):
    """The export cannot hold the data (ENOSPC, EDQUOT, or the free-space
    check before staging).
    """


class ReadOnly(StagingError):
    pass


class PermissionDenied(StagingError):
    pass


class NotEmpty(StagingError):
    """A directory to remove still holds something."""


class StaleHandle(StagingError):
    """The server no longer knows the file handle (ESTALE)."""

    retryable = True


class Unavailable(StagingError):
    """The server cannot be reached or stopped answering."""

    retryable = True


class BadMount(StagingError):
    """A kernel path is not an NFS mount, or is off the required profile."""


class ShortData(StagingError):
    """A source delivered fewer or more bytes than declared."""


# The copy engine (copy.py, stream.py and copycommon.py).

class CopyCancelled(StagingError):
    """The caller's cancel event was set."""


class ChecksumMismatch(StagingError):
    """The data's sha512 is not the expected one."""


class CopyStalled(StagingError):
    """A followed file stopped growing for longer than allowed."""


class WriterFailed(StagingError):
    """The writer of a followed file gave up."""


class WriterMismatch(WriterFailed, ChecksumMismatch):
    """The writer of a followed file found its sha512 wrong (the sink's
    ``mismatch`` state).
    """


# The libnfs backend (libnfs.py).

class LibraryMissing(StagingError):
    """libnfs 4.0 (libnfs.so.13) cannot be loaded."""


class ConnectionLost(Unavailable):
    """The connection to the NFS server failed or an RPC timed out."""


class WritesLost(Unavailable):
    """The connection was lost while unstable writes were uncommitted:
    everything written since the last successful commit must be written
    again.
    """


class AmbiguousStatus(StagingError):
    """One of the parallel RPCs of a large libnfs read or write failed,
    but libnfs reported the status of another one.
    """


_ERRNO = {
    errno.ENOENT: StagingNotFound,
    errno.ENOSPC: NoSpace,
    errno.EDQUOT: NoSpace,
    errno.EFBIG: NoSpace,
    errno.EROFS: ReadOnly,
    errno.EACCES: PermissionDenied,
    errno.EPERM: PermissionDenied,
    errno.ESTALE: StaleHandle,
    errno.ENOTEMPTY: NotEmpty,
    errno.EIO: Unavailable,
    errno.ETIMEDOUT: Unavailable,
    errno.ECONNREFUSED: Unavailable,
    errno.ECONNRESET: Unavailable,
    errno.EPIPE: Unavailable,
    errno.ENOTCONN: Unavailable,
    errno.EHOSTUNREACH: Unavailable,
}


def error_for_errno(err, message):
    """The StagingError subclass for an errno value (positive)."""
    return _ERRNO.get(abs(err or 0), StagingError)(message)


def check_name(name):
    """Return ``name`` normalised, or raise ValueError for a name that is
    empty, absolute, contains NUL or a ``..`` component.
    """
    if not isinstance(name, str) or not name or "\0" in name:
        raise ValueError("invalid staging name %r" % (name,))
    if name.startswith("/"):
        raise ValueError("absolute staging name %r" % (name,))
    parts = name.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise ValueError("staging name %r has an empty, '.' or '..' "
                         "component" % (name,))
    return posixpath.normpath(name)


class Writer(abc.ABC):
    """An open file on the export, being written."""

    @abc.abstractmethod
    def pwrite(self, data, offset):
        """Write all of ``data`` at ``offset`` (may be unstable)."""

    @abc.abstractmethod
    def commit(self):
        """Make every byte written so far durable on the server."""

    @abc.abstractmethod
    def close(self):
        """Release the handle (does not imply commit)."""

    def truncate(self, size):
        """Set the file's size to ``size``: bytes beyond it are dropped,
        a grown part reads as zeros without being written (a hole where
        the file system has them).  Durable after :meth:`commit`.
        Backends that cannot raise NotImplementedError; the local copy
        then writes zero blocks as data.
        """
        raise NotImplementedError(
            "%s cannot truncate" % type(self).__name__)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Reader(abc.ABC):
    """An open file on the export, being read."""

    @abc.abstractmethod
    def pread(self, size, offset):
        """Up to ``size`` bytes at ``offset``; fewer only at end of file."""

    def readinto(self, view, offset, length=None):
        """Read up to ``length`` bytes (all of ``view`` when None) at
        ``offset`` into the start of the writable ``view``; the number
        read, fewer only at end of file.  ``view`` may be longer than
        ``length``: backends that read in aligned units use the slack.
        This default copies what :meth:`pread` gives.
        """
        length = len(view) if length is None else length
        data = self.pread(length, offset)
        view[:len(data)] = data
        return len(data)

    @abc.abstractmethod
    def close(self):
        """Release the handle."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Backend(abc.ABC):
    """A directory on a DTN's export."""

    #: Largest useful request size, or None when the backend cannot tell.
    max_io = None

    @abc.abstractmethod
    def open_write(self, name, sync=False, truncate=False):
        """A :class:`Writer` for ``name``, created if missing (parent
        directories too).  ``sync`` makes every write stable on its own
        (O_SYNC / FILE_SYNC); otherwise writes are unstable until
        :meth:`Writer.commit`.
        """

    @abc.abstractmethod
    def open_read(self, name):
        """A :class:`Reader` for ``name``."""

    @abc.abstractmethod
    def size(self, name):
        """Size of ``name`` in bytes, or None if it does not exist."""

    @abc.abstractmethod
    def remove(self, name):
        """Remove ``name``; a missing file is not an error."""

    @abc.abstractmethod
    def rename(self, old, new):
        """Atomically rename ``old`` over ``new``."""

    @abc.abstractmethod
    def rmdir(self, name):
        """Remove the empty directory ``name``; a missing one is not an
        error, one that still holds something raises :class:`NotEmpty`.
        """

    @abc.abstractmethod
    def free_bytes(self):
        """Bytes an unprivileged writer may still use on the export."""

    def total_bytes(self):
        """Size of the export's file system in bytes, or None when the
        backend cannot tell.
        """
        return None

    def write_small(self, name, data):
        """Atomically replace ``name`` with ``data`` (write, commit,
        rename), for watermarks and markers.
        """
        tmp = name + ".tmp"
        with self.open_write(tmp, truncate=True) as w:
            w.pwrite(data, 0)
            w.commit()
        self.rename(tmp, name)

    def read_small(self, name, limit=4096, attempts=3):
        """Content of a small file, or None if it does not exist.  A file
        replaced by rename while it is opened (another client's
        :meth:`write_small`) is read again.
        """
        def read(attempt):
            try:
                if self.size(name) is None:
                    return None
                with self.open_read(name) as r:
                    return r.pread(limit, 0)
            except StagingNotFound:
                return None

        return retry.call(read, lambda exc: isinstance(exc, StaleHandle),
                          retry.tries(attempts), retry.NO_WAIT)

    def close(self):
        """Release the connection to the export, if any."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
