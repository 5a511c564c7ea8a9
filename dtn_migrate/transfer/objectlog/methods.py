"""Object logging methods: how a completed object index is stored.

These are the "methods" of FT-LADS (Kasu et al. 2019, section IV-B).
There are two families.

Append methods store one *entry* per completed object.  Entries of one
file and one record() call are concatenated into the ``entries`` field of
an ADD group of a checksummed frame (see ``records``)::

    method  entry for object index K                     bytes per entry
    ------  -------------------------------------------  ---------------
    char    decimal ASCII digits of K, then b"\\n"         2 .. 11
    int     K as an unsigned 32-bit little-endian int    4
    binary  K as 32 ASCII '0'/'1' digits, most            32
            significant first, fixed width, no separator
    varint  K as an unsigned LEB128 varint               1 .. 5

Bitmap methods store one bit per object in a fixed *region* of the log::

    bit8    ceil(n / 8) bytes; object K is bit K % 8 of byte K // 8.
    bit64   ceil(n / 64) unsigned 64-bit little-endian words, that is
            8 * ceil(n / 64) bytes; object K is bit K % 64 of word K // 64.

Because bit64 words are little-endian, object K lands in byte K // 8,
bit K % 8 with both bit methods, which is also the layout of
``Bitmap.bits``; bit64 differs from bit8 in its word granularity (region
size rounded up to 8 bytes, regions 8-byte aligned).
"""

import json
import struct

from dtn_migrate.transfer import varint


class AppendMethod:
    """An encoding of object indices as concatenated entries."""

    bitmap = False
    name = None
    max_entry = None    # bytes of the longest entry

    def encode(self, indices):
        """Entries for ``indices`` (a non-empty list of ints), as bytes."""
        raise NotImplementedError

    def decode(self, entries):
        """Inverse of encode; raise ValueError on malformed entries."""
        raise NotImplementedError

    def decode_bits(self, entries, nobjects):
        """The entries as a bitmap (``Bitmap.bits`` layout) of
        ``nobjects`` bits; ValueError if one is out of range.
        """
        indices = self.decode(entries)
        if min(indices) < 0 or max(indices) >= nobjects:
            raise ValueError("object index out of range")
        bits = bytearray((nobjects + 7) >> 3)
        for i in indices:
            bits[i >> 3] |= 1 << (i & 7)
        return bits


class CharMethod(AppendMethod):
    name = "char"
    max_entry = 11

    def encode(self, indices):
        return ("\n".join(map(str, indices)) + "\n").encode("ascii")

    def decode(self, entries):
        entries = bytes(entries)
        if not entries.endswith(b"\n"):
            raise ValueError("char entries do not end with a newline")
        body = entries[:-1]
        if not body.replace(b"\n", b"").isdigit():
            raise ValueError("char entries hold a non-digit")
        # Only ASCII digits and single newlines are left, so this is a
        # JSON array of integers, which json parses fastest (b"1\n\n2"
        # and leading zeros raise ValueError).
        return json.loads(b"[" + body.replace(b"\n", b",") + b"]")


class IntMethod(AppendMethod):
    name = "int"
    max_entry = 4

    def encode(self, indices):
        return struct.pack("<%dI" % len(indices), *indices)

    def decode(self, entries):
        if len(entries) % 4:
            raise ValueError("int entries are not a multiple of 4 bytes")
        return list(struct.unpack("<%dI" % (len(entries) // 4), entries))


class BinaryMethod(AppendMethod):
    name = "binary"
    max_entry = 32

    def encode(self, indices):
        return "".join([format(i, "032b") for i in indices]).encode("ascii")

    def decode(self, entries):
        entries = bytes(entries)
        count = len(entries) // 32
        if len(entries) % 32 or not count:
            raise ValueError("binary entries are not a multiple of 32 digits")
        if entries.translate(None, b"01"):
            raise ValueError("binary entries hold a digit other than 0/1")
        # The digits of all entries form one base-2 number whose bytes are
        # the entries as big-endian uint32s (linear time in CPython).
        value = int(entries, 2).to_bytes(4 * count, "big")
        return list(struct.unpack(">%dI" % count, value))


class VarintMethod(AppendMethod):
    name = "varint"
    max_entry = 5

    def encode(self, indices):
        return varint.encode_many(indices)

    def decode(self, entries):
        values = []
        append = values.append
        value = 0
        shift = 0
        for byte in bytes(entries):
            if byte < 0x80:
                append(value | (byte << shift))
                value = 0
                shift = 0
            elif shift == 28:
                raise ValueError("varint entry longer than 5 bytes")
            else:
                value |= (byte & 0x7F) << shift
                shift += 7
        if shift:
            raise ValueError("truncated varint entry")
        return values

    def decode_bits(self, entries, nobjects):
        # decode() fused with setting the bits: one pass, no list.
        bits = bytearray((nobjects + 7) >> 3)
        value = 0
        shift = 0
        try:
            for byte in bytes(entries):
                if byte < 0x80:
                    value |= byte << shift
                    bits[value >> 3] |= 1 << (value & 7)
                    value = 0
                    shift = 0
                elif shift == 28:
                    raise ValueError("varint entry longer than 5 bytes")
                else:
                    value |= (byte & 0x7F) << shift
                    shift += 7
        except IndexError:
            raise ValueError("object index out of range")
        if shift:
            raise ValueError("truncated varint entry")
        if nobjects & 7 and bits[-1] >> (nobjects & 7):
            raise ValueError("object index out of range")
        return bits


class BitmapMethod:
    """One bit per object in a region of ``word`` byte words."""

    bitmap = True

    def __init__(self, name, word):
        self.name = name
        self.word = word

    def region_len(self, nobjects):
        bits = self.word * 8
        return (nobjects + bits - 1) // bits * self.word


_METHODS = {
    "char": CharMethod(),
    "int": IntMethod(),
    "binary": BinaryMethod(),
    "varint": VarintMethod(),
    "bit8": BitmapMethod("bit8", 1),
    "bit64": BitmapMethod("bit64", 8),
}

METHODS = ("char", "int", "binary", "varint", "bit8", "bit64")


def get(name):
    """The method object called ``name``; ValueError if there is none."""
    try:
        return _METHODS[name]
    except KeyError:
        raise ValueError("unknown object log method %r (expected one of %s)"
                         % (name, ", ".join(METHODS)))
