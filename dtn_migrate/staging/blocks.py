"""The local copy's source (:mod:`~dtn_migrate.staging.copy`): a path,
a file object, an iterable of chunks of any size, or a callable opening
one at an offset, opened at the resumed offset and cut into blocks
aligned to the block size.

A file object with ``readinto`` is read straight into pooled,
page-aligned buffers (the one copy there is); chunks are cut without
copying what the caller cannot change, and parts of a block are joined
once.  Every form checks the declared size: ShortData when the source
ends before it or goes beyond it, and the last block comes only once the
source is known to be exhausted.
"""

import os

from dtn_migrate.staging import backend as base
from dtn_migrate.staging import copycommon


def file_source(path):
    """A restartable source reading the file at ``path``."""
    def open_at(offset):
        f = open(path, "rb", buffering=0)
        f.seek(offset)
        return f
    return open_at


def _read_chunks(f, start, block):
    """Chunks of file object ``f`` cut at block boundaries."""
    offset = start
    while True:
        data = f.read(block - offset % block)
        if not data:
            return
        offset += len(data)
        yield data


def is_restartable(source):
    if isinstance(source, (str, os.PathLike)):
        return True
    if hasattr(source, "read"):
        seekable = getattr(source, "seekable", None)
        return bool(seekable and seekable())
    return callable(source)


def open_source(source, start):
    """(opened source, closer) of ``source`` positioned at ``start``: a
    file object or an iterable of chunks.  Restartable sources are moved
    there, others must already be.
    """
    if isinstance(source, (str, os.PathLike)):
        source = file_source(source)
    if not hasattr(source, "read") and callable(source):
        source = source(start)
        closer = getattr(source, "close", None)
    else:
        closer = None
        if hasattr(source, "read") and is_restartable(source):
            source.seek(start)
    return source, closer


def source_blocks(source, start, size, block, name, acquire):
    """(offset, data, pooled buffer or None) blocks of an opened source:
    read by ``readinto`` straight into buffers from ``acquire()`` when
    it has one (the one copy there is, into page-aligned memory that a
    writer hands to O_DIRECT as it is), else cut from its chunks.
    """
    if hasattr(source, "readinto"):
        return _filled_blocks(source, start, size, block, name, acquire)
    if hasattr(source, "read"):
        source = _read_chunks(source, start, block)
    return ((offset, data, None) for offset, data in
            _blocks(source, start, size, block, name))


def _filled_blocks(f, start, size, block, name, acquire):
    """source_blocks of a file object with ``readinto``; the same checks
    as _blocks (the last block comes only once ``f`` is exhausted).
    """
    offset = start
    while offset < size:
        want = min(block - offset % block, size - offset)
        buf = acquire()
        view, have = buf.view, 0
        while have < want:
            n = f.readinto(view[have:want])
            if not n:
                raise base.ShortData(
                    "the source of %s ended after %d of %d bytes"
                    % (name, offset + have, size))
            have += n
        if offset + want == size:
            _check_exhausted(f, name, size)
        yield offset, view[:want], buf
        offset += want
    if start >= size:
        _check_exhausted(f, name, size)


def _check_exhausted(f, name, size):
    if f.readinto(bytearray(1)):
        raise base.ShortData("the source of %s delivered more than the "
                             "declared %d bytes" % (name, size))


def _view(chunk):
    """(byte view of ``chunk``, whether the caller can no longer change
    it).  Only immutable views are kept as they are; parts of others are
    copied when kept, so a chunk is never copied twice.
    """
    if isinstance(chunk, bytes):
        return memoryview(chunk), True
    try:
        return memoryview(chunk).cast("B"), False
    except TypeError:           # not contiguous
        return memoryview(bytes(chunk)), True


_ZEROS = bytes(copycommon.MiB)
#: Data runs inside a block are found at this granularity first, then
#: their ends at PAGE: a dense block costs a few dozen compares.
GRANULE = 64 << 10
PAGE = 4096


def is_zero(data):
    """Whether bytes-like ``data`` holds only zero bytes (a memcmp
    against a zero buffer, which stops at the first other byte).
    """
    return _zero_span(memoryview(data).cast("B"), 0, len(data))


def _zero_span(view, lo, hi):
    for at in range(lo, hi, len(_ZEROS)):
        if not _ZEROS.startswith(view[at:min(hi, at + len(_ZEROS))]):
            return False
    return True


