"""A man in the middle that understands the DTN frames.

``Mitm`` forwards every connection to an upstream sink, reading the
source-to-sink stream frame by frame (header, body, the tag if the
frame has one, and a NEW_BLOCK's object bytes) and handing each frame
to ``attack(frame)``, which returns the bytes to send in its place.
The sink-to-source stream passes untouched.  Attacks fix up everything
an attacker can compute without the session key: the CRC-32, and an
object's xxh3; the tag is left as it was.  Run it in a thread of the
test process (unit tests) or with ``python -m tests.mitm`` between two
agents (functional tests)::

    python -m tests.mitm LISTEN_PORT UPSTREAM_PORT ATTACK [COUNT]
"""

import argparse
import hashlib
import struct
import time
import zlib

from dtn_migrate.transfer import checksum
from dtn_migrate.transfer.wire import protocol as P
from devcloud import relay


class Frame:
    """One source-to-sink frame as it travels."""

    def __init__(self, conn_index, header, body, tag, payload):
        self.conn_index = conn_index
        (_magic, self.version, mtype, self.flags, _length,
         _crc) = P.HEADER.unpack(header)
        self.type = P.MsgType(mtype)
        self.header, self.body, self.tag = header, body, tag
        self.payload = payload

    def message(self):
        return P.MESSAGES[self.type].decode(self.body)

    def raw(self):
        return self.header + self.body + self.tag + self.payload

    def rewrite(self, msg=None, payload=None):
        """Bytes of this frame with a new body (CRC fixed up) and/or new
        object bytes; the original tag is kept.
        """
        body = self.body if msg is None else msg.encode()
        header = P.HEADER.pack(P.MAGIC, self.version, self.type, self.flags,
                               len(body), zlib.crc32(body))
        return header + body + self.tag + (self.payload if payload is None
                                           else payload)


def _recv_exact(sock, n):
    out = bytearray()
    while len(out) < n:
        data = sock.recv(n - len(out))
        if not data:
            raise ConnectionError("closed")
        out += data
    return bytes(out)


def read_frame(sock, conn_index):
    header = _recv_exact(sock, P.HEADER_SIZE)
    _magic, _v, mtype, flags, length, _crc = P.HEADER.unpack(header)
    body = _recv_exact(sock, length)
    tag = _recv_exact(sock, P.TAG_SIZE) if flags & P.FLAG_TAG else b""
    payload = b""
    if mtype == P.MsgType.NEW_BLOCK:
        (size,) = struct.unpack_from("!I", body, 16)
        payload = _recv_exact(sock, size)
    return Frame(conn_index, header, body, tag, payload)


class Mitm(relay.Relay):
    """A :class:`~devcloud.relay.Relay` that parses what goes to the sink
    into frames: ``attack(frame)`` -> bytes to forward (``frame.raw()``
    to pass).
    """

    def __init__(self, upstream, attack, host="127.0.0.1", port=0):
        self.attack = attack        # before the accepting thread starts
        super().__init__(upstream, host, port)

    def _copy(self, src, dst, upstream, index):
        if not upstream:
            return super()._copy(src, dst, upstream, index)
        while True:
            frame = read_frame(src, index)
            with self.lock:
                out = self.attack(frame)
            dst.sendall(out)


class Attacks:
    """Stateful attacks, each active for its first ``count`` hits."""

    def __init__(self, kind, count, forged_sha512=None):
        self.kind = kind
        self.left = count
        self.hits = 0
        self.forged_sha512 = forged_sha512
        self._held = {}           # connection -> NEW_BLOCK held back

    def __call__(self, frame):
        if self.left <= 0:
            return frame.raw()
        out = getattr(self, "_" + self.kind)(frame)
        if out is None:
            return frame.raw()
        self.left -= 1
        self.hits += 1
        return out

    def _object(self, frame):
        """Change an object's first byte; fix its xxh3 and the CRC."""
        if frame.type != P.MsgType.NEW_BLOCK or not frame.payload:
            return None
        payload = bytes([frame.payload[0] ^ 0xFF]) + frame.payload[1:]
        msg = frame.message()
        msg.xxh3 = checksum.xxh3(payload)
        return frame.rewrite(msg, payload)

    def _control(self, frame):
        """Change the sha512 a NEW_FILE or FILE_CLOSE declares (to
        ``forged_sha512``); fix the CRC.
        """
        if frame.type not in (P.MsgType.NEW_FILE, P.MsgType.FILE_CLOSE):
            return None
        msg = frame.message()
        msg.sha512 = self.forged_sha512 or hashlib.sha512(b"x").digest()
        return frame.rewrite(msg)

    def _forge(self, frame):
        """Both: the NEW_FILE/FILE_CLOSE hash and object 0, so that an
        unauthenticated sink would verify the forged file as whole.
        """
        if frame.type == P.MsgType.NEW_BLOCK and frame.message().index != 0:
            return None
        return self._object(frame) or self._control(frame)

    def _replay(self, frame):
        """Send a NEW_BLOCK twice."""
        if frame.type != P.MsgType.NEW_BLOCK:
            return None
        return frame.raw() * 2

    def _reorder(self, frame):
        """Swap two consecutive NEW_BLOCKs of one connection."""
        if frame.type != P.MsgType.NEW_BLOCK:
            return None
        held = self._held.pop(frame.conn_index, None)
        if held is None:
            self._held[frame.conn_index] = frame
            self.left += 1          # held back: not an attack yet
            self.hits -= 1
            return b""
        return frame.raw() + held.raw()


ATTACKS = ("object", "control", "forge", "replay", "reorder")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("listen_port", type=int)
    p.add_argument("upstream_port", type=int)
    p.add_argument("attack", choices=ATTACKS)
    p.add_argument("count", type=int, nargs="?", default=1 << 30)
    p.add_argument("--sha512", help="forged sha512 (hex)")
    a = p.parse_args(argv)
    forged = bytes.fromhex(a.sha512) if a.sha512 else None
    Mitm(("127.0.0.1", a.upstream_port), Attacks(a.attack, a.count, forged),
         port=a.listen_port)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
