"""Backend over a local path: the kernel-mounted export (production) or
any directory (tests, a DTN staging onto its own disk).

With ``direct_io`` (the default), aligned blocks are written and read
with ``O_DIRECT``, past the page cache (``transfer.direct``): a staged
file is written once and read back once, and on a VM whose free memory
goes back to the host a new cached page costs several times a copy.
Each reader and writer copies its blocks through one aligned buffer of
its own, unless a block to write is page-aligned already (the copy
engine's pooled blocks); the short last block of a file goes through
the page cache.
"""

import os

from dtn_migrate.staging import backend
from dtn_migrate.transfer import buffers
from dtn_migrate.transfer import direct


def _fail(exc, what):
    return backend.error_for_errno(exc.errno, "%s: %s" % (what, exc.strerror))


class _Direct:
    """The O_DIRECT side of a reader or writer: a second descriptor and
    an aligned buffer, dropped for good if the file system refuses.
    """

    def __init__(self, fd, enabled):
        self.dfd = direct.reopen(fd) if enabled else None
        self.scratch = None

    def buffer(self, length):
        want = -(-length // direct.ALIGN) * direct.ALIGN
        if self.scratch is None or len(self.scratch) < want:
            self.scratch = buffers.aligned(want)
        return self.scratch

    def refused(self):
        dfd, self.dfd = self.dfd, None
        os.close(dfd)

    def close(self):
        if self.dfd is not None:
            self.refused()
        self.scratch = None


class FileWriter(backend.Writer):
    def __init__(self, fd, path, direct_io=False):
        self.fd = fd
        self.path = path
        self.direct = _Direct(fd, direct_io)

    def pwrite(self, data, offset):
        view = memoryview(data)
        if self.direct.dfd is not None and view.nbytes and \
                not offset % direct.ALIGN and not view.nbytes % direct.ALIGN:
            self._pwrite_direct(view, offset)
            return
        try:
            while view:
                n = os.pwrite(self.fd, view, offset)
                view = view[n:]
                offset += n
        except OSError as exc:
            raise _fail(exc, "write %s" % self.path) from exc

    def _pwrite_direct(self, view, offset):
        length = view.nbytes
        view = view.cast("B")
        if direct.aligned(view, offset, length):
            scratch = view          # a page-aligned block: as it is
        else:
            scratch = self.direct.buffer(length)
            scratch[:length] = view
        try:
            if not direct.pwrite(self.fd, scratch, length, offset,
                                 self.direct.dfd):
                self.direct.refused()
        except OSError as exc:
            raise _fail(exc, "write %s" % self.path) from exc

    def truncate(self, size):
        try:
            os.ftruncate(self.fd, size)
        except OSError as exc:
            raise _fail(exc, "truncate %s" % self.path) from exc

    def commit(self):
        try:
            os.fdatasync(self.fd)
        except OSError as exc:
            raise _fail(exc, "commit %s" % self.path) from exc

    def close(self):
        self.direct.close()
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)


class FileReader(backend.Reader):
    def __init__(self, fd, path, direct_io=False):
        self.fd = fd
        self.path = path
        self.direct = _Direct(fd, direct_io)

    def pread(self, size, offset):
        try:
            if self.direct.dfd is not None and size > 0 and \
                    not offset % direct.ALIGN:
                scratch = self.direct.buffer(size)
                return bytes(scratch[:self._direct_into(scratch, size,
                                                        offset)])
            return os.pread(self.fd, size, offset)
        except OSError as exc:
            raise _fail(exc, "read %s" % self.path) from exc

    def readinto(self, view, offset, length=None):
        """Straight into ``view``: with O_DIRECT when ``view`` is
        page-aligned and holds ``length`` rounded up to a page, else
        through the page cache; no copy either way.
        """
        view = memoryview(view)     # a slice of it is no copy
        length = len(view) if length is None else length
        try:
            if self.direct.dfd is not None and length > 0:
                return self._direct_into(view, length, offset)
            return direct.preadinto(self.fd, view, length, offset)[0]
        except OSError as exc:
            raise _fail(exc, "read %s" % self.path) from exc

    def _direct_into(self, view, length, offset):
        n, usable = direct.preadinto(self.fd, view, length, offset,
                                     self.direct.dfd)
        if not usable:
            self.direct.refused()
        return n

    def close(self):
        self.direct.close()
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)


class LocalBackend(backend.Backend):
    """Files under ``root``, which must exist.  Names are confined to it:
    symlinks are not followed out of it.
    """

    def __init__(self, root, direct_io=True):
        self.root = os.path.realpath(root)
        self.direct_io = direct_io
        if not os.path.isdir(self.root):
            raise backend.StagingNotFound(
                "staging directory %s does not exist" % root)

    def path(self, name):
        path = os.path.join(self.root, backend.check_name(name))
        real = os.path.realpath(path)
        if real != path and not real.startswith(self.root + os.sep):
            raise ValueError("staging name %r leaves %s" % (name, self.root))
        return path

    def open_write(self, name, sync=False, truncate=False):
        path = self.path(name)
        flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
        if sync:
            flags |= os.O_DSYNC
        if truncate:
            flags |= os.O_TRUNC
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd = os.open(path, flags, 0o644)
        except OSError as exc:
            raise _fail(exc, "open %s for writing" % path) from exc
        try:
            return FileWriter(fd, path, self.direct_io)
        except OSError as exc:
            os.close(fd)
            raise _fail(exc, "open %s for writing" % path) from exc

    def open_read(self, name):
        path = self.path(name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError as exc:
            raise _fail(exc, "open %s" % path) from exc
        try:
            return FileReader(fd, path, self.direct_io)
        except OSError as exc:
            os.close(fd)
            raise _fail(exc, "open %s" % path) from exc

    def size(self, name):
        try:
            return os.stat(self.path(name)).st_size
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _fail(exc, "stat %s" % name) from exc

    def _unless_missing(self, op, name, what):
        """``op(path of name)``; a missing name is not an error."""
        try:
            op(self.path(name))
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise _fail(exc, "%s %s" % (what, name)) from exc

    def remove(self, name):
        self._unless_missing(os.unlink, name, "remove")

    def rename(self, old, new):
        try:
            os.replace(self.path(old), self.path(new))
        except OSError as exc:
            raise _fail(exc, "rename %s to %s" % (old, new)) from exc

    def rmdir(self, name):
        self._unless_missing(os.rmdir, name, "rmdir")

    def free_bytes(self):
        st = os.statvfs(self.root)
        return st.f_bavail * st.f_frsize

    def total_bytes(self):
        st = os.statvfs(self.root)
        return st.f_blocks * st.f_frsize