def _cuts(offset, length, unit):
    """[(lo, hi)] of ``length`` bytes at file offset ``offset`` cut at
    the file's multiples of ``unit``.
    """
    lo, out = 0, []
    while lo < length:
        hi = min(length, lo + unit - (offset + lo) % unit)
        out.append((lo, hi))
        lo = hi
    return out


def data_runs(data, offset):
    """[(lo, hi)] of the parts of ``data`` (the bytes at file offset
    ``offset``) that a copy into a sized file, which reads as zeros, must
    write: [] for all zeros, ``[(0, len(data))]`` for a block without
    zeros worth a hole.  Zeros that fill a GRANULE of the file are left
    out, and so are the zero pages (PAGE of the file) at both ends of
    every run: a run starts and ends on a page that holds data, at the
    file's page boundaries (or the block's ends).

    A file system keeps its data in small extents scattered over the
    image; a block of the copy is megabytes, so without this the zeros
    around an extent would be written, and allocated, with it (issue 37:
    16 x the data of a scattered image).
    """
    view = memoryview(data).cast("B")
    runs = []
    for lo, hi in _cuts(offset, len(view), GRANULE):
        if _zero_span(view, lo, hi):
            continue
        if runs and runs[-1][1] == lo:
            runs[-1][1] = hi
        else:
            runs.append([lo, hi])
    return [(_data_from(view, offset, lo, hi), _data_to(view, offset, lo, hi))
            for lo, hi in runs]


def _data_from(view, offset, lo, hi):
    """Start of the first page of ``view[lo:hi]`` (a run: not all zero)
    that holds data.
    """
    while True:
        end = min(hi, lo + PAGE - (offset + lo) % PAGE)
        if not _zero_span(view, lo, end):
            return lo
        lo = end


def _data_to(view, offset, lo, hi):
    """End of the last page of ``view[lo:hi]`` (a run) that holds data."""
    while True:
        start = max(lo, hi - ((offset + hi) % PAGE or PAGE))
        if not _zero_span(view, start, hi):
            return hi
        hi = start


def pieces(offset, data, runs=None):
    """(file offset, bytes) to write of block ``data`` at ``offset``:
    its ``runs`` (:func:`data_runs`), or all of it.
    """
    view = memoryview(data)
    if runs is None:
        return [(offset, view)]
    return [(offset + lo, view[lo:hi]) for lo, hi in runs]


class _Partial:
    """One block put together from parts of chunks.

    Immutable parts are kept as views and joined once the block is
    whole: one copy, no zero-filled buffer first.  The caller may change
    a mutable part once we return to it, so from the first such part on
    the block is copied into a buffer of its own as it comes.
    """

    def __init__(self, want):
        self.want = want
        self.have = 0
        self.pieces = []
        self.buf = None

    def add(self, view, owned):
        n = len(view)
        if self.buf is None and not owned:
            self.buf = bytearray(self.want)
            at = 0
            for piece in self.pieces:
                self.buf[at:at + len(piece)] = piece
                at += len(piece)
            self.pieces = None
        if self.buf is None:
            self.pieces.append(view)
        else:
            self.buf[self.have:self.have + n] = view
        self.have += n

    def data(self):
        if self.buf is not None:
            return self.buf
        return memoryview(b"".join(self.pieces))


def _blocks(chunks, start, size, block, name):
    """(offset, data) blocks from ``chunks``, aligned to ``block``.

    Raises ShortData when the chunks end before ``size`` or go beyond
    it; the last block comes only once the chunks are exhausted.
    """
    offset, part, last = start, None, None
    for chunk in chunks:
        view, owned = _view(chunk)
        while view:
            have = part.have if part is not None else 0
            if offset + have >= size:
                raise base.ShortData(
                    "the source of %s delivered more than the declared %d "
                    "bytes" % (name, size))
            want = min(block - offset % block, size - offset)
            take = min(len(view), want - have)
            if have == 0 and take == want:
                data, view = view[:take], view[take:]
                if not owned:
                    data = memoryview(data.tobytes())
            else:
                if part is None:
                    part = _Partial(want)
                part.add(view[:take], owned)
                view = view[take:]
                if part.have < want:
                    continue
                data, part = part.data(), None
            if offset + len(data) == size:
                last = (offset, data)
            else:
                yield offset, data
            offset += len(data)
    have = part.have if part is not None else 0
    if offset + have < size:
        raise base.ShortData("the source of %s ended after %d of %d bytes"
                             % (name, offset + have, size))
    if last is not None:
        yield last
