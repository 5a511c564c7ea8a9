"""Queue pair endpoints: what travels in CONNECT / CONNECT_ACK.rdma.

``Endpoint`` is the versioned wire encoding of what a peer needs to
connect an RC queue pair to ours; the link layer and MTU codes it carries
are ibv_port_attr's.
"""

import dataclasses
import struct

from dtn_migrate.transfer import errors

# ibv_port_attr.link_layer values.
LINK_INFINIBAND = 1
LINK_ETHERNET = 2
LINK_NAMES = {LINK_INFINIBAND: "InfiniBand", LINK_ETHERNET: "Ethernet"}

# ibv_mtu: 1 (256 bytes) .. 5 (4096 bytes).
MTU_BYTES = {1: 256, 2: 512, 3: 1024, 4: 2048, 5: 4096}

_ENDPOINT_MAGIC = b"DTNR"
ENDPOINT_VERSION = 1
# magic, version, link layer, path MTU, responder resources (incoming
# READs the queue pair accepts), LID, reserved, QPN, PSN, GID.
_ENDPOINT_V1 = struct.Struct("!4sBBBBHHII16s")
ENDPOINT_SIZE = _ENDPOINT_V1.size


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """What a peer needs to connect an RC queue pair to ours."""

    qpn: int                 # queue pair number (24 bits)
    psn: int                 # first packet sequence number we send
    lid: int                 # port LID (InfiniBand)
    gid: bytes               # port GID, 16 bytes (needed on RoCE)
    mtu: int                 # ibv_mtu of our port (1..5)
    rd_atomic: int           # incoming READs we accept at once (>= 1)
    link_layer: int          # LINK_INFINIBAND or LINK_ETHERNET

    def encode(self):
        problem = self._problem()
        if problem:
            raise ValueError("bad local RDMA endpoint: %s" % problem)
        return _ENDPOINT_V1.pack(
            _ENDPOINT_MAGIC, ENDPOINT_VERSION, self.link_layer, self.mtu,
            self.rd_atomic, self.lid, 0, self.qpn, self.psn, self.gid)

    @classmethod
    def decode(cls, blob):
        """Parse a peer's endpoint; raise ProtocolError on anything odd."""
        if not isinstance(blob, (bytes, bytearray, memoryview)):
            raise errors.ProtocolError("RDMA endpoint is not bytes")
        blob = bytes(blob)
        if not blob:
            raise errors.ProtocolError(
                "peer sent no RDMA endpoint (is RDMA enabled there?)")
        if len(blob) < 5:
            raise errors.ProtocolError(
                "RDMA endpoint truncated to %d bytes" % len(blob))
        if blob[:4] != _ENDPOINT_MAGIC:
            raise errors.ProtocolError("RDMA endpoint has a bad magic")
        if blob[4] != ENDPOINT_VERSION:
            raise errors.ProtocolError(
                "unsupported RDMA endpoint version %d (this agent speaks "
                "version %d)" % (blob[4], ENDPOINT_VERSION))
        if len(blob) != ENDPOINT_SIZE:
            raise errors.ProtocolError(
                "RDMA endpoint version %d is %d bytes, expected %d"
                % (ENDPOINT_VERSION, len(blob), ENDPOINT_SIZE))
        (_, _, link, mtu, rd_atomic, lid, reserved, qpn, psn,
         gid) = _ENDPOINT_V1.unpack(blob)
        if reserved:
            raise errors.ProtocolError("RDMA endpoint reserved field is set")
        ep = cls(qpn=qpn, psn=psn, lid=lid, gid=gid, mtu=mtu,
                 rd_atomic=rd_atomic, link_layer=link)
        problem = ep._problem()
        if problem:
            raise errors.ProtocolError("bad RDMA endpoint: %s" % problem)
        return ep

    def _problem(self):
        if self.link_layer not in LINK_NAMES:
            return "unknown link layer %r" % (self.link_layer,)
        if self.mtu not in MTU_BYTES:
            return "path MTU code %r out of range" % (self.mtu,)
        if not 1 <= self.rd_atomic <= 255:
            return "responder resources %r out of range" % (self.rd_atomic,)
        if not 2 <= self.qpn < 1 << 24:
            return "queue pair number %r out of range" % (self.qpn,)
        if not 0 <= self.psn < 1 << 24:
            return "packet sequence number %r out of range" % (self.psn,)
        if not isinstance(self.gid, bytes) or len(self.gid) != 16:
            return "GID is not 16 bytes"
        if not 0 <= self.lid < 1 << 16:
            return "LID %r out of range" % (self.lid,)
        if self.link_layer == LINK_ETHERNET and not any(self.gid):
            return "RoCE endpoint without a GID"
        if self.link_layer == LINK_INFINIBAND and not self.lid:
            return "InfiniBand endpoint without a LID"
        return ""

    def describe(self):
        return "QPN %#x LID %#x GID %s" % (
            self.qpn, self.lid, gid_text(self.gid))


def gid_text(raw):
    """16 raw GID bytes as pyverbs' 'xxxx:xxxx:...' text."""
    h = raw.hex()
    return ":".join(h[i:i + 4] for i in range(0, 32, 4))


def gid_raw(text):
    """pyverbs' GID text as 16 raw bytes."""
    raw = bytes.fromhex(str(text).replace(":", ""))
    if len(raw) != 16:
        raise ValueError("bad GID %r" % (text,))
    return raw
