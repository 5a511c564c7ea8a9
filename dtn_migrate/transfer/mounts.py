"""What file system a path lives on, from /proc/self/mountinfo."""

import collections
import ctypes
import os
import re

# ``root``: the directory of the mounted file system that appears at
# ``mount_point`` (not "/" for bind mounts of a subdirectory).
Mount = collections.namedtuple("Mount",
                               "mount_point fstype source options root")

_libc = ctypes.CDLL(None, use_errno=True)
_ESCAPE = re.compile(r"\\([0-7]{3})")

# Memory-backed file systems: preallocating on them only zero-fills RAM.
MEMORY_FS = frozenset(("tmpfs", "ramfs"))


def _unescape(field):
    """mountinfo escapes space, tab, newline and backslash as \\ooo."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), field)


def parse_mountinfo(text):
    """Mounts from mountinfo text (see proc(5)), in file order."""
    mounts = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields = left.split()
        tail = right.split()
        if len(fields) < 6 or len(tail) < 2:
            continue
        options = fields[5].split(",")
        if len(tail) > 2:
            options += tail[2].split(",")
        mounts.append(Mount(_unescape(fields[4]), tail[0],
                            _unescape(tail[1]), options,
                            _unescape(fields[3])))
    return mounts


def find_mount(mounts, path):
    """The mount of ``mounts`` holding ``path`` (the last, longest
    matching one).
    """
    real = os.path.realpath(path)
    best = None
    for m in mounts:
        mp = m.mount_point.rstrip("/") or "/"
        if real == mp or real.startswith(mp + "/") or mp == "/":
            if best is None or len(mp) >= len(best.mount_point.rstrip("/")
                                              or "/"):
                best = m
    return best


def mount_of(path, mountinfo="/proc/self/mountinfo"):
    """The mount holding ``path``, or None if mountinfo is unreadable."""
    try:
        with open(mountinfo) as f:
            return find_mount(parse_mountinfo(f.read()), path)
    except OSError:
        return None


def is_memory_fs(path):
    m = mount_of(path)
    return m is not None and m.fstype in MEMORY_FS


def syncfs(fd):
    """Flush the whole file system holding ``fd`` (syncfs(2)): one journal
    commit for many files instead of one fdatasync each.  Raises OSError;
    since Linux 5.8 that includes write-back errors of any file on it.
    """
    if _libc.syncfs(fd) != 0:
        err = ctypes.get_errno()
        raise OSError(err, "syncfs: %s" % os.strerror(err))
