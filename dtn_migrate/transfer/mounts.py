"""What file system a path lives on, from /proc/self/mountinfo."""

import collections
import ctypes
import os

Mount = collections.namedtuple("Mount", "mount_point fstype source options")

_libc = ctypes.CDLL(None, use_errno=True)

# Memory-backed file systems: preallocating on them only zero-fills RAM.
MEMORY_FS = frozenset(("tmpfs", "ramfs"))


def _unescape(field):
    """mountinfo escapes space, tab, newline and backslash as \\ooo."""
    out = []
    i = 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


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
                            _unescape(tail[1]), options))
    return mounts


def mount_of(path, mountinfo="/proc/self/mountinfo"):
    """The mount holding ``path`` (the last, longest matching mount)."""
    try:
        with open(mountinfo) as f:
            mounts = parse_mountinfo(f.read())
    except OSError:
        return None
    real = os.path.realpath(path)
    best = None
    for m in mounts:
        mp = m.mount_point.rstrip("/") or "/"
        if real == mp or real.startswith(mp + "/") or mp == "/":
            if best is None or len(mp) >= len(best.mount_point.rstrip("/")
                                              or "/"):
                best = m
    return best


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
