"""Confine file names from the network to a staging root.

A name is a relative POSIX path.  It is refused if it is empty, absolute,
contains NUL or other control characters, has an empty, ``.`` or ``..``
component, or starts with the reserved partial-data directory.  Files are
then opened component by component with ``O_NOFOLLOW`` relative to a
directory file descriptor, so a symlink anywhere on the path (including
one planted after the name was checked) is refused rather than followed.

``confine`` holds a session's names to its own transfer: ``migration``
names are ``<transfer id>/<leaf>`` with a fixed set of leaves,
``transfer`` names anything under ``<transfer id>/``, ``any`` names
anything in the root but in the directory of another transfer.
"""

import errno
import os
import stat

from dtn_migrate.transfer import errors
from dtn_migrate.transfer.wire import protocol

PARTIAL_DIR = ".dtn-partial"

#: How far a session's names may reach (``confine``).
MIGRATION = "migration"
TRANSFER = "transfer"
ANY = "any"
CONFINEMENTS = (MIGRATION, TRANSFER, ANY)

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


def is_transfer_id(component):
    """Is ``component`` a transfer id (32 lower-case hex digits)?"""
    return len(component) == 32 and \
        all(c in "0123456789abcdef" for c in component)


def confine(name, transfer_hex, mode=ANY, leaves=()):
    """The components of ``name``, a file of transfer ``transfer_hex``,
    or BadNameError if ``mode`` does not let the transfer write it:

    * ``migration``: ``<transfer_hex>/<leaf>``, ``leaf`` one of
      ``leaves``;
    * ``transfer``: a file anywhere under ``<transfer_hex>/``;
    * ``any``: anywhere in the root, but under the directory of another
      transfer (a first component that is another transfer id).
    """
    parts = check_name(name)
    own = parts[0] == transfer_hex
    if mode == ANY:
        if not own and is_transfer_id(parts[0]):
            raise errors.BadNameError(
                "%r is in the directory of another transfer, %s"
                % (name, parts[0]))
        return parts
    if not own or len(parts) < 2:
        raise errors.BadNameError(
            "%r is not a file in this transfer's directory %s/"
            % (name, transfer_hex))
    if mode == MIGRATION and (len(parts) != 2 or parts[1] not in leaves):
        raise errors.BadNameError(
            "%r is not one of this transfer's files (%s)"
            % (name, ", ".join("%s/%s" % (transfer_hex, leaf)
                               for leaf in leaves)))
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

    def usage(self, transfer_hex):
        """(bytes, files) that transfer ``transfer_hex`` holds: the
        regular files under ``<root>/<transfer>/`` (not through a
        symlink) and its partial copies (apparent sizes).
        """
        nbytes = nfiles = 0
        for top, only in ((os.path.join(self.path, transfer_hex), None),
                          (os.path.join(self.path, PARTIAL_DIR,
                                        transfer_hex), ".part")):
            try:
                if not stat.S_ISDIR(os.lstat(top).st_mode):
                    continue
            except OSError:
                continue
            for dirpath, _dirs, files in os.walk(top):
                for name in files:
                    if only is not None and not name.endswith(only):
                        continue
                    try:
                        st = os.lstat(os.path.join(dirpath, name))
                    except OSError:
                        continue
                    if stat.S_ISREG(st.st_mode):
                        nbytes += st.st_size
                        nfiles += 1
        return nbytes, nfiles

    def partial_transfers(self):
        """The transfers with a partial directory."""
        try:
            names = os.listdir(os.path.join(self.path, PARTIAL_DIR))
        except OSError:
            return []
        return sorted(names)

    def partial_mtime(self, transfer_hex):
        """The newest modification time of a partial directory and its
        files (None if it is gone or not a directory).
        """
        try:
            pfd = self._walk((PARTIAL_DIR, transfer_hex), False, 0o700)
        except (OSError, errors.BadNameError):
            return None
        try:
            newest = os.fstat(pfd).st_mtime
            for name in os.listdir(pfd):
                try:
                    st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                newest = max(newest, st.st_mtime)
            return newest
        finally:
            os.close(pfd)

    def remove_partial(self, transfer_hex):
        """Remove a transfer's partial directory and the partial copies
        and checkpoints in it (never anything outside it).  Returns the
        number of files removed.
        """
        try:
            pfd = self._walk((PARTIAL_DIR, transfer_hex), False, 0o700)
        except (OSError, errors.BadNameError):
            return 0
        removed = 0
        try:
            for name in os.listdir(pfd):
                try:
                    os.unlink(name, dir_fd=pfd)
                    removed += 1
                except IsADirectoryError:
                    pass
                except OSError as exc:
                    if exc.errno not in (errno.ENOENT, errno.EISDIR,
                                         errno.EPERM):
                        raise
        finally:
            os.close(pfd)
        self.remove_partial_dir(transfer_hex)
        return removed

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
