"""Writes and reads that bypass the page cache (``O_DIRECT``).

A DTN writes each byte of a staged or received file once and reads it
back at most once, so the page cache buys it nothing, and a new
page-cache page can be dear: on a VM whose free memory goes back to the
host (free page reporting, ballooning), writing 1 GiB into new pages
cost 2.57 CPU-s here against 0.15 with ``O_DIRECT``
(``benchmarks.migration --page-cost``).

``O_DIRECT`` asks for aligned offsets, lengths and buffers.  These
helpers use it for what is aligned and fall back to the ordinary
descriptor for the rest (the short last object of a file, a buffer from
elsewhere) and for good where the file system refuses it (``EINVAL``).
Mixing both on one file is coherent: Linux writes back and drops the
cached pages of a range before a direct transfer of it.
"""

import ctypes
import errno
import fcntl
import os

# Alignment that suits every logical block size in use (512 and 4096).
ALIGN = 4096

_REFUSED = (errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENXIO,
            errno.ENOENT, errno.EACCES)
# statfs(2) f_type of tmpfs and ramfs, whose page cache is the file:
# O_DIRECT there (taken since Linux 6.6) saves nothing and adds a flush
# and an invalidation of the range to every write.
MEMORY_MAGIC = frozenset((0x01021994, 0x858458F6))
_libc = ctypes.CDLL(None, use_errno=True)


def memory_backed(fd):
    """True if ``fd`` is a file of tmpfs or ramfs."""
    buf = ctypes.create_string_buffer(256)    # struct statfs: 120 bytes
    if _libc.fstatfs(fd, buf) != 0:
        return False
    return ctypes.c_long.from_buffer(buf).value in MEMORY_MAGIC


def reopen(fd):
    """A second descriptor of the open file ``fd``, with ``O_DIRECT``
    and the same access mode and sync flags, or None where that is not
    available or buys nothing (tmpfs, ramfs).
    """
    flag = getattr(os, "O_DIRECT", 0)
    if not flag or memory_backed(fd):
        return None
    mode = fcntl.fcntl(fd, fcntl.F_GETFL) & (os.O_ACCMODE | os.O_DSYNC |
                                             os.O_SYNC)
    try:
        return os.open("/proc/self/fd/%d" % fd, mode | flag | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in _REFUSED:
            return None
        raise


def address(view):
    """The address of a writable buffer's first byte."""
    return ctypes.addressof(ctypes.c_char.from_buffer(view))


def aligned(view, offset, length):
    """True if ``length`` bytes of ``view`` at file ``offset`` can go
    through an ``O_DIRECT`` descriptor.
    """
    return (length > 0 and not offset % ALIGN and not length % ALIGN
            and not view.readonly and not address(view) % ALIGN)


def pwrite(fd, view, length, offset, direct_fd=None):
    """Write all of ``view[:length]`` at ``offset``: through
    ``direct_fd`` where it is aligned, the rest through ``fd``.

    Returns False if ``direct_fd`` refused the write (``EINVAL``: a
    file system or device that takes no direct I/O after all), so that
    the caller stops offering it; True otherwise.
    """
    done = 0
    usable = True
    if direct_fd is not None and aligned(view, offset, length):
        try:
            while done < length:
                n = os.pwrite(direct_fd, view[done:length], offset + done)
                done += n
                if n % ALIGN:
                    break       # the rest is no longer aligned
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            usable = False
    while done < length:
        done += os.pwrite(fd, view[done:length], offset + done)
    return usable


def preadinto(fd, view, length, offset, direct_fd=None):
    """Read up to ``length`` bytes at ``offset`` into ``view`` (through
    ``direct_fd`` where aligned, which may read up to the next
    ``ALIGN`` boundary: ``view`` must hold that much).  Returns (bytes
    read, whether ``direct_fd`` is still usable); fewer bytes only at
    the end of the file.
    """
    done = 0
    usable = True
    want = -(-length // ALIGN) * ALIGN
    if direct_fd is not None and len(view) >= want and \
            aligned(view, offset, want):
        try:
            while done < length:
                n = os.preadv(direct_fd, [view[done:want]], offset + done)
                if n <= 0:
                    return done, True
                done += n
                if n % ALIGN:
                    break
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            usable = False
    while done < length:
        n = os.preadv(fd, [view[done:length]], offset + done)
        if n <= 0:
            break
        done += n
    return min(done, length), usable
