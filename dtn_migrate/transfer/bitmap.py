"""A fixed-size bitmap of object indices, and its run-length wire form."""

import re

from dtn_migrate.transfer import errors
from dtn_migrate.transfer import varint

_NOT_FF = re.compile(rb"[^\xff]")
_NOT_00 = re.compile(rb"[^\x00]")


def nbytes(nbits):
    """Bytes of a Bitmap of ``nbits`` bits."""
    return (nbits + 7) >> 3


class Bitmap:
    """``nbits`` bits in a bytearray, bit ``i`` is byte ``i >> 3``,
    bit ``i & 7`` (least significant first).
    """

    __slots__ = ("nbits", "bits", "_count")

    def __init__(self, nbits, raw=None):
        self.nbits = nbits
        size = nbytes(nbits)
        if raw is None:
            self.bits = bytearray(size)
            self._count = 0
        else:
            if len(raw) != size:
                raise ValueError("bitmap of %d bits needs %d bytes, got %d"
                                 % (nbits, size, len(raw)))
            self.bits = bytearray(raw)
            if nbits & 7:
                self.bits[-1] &= (1 << (nbits & 7)) - 1
            self._count = int.from_bytes(self.bits, "little").bit_count()

    def __contains__(self, i):
        return 0 <= i < self.nbits and bool(self.bits[i >> 3] & (1 << (i & 7)))

    def __len__(self):
        return self._count

    def add(self, i):
        """Set bit ``i``; return True if it was clear."""
        if not 0 <= i < self.nbits:
            raise IndexError("bit %d outside bitmap of %d" % (i, self.nbits))
        mask = 1 << (i & 7)
        if self.bits[i >> 3] & mask:
            return False
        self.bits[i >> 3] |= mask
        self._count += 1
        return True

    def clear(self):
        self.bits[:] = bytes(len(self.bits))
        self._count = 0

    @property
    def full(self):
        return self._count == self.nbits

    def missing(self):
        """Indices of clear bits, in increasing order."""
        bits = self.bits
        for byte_index, byte in enumerate(bits):
            if byte == 0xFF:
                continue
            base = byte_index << 3
            for bit in range(8):
                i = base + bit
                if i >= self.nbits:
                    return
                if not byte & (1 << bit):
                    yield i

    def present(self):
        """Indices of set bits, in increasing order."""
        for byte_index, byte in enumerate(self.bits):
            if not byte:
                continue
            base = byte_index << 3
            for bit in range(8):
                if byte & (1 << bit):
                    yield base + bit

    def prefix(self):
        """Length of the run of set bits starting at bit 0."""
        for byte_index, byte in enumerate(self.bits):
            if byte != 0xFF:
                i = byte_index << 3
                while byte & 1:
                    byte >>= 1
                    i += 1
                return min(i, self.nbits)
        return self.nbits

    def add_range(self, start, end):
        """Set bits ``start`` .. ``end - 1`` (whole bytes at a time)."""
        if not 0 <= start <= end <= self.nbits:
            raise IndexError("range %d..%d outside bitmap of %d"
                             % (start, end, self.nbits))
        bits = self.bits
        i = start
        while i < end and i & 7:
            self.add(i)
            i += 1
        full_end = end & ~7
        if i < full_end:
            first, last = i >> 3, full_end >> 3
            added = (full_end - i) - int.from_bytes(
                bits[first:last], "little").bit_count()
            bits[first:last] = b"\xff" * (last - first)
            self._count += added
            i = full_end
        while i < end:
            self.add(i)
            i += 1

    def runs(self):
        """Alternating run lengths, starting with a (possibly empty) clear
        run: ``[clear, set, clear, set, ...]``.
        """
        runs = []
        current = 0           # value of the run being counted
        length = 0
        bits, nbits = self.bits, self.nbits
        size = len(bits)
        pos = 0
        while pos < size:
            # Skip whole bytes that continue the current run (C speed).
            m = (_NOT_FF if current else _NOT_00).search(bits, pos)
            stop = m.start() if m else size
            length += (stop - pos) * 8
            pos = stop
            if pos >= size:
                break
            byte = bits[pos]
            for bit in range(8):
                value = (byte >> bit) & 1
                if value == current:
                    length += 1
                else:
                    runs.append(length)
                    current = value
                    length = 1
            pos += 1
        # Bits past nbits in the last byte are always clear: drop them.
        overshoot = size * 8 - nbits
        if overshoot:
            if current:
                raise AssertionError("bits past the end are set")
            length -= overshoot
            if length == 0 and runs:
                length = runs.pop()
                current ^= 1
        runs.append(length)
        return runs

    def encode_runs(self):
        """Varint run-length form used in NEW_FILE.done."""
        if not self._count:
            return b""
        return varint.encode_many(self.runs())

    @classmethod
    def decode_runs(cls, blob, nbits):
        """Inverse of encode_runs; the runs must cover exactly ``nbits``."""
        bitmap = cls(nbits)
        if not blob:
            return bitmap
        try:
            runs = varint.decode_many(blob)
        except ValueError as exc:
            raise errors.ProtocolError("bad done set: %s" % exc)
        if sum(runs) != nbits:
            raise errors.BoundsError(
                "done set covers %d objects, file has %d" % (sum(runs), nbits))
        pos = 0
        for n, length in enumerate(runs):
            if n & 1:
                bitmap.add_range(pos, pos + length)
            pos += length
        return bitmap
