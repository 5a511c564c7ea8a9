"""Backend over a local path: the kernel-mounted export (production) or
any directory (tests, a DTN staging onto its own disk)."""

import os

from dtn_migrate.staging import backend


def _fail(exc, what):
    return backend.error_for_errno(exc.errno, "%s: %s" % (what, exc.strerror))


class FileWriter(backend.Writer):
    def __init__(self, fd, path):
        self.fd = fd
        self.path = path

    def pwrite(self, data, offset):
        view = memoryview(data)
        try:
            while view:
                n = os.pwrite(self.fd, view, offset)
                view = view[n:]
                offset += n
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
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)


class FileReader(backend.Reader):
    def __init__(self, fd, path):
        self.fd = fd
        self.path = path

    def pread(self, size, offset):
        try:
            return os.pread(self.fd, size, offset)
        except OSError as exc:
            raise _fail(exc, "read %s" % self.path) from exc

    def close(self):
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)


class LocalBackend(backend.Backend):
    """Files under ``root``, which must exist.  Names are confined to it:
    symlinks are not followed out of it.
    """

    def __init__(self, root):
        self.root = os.path.realpath(root)
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
            return FileWriter(os.open(path, flags, 0o644), path)
        except OSError as exc:
            raise _fail(exc, "open %s for writing" % path) from exc

    def open_read(self, name):
        path = self.path(name)
        try:
            return FileReader(
                os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW),
                path)
        except OSError as exc:
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
