"""Whether the sink's staging file system has room for a file: its free
space, less the ``min_free_bytes`` reserve.

The one check behind a new partial copy (``SinkSession``) and a peer's
preflight (``SinkServer.room_for``), which asks before the first byte.
"""

import os

from dtn_migrate.transfer import errors


def free_bytes(where):
    """Bytes free for an unprivileged writer on the file system of
    ``where`` (a path or a directory's fd).
    """
    vfs = os.statvfs(where)
    return vfs.f_bavail * vfs.f_frsize


def check_free(name, size, free, reserve):
    """NoSpaceError unless ``free`` bytes hold ``size`` bytes of file
    ``name`` and the ``reserve``.
    """
    if size + reserve > free:
        raise errors.NoSpaceError(
            "not enough space for %s: needs %d bytes (+%d reserve), "
            "%d free" % (name, size, reserve, free))
