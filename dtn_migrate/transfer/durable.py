"""Durable file updates: the one way the transfer engine replaces a
small file (a manifest, a record, a report, a watermark, a hash
checkpoint, the object log's index).

The new content goes to a temporary file beside the target, which is
fsynced, renamed over the target, and the directory fsynced: after a
crash, a reader finds the old content or the new one, whole, never a
mix and never an empty file.  Only ``os`` calls (``open``, ``write``,
``fsync``, ``rename``), so that the crash tests that patch them see
every step.
"""

import os

#: Permissions of a new file (before the umask).
FILE_MODE = 0o644


def fsync_dir(path):
    """fsync the directory ``path`` (its entries: a create, a rename)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path, data, mode=FILE_MODE, tmp=None):
    """Replace ``path`` with ``data`` (bytes) durably, through ``tmp``
    (default: ``<path>.tmp``).
    """
    tmp = tmp or path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC,
                 mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))
