"""Registered memory: page-aligned blocks carved into pool buffers.

A ``Region`` is one block (one MR when registered by ``RdmaDevice``),
cut into buffers a page apart; ``RegionPool`` is the
``buffers.BufferPool`` over it.
"""

import ctypes
import mmap

from dtn_migrate.transfer import buffers

PAGE_SIZE = mmap.PAGESIZE


def stride_for(size):
    """Distance between buffers: ``size`` rounded up to a whole page.

    Every buffer is then page aligned (O_DIRECT friendly).
    """
    if size < 1:
        raise ValueError("buffer size must be positive")
    return -(-size // PAGE_SIZE) * PAGE_SIZE


def allocate_block(length):
    """Anonymous page-aligned memory for a pool: ``(mmap, address)``.

    The memory belongs to Python (it stays valid while any view of it
    lives, even after the MR is deregistered) and is excluded from
    fork(), as ibv_fork_init would do: a child must not take copy-on-write
    pages that the adapter has pinned.
    """
    block = mmap.mmap(-1, length, flags=mmap.MAP_PRIVATE,
                      prot=mmap.PROT_READ | mmap.PROT_WRITE)
    for advice in ("MADV_DONTFORK", "MADV_HUGEPAGE"):
        if hasattr(mmap, advice):
            try:
                block.madvise(getattr(mmap, advice))
            except OSError:
                pass
    anchor = ctypes.c_char.from_buffer(block)
    address = ctypes.addressof(anchor)
    del anchor
    return block, address


class Region:
    """``count`` buffers of ``size`` bytes carved from one memory block.

    ``memory`` is any writable buffer whose first byte is at ``address``
    (for RDMA: the block registered as one MR with keys ``lkey`` and
    ``rkey``).  Buffers are zero-copy views of it, ``stride`` bytes apart.
    """

    def __init__(self, memory, address, count, size, lkey=0, rkey=0,
                 stride=None, mr=None, owner=None):
        if count < 1:
            raise ValueError("a region needs at least one buffer")
        self.stride = stride_for(size) if stride is None else stride
        if self.stride < size:
            raise ValueError("stride smaller than the buffer size")
        self.view = memoryview(memory).cast("B")
        if self.view.readonly:
            raise ValueError("region memory is read-only")
        if len(self.view) < count * self.stride:
            raise ValueError("region memory holds %d bytes, %d needed"
                             % (len(self.view), count * self.stride))
        self.memory = memory
        self.address = address
        self.count = count
        self.size = size
        self.lkey = lkey
        self.rkey = rkey
        self.mr = mr
        self.owner = owner
        self._views = [None] * count

    def allocator(self, index, size):
        """``buffers.BufferPool`` allocator: the view of buffer ``index``."""
        if not 0 <= index < self.count:
            raise IndexError("buffer %d outside a %d-buffer region"
                             % (index, self.count))
        if size > self.size:
            raise ValueError("buffer of %d bytes asked of a region of "
                             "%d-byte buffers" % (size, self.size))
        start = index * self.stride
        view = self.view[start:start + size]
        self._views[index] = view
        return view

    def address_of(self, buf):
        """Address of a ``buffers.Buffer`` handed out by this region."""
        index = buf.index
        if not 0 <= index < self.count or self._views[index] is not buf.view:
            raise ValueError("buffer %r is not from this region" % (index,))
        return self.address + index * self.stride

    def make_pool(self):
        return RegionPool(self)


class RegionPool(buffers.BufferPool):
    """A buffer pool over one ``Region``; holds the region (and its MR)."""

    def __init__(self, region):
        super().__init__(region.count, region.size, region.allocator)
        self.region = region


def memlock_hint(length):
    try:
        import resource
        soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    except (ImportError, OSError, ValueError):
        return ""
    if soft == resource.RLIM_INFINITY or soft >= length:
        return ""
    return (" (RLIMIT_MEMLOCK is %d bytes: raise it, e.g. LimitMEMLOCK="
            "infinity for the service)" % soft)
