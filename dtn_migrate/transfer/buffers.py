"""A bounded pool of object buffers, and pinning of read-only buffers.

Buffers are allocated lazily up to ``count`` and then recycled, so the
memory an agent holds is bounded by the pool whatever the dataset size,
and an idle agent holds only what it has needed so far.  The RDMA data
plane supplies an allocator whose buffers live in registered memory.
"""

import contextlib
import ctypes
import mmap
import threading


class Buffer:
    __slots__ = ("index", "view")

    def __init__(self, index, view):
        self.index = index
        self.view = view


def aligned(size):
    """A writable, page-aligned buffer of ``size`` bytes.

    Kernel copies (read, recv) into a destination that is not 32-byte
    aligned can be several times slower (seen here: 1.7 GB/s instead of
    7.5 GB/s on AMD EPYC); malloc'ed memory, such as a bytearray's, sits
    16 bytes past an alignment boundary.  Anonymous mmap is page-aligned.
    """
    return memoryview(mmap.mmap(-1, max(size, 1)))[:size]


def aligned_allocator(index, size):
    return aligned(size)


class BufferPool:
    def __init__(self, count, size, allocator=aligned_allocator):
        if count < 1:
            raise ValueError("buffer pool needs at least one buffer")
        self.count = count
        self.size = size
        self._allocator = allocator
        self._free = []
        self._allocated = 0
        self._cond = threading.Condition()
        self._closed = False

    @property
    def allocated(self):
        """Buffers made so far (at most ``count``)."""
        with self._cond:
            return self._allocated

    @property
    def in_use(self):
        with self._cond:
            return self._allocated - len(self._free)

    def acquire(self, timeout=None):
        """A free buffer, or None on timeout or once the pool is closed."""
        with self._cond:
            while True:
                if self._closed:
                    return None
                if self._free:
                    return self._free.pop()
                if self._allocated < self.count:
                    buf = Buffer(self._allocated,
                                 self._allocator(self._allocated, self.size))
                    self._allocated += 1
                    return buf
                if not self._cond.wait(timeout):
                    return None

    def release(self, buf):
        with self._cond:
            self._free.append(buf)
            self._cond.notify()

    def close(self):
        """Wake all waiters; later acquires return None."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()


class _PyBuffer(ctypes.Structure):
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.c_void_p),
                ("len", ctypes.c_ssize_t), ("itemsize", ctypes.c_ssize_t),
                ("readonly", ctypes.c_int), ("ndim", ctypes.c_int),
                ("format", ctypes.c_char_p),
                ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("suboffsets", ctypes.c_void_p),
                ("internal", ctypes.c_void_p)]


# A handle of our own: ctypes.pythonapi's function objects are shared by
# every module, and another module's argtypes would replace ours.
PYAPI = ctypes.PyDLL(None)
_get_buffer = PYAPI.PyObject_GetBuffer
_get_buffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer),
                        ctypes.c_int]
_get_buffer.restype = ctypes.c_int
_release_buffer = PYAPI.PyBuffer_Release
_release_buffer.argtypes = [ctypes.POINTER(_PyBuffer)]
_release_buffer.restype = None


@contextlib.contextmanager
def pinned(data):
    """(address, length) of a contiguous bytes-like object, read-only
    ones included, without a copy, held for the duration of the block.
    """
    view = _PyBuffer()
    _get_buffer(data, ctypes.byref(view), 0)   # PyBUF_SIMPLE
    try:
        yield view.buf or 0, view.len
    finally:
        _release_buffer(ctypes.byref(view))
