"""Zero extents at the source: holes and all-zero objects.

An object that lies wholly in a hole (``SEEK_DATA`` finds no data in it)
is known to read as zeros without reading it; such runs of objects go as
one ZERO_BLOCKS.  An object that is read anyway is recognised as all zero
from the xxh3 already computed for it (compared with the xxh3 of that
many zero bytes), confirmed with one ``memcmp``: no extra pass over data
that is not zero.
"""

import ctypes
import errno
import functools
import os

from dtn_migrate.transfer import checksum

_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.memcmp.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
_LIBC.memcmp.restype = ctypes.c_int

_ZEROS = {}


def next_data(fd, offset, end):
    """The offset of the first byte at or after ``offset`` that may hold
    data, or ``end`` if ``[offset, end)`` is a hole.  Where the file
    system cannot tell (no SEEK_DATA), everything may hold data.
    """
    try:
        pos = os.lseek(fd, offset, os.SEEK_DATA)
    except OSError as exc:
        if exc.errno == errno.ENXIO:        # no data after offset
            return end
        return offset                       # EINVAL etc.: unknown
    return min(pos, end)


@functools.lru_cache(maxsize=64)
def zero_digest(length):
    """xxh3 of ``length`` zero bytes."""
    return checksum.xxh3(bytes(length))


def _zeros(length):
    buf = _ZEROS.get(length)
    if buf is None:
        buf = _ZEROS[length] = ctypes.create_string_buffer(length)
    return buf


def is_zero(view, digest=None):
    """Whether ``view`` (a writable buffer) holds only zero bytes; with
    its xxh3 ``digest`` given, anything else is ruled out without
    touching the bytes.
    """
    view = memoryview(view).cast("B")
    n = view.nbytes
    if not n:
        return True
    if digest is not None and digest != zero_digest(n):
        return False
    if view.readonly:
        return view.tobytes().count(0) == n
    addr = ctypes.addressof(ctypes.c_char.from_buffer(view))
    return _LIBC.memcmp(addr, _zeros(n), n) == 0


PAGE = 4096
SAMPLES = 16


def has_zero_runs(fd, offset, length, view, need=4):
    """Whether an object that is not all zero is worth sending as zero
    runs plus data (zstd level 1: runs compress to almost nothing): it
    has a hole inside (``SEEK_HOLE``), or ``need`` of ``SAMPLES`` pages
    spread over it are zero.  Cheap: one syscall and 16 ``memcmp``.
    """
    end = offset + length
    try:
        if os.lseek(fd, offset, os.SEEK_HOLE) < end:
            return True
    except OSError:
        pass
    pages = length // PAGE
    if pages < SAMPLES or view.readonly:
        return False
    step = pages // SAMPLES
    base = ctypes.addressof(ctypes.c_char.from_buffer(view))
    zero = _zeros(PAGE)
    found = 0
    for k in range(SAMPLES):
        if _LIBC.memcmp(base + k * step * PAGE, zero, PAGE) == 0:
            found += 1
            if found >= need:
                return True
    return False
