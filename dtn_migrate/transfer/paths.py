"""Confine file names from the network to a staging root.

A name is a relative POSIX path.  It is refused if it is empty, absolute,
contains NUL or other control characters, has an empty, ``.`` or ``..``
component, or starts with the reserved partial-data directory.  Files are
then opened component by component with ``O_NOFOLLOW`` relative to a
directory file descriptor, so a symlink anywhere on the path (including
one planted after the name was checked) is refused rather than followed.
"""

import errno
import os
import stat

from dtn_migrate.transfer import errors
from dtn_migrate.transfer import protocol

PARTIAL_DIR = ".dtn-partial"

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO must not wait for a writer.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def check_name(name):
    """Return the name's components, or raise BadNameError."""
    if not isinstance(name, str) or not name:
        raise errors.BadNameError("empty file name")
    if len(name.encode("utf-8", "surrogatepass")) > protocol.MAX_NAME:
        raise errors.BadNameError("file name longer than %d bytes"
                                  % protocol.MAX_NAME)
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        raise errors.BadNameError("file name %r contains a control "
                                  "character or NUL" % name)
    if name.startswith("/"):
        raise errors.BadNameError("absolute file name %r" % name)
    parts = name.split("/")
    for part in parts:
        if part in ("", ".", ".."):
            raise errors.BadNameError(
                "file name %r has an empty, '.' or '..' component" % name)
        if len(part.encode("utf-8", "surrogatepass")) > protocol.MAX_COMPONENT:
            raise errors.BadNameError("file name component longer than %d "
                                      "bytes" % protocol.MAX_COMPONENT)
    if parts[0] == PARTIAL_DIR:
        raise errors.BadNameError("file name %r uses the reserved %s "
                                  "directory" % (name, PARTIAL_DIR))
    return parts


class StagingRoot:
    """A directory under which all sink writes (and source reads) stay."""

    def __init__(self, path):
        self.path = os.path.realpath(path)
        os.makedirs(self.path, exist_ok=True)

    def open_root(self):
        return os.open(self.path, _DIR_FLAGS)

    def open_dir(self, parts, create, mode=0o750):
        """Open the directory holding ``parts[-1]``; return its fd."""
        return self._walk(parts[:-1], create, mode)

    def _walk(self, dirs, create, mode):
        """fd of root/dirs[0]/dirs[1]/..., never following a symlink."""
        fd = self.open_root()
        try:
            for part in dirs:
                try:
                    nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    try:
                        os.mkdir(part, mode, dir_fd=fd)
                    except FileExistsError:
                        pass
                    nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise errors.BadNameError(
                            "path component %r is a symlink or not a "
                            "directory" % part)
                    raise
                os.close(fd)
                fd = nfd
            return fd
        except BaseException:
            os.close(fd)
            raise

    def check_dirs(self, parts):
        """Refuse now if an existing directory on the path is a symlink
        (it is checked again, race-free, when the file is installed).
        """
        try:
            os.close(self.open_dir(parts, create=False))
        except FileNotFoundError:
            pass

    def stat(self, name):
        """lstat a confined name; None if it does not exist."""
        parts = check_name(name)
        try:
            dfd = self.open_dir(parts, create=False)
        except (FileNotFoundError, errors.BadNameError):
            return None
        try:
            st = os.stat(parts[-1], dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        finally:
            os.close(dfd)
        return st

    def open_read(self, name):
        """Open a confined regular file for reading (source side)."""
        parts = check_name(name)
        dfd = self.open_dir(parts, create=False)
        try:
            return open_regular_at(dfd, parts[-1], repr(name))[0]
        finally:
            os.close(dfd)

    def partial_dir(self, transfer_hex):
        """fd of ``<root>/.dtn-partial/<transfer>`` (created)."""
        return self._walk((PARTIAL_DIR, transfer_hex), True, 0o700)

    def remove_partial_dir(self, transfer_hex):
        """Remove an empty per-transfer partial directory, if it is."""
        fd = self.open_root()
        try:
            pfd = os.open(PARTIAL_DIR, _DIR_FLAGS, dir_fd=fd)
            try:
                os.rmdir(transfer_hex, dir_fd=pfd)
            finally:
                os.close(pfd)
        except OSError:
            pass
        finally:
            os.close(fd)


def open_regular_at(dfd, name, what):
    """Open regular file ``name`` of directory ``dfd`` for reading, never
    through a symlink; return (fd, its stat).  ``what`` names it in errors.
    """
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dfd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise errors.BadNameError("%s is a symlink" % what)
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise errors.BadNameError("%s is not a regular file" % what)
    return fd, st


def open_regular(path):
    """Open the regular file at ``path`` for reading: its directory by
    path, then the file relative to it without following a symlink;
    return (fd, its stat).
    """
    dfd = os.open(os.path.dirname(path) or ".",
                  os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return open_regular_at(dfd, os.path.basename(path), path)
    finally:
        os.close(dfd)


def resolve_source(root, path):
    """Map a source path (absolute or relative to ``root``) to a confined
    relative name, refusing anything outside ``root``.
    """
    full = os.path.realpath(os.path.join(root.path, path))
    if os.path.commonpath([full, root.path]) != root.path or full == root.path:
        raise errors.BadNameError("%r is outside the staging root %s"
                                  % (path, root.path))
    rel = os.path.relpath(full, root.path)
    check_name(rel)
    return rel
