"""Unsigned LEB128 varints (the object log's stand-in for FT-LADS "enc")."""

MAX_BYTES = 10  # enough for 64-bit values


def encode(value):
    if not 0 <= value < 1 << 64:
        raise ValueError("varint value %d outside 0..2**64-1" % value)
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode_many(values):
    return b"".join(encode(v) for v in values)


def decode(buf, pos=0):
    """Decode one varint at ``pos``; return (value, next position)."""
    value = 0
    shift = 0
    for n in range(MAX_BYTES):
        if pos >= len(buf):
            raise ValueError("truncated varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    raise ValueError("varint longer than %d bytes" % MAX_BYTES)


def decode_many(buf):
    values = []
    pos = 0
    while pos < len(buf):
        value, pos = decode(buf, pos)
        values.append(value)
    return values
