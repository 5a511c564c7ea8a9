"""RDMA data plane: the sink pulls objects with RDMA READ (FT-LADS III-A).

The source reads an object into a buffer of its registered pool and sends
a NEW_BLOCK naming the buffer (``addr``, ``rkey``) on the data connection.
The sink reads the bytes straight from the source's memory with RDMA READ
over the data stream's reliable-connected (RC) queue pair, into a buffer
of its own registered pool, then answers BLOCK_PULLED so that the source
can reuse its buffer.

Each data stream has one RC queue pair (and its own completion queue) on
each side.  Queue pair endpoints travel as opaque bytes in the ``rdma``
field of the data connection's CONNECT / CONNECT_ACK; ``Endpoint`` is
their versioned encoding.

pyverbs is imported lazily (``verbs.load``, across rdma-core releases):
importing this module never needs it, and ``probe`` tells, without
raising, why RDMA cannot be used here.  Each source session has its own
protection domain and registered pool, freed when its plane closes.
See doc/source/rdma.rst for the design.
"""

import ctypes
import dataclasses
import mmap
import os
import struct
import threading
import time

from dtn_migrate.transfer import buffers
from dtn_migrate.transfer import errors
from dtn_migrate.transfer import protocol
from dtn_migrate.transfer.transport import base
from dtn_migrate.transfer.transport import verbs as verbs_loader

PAGE_SIZE = mmap.PAGESIZE

# ibv_port_attr.link_layer values.
LINK_INFINIBAND = 1
LINK_ETHERNET = 2
_LINK_NAMES = {LINK_INFINIBAND: "InfiniBand", LINK_ETHERNET: "Ethernet"}

# ibv_transport_type values.
TRANSPORT_IB = 0             # InfiniBand and RoCE
_TRANSPORT_NAMES = {1: "iWARP", 2: "usNIC", 3: "usNIC UDP"}

# ibv_mtu: 1 (256 bytes) .. 5 (4096 bytes).
_MTU_BYTES = {1: 256, 2: 512, 3: 1024, 4: 2048, 5: 4096}

# Queue pair tuning.  The retry timeout is 4.096 us * 2**TIMEOUT: 18 is
# about 1.07 s, long enough for a long-haul path; with RETRY_CNT retries
# a peer that is gone is reported within about 9 s.  RNR_RETRY 7 retries
# forever (READ never needs a receive buffer, so it never waits on RNR).
QP_TIMEOUT = 18
QP_RETRY_CNT = 7
QP_RNR_RETRY = 7
QP_MIN_RNR_TIMER = 12
GRH_HOP_LIMIT = 64
MAX_RD_ATOMIC = 16           # READs in flight per queue pair, at most
SEND_QUEUE_DEPTH = 16        # READ work requests posted at once, at most
MAX_READ_CHUNK = 1 << 30     # one READ work request moves at most this

# Completion polling backoff (see doc/source/rdma.rst: pyverbs 44 cannot
# wait on a completion channel without holding the GIL).
POLL_SPIN = 32
POLL_SLEEP_MIN = 20e-6
POLL_SLEEP_MAX = 500e-6
READ_DEADLINE = 120.0        # safety net beyond the transport's retries
DRAIN_DEADLINE = 10.0        # flushing a queue pair forced to ERROR

_ENDPOINT_MAGIC = b"DTNR"
ENDPOINT_VERSION = 1
# magic, version, link layer, path MTU, responder resources (incoming
# READs the queue pair accepts), LID, reserved, QPN, PSN, GID.
_ENDPOINT_V1 = struct.Struct("!4sBBBBHHII16s")
ENDPOINT_SIZE = _ENDPOINT_V1.size


class RdmaError(errors.TransferError):
    """A local RDMA resource could not be created or used."""


class RdmaExhausted(RdmaError, ConnectionError):
    """A local RDMA resource is exhausted for now (pinned memory, MRs).

    A ConnectionError, so that the source retries the attempt with
    back-off, as it does when the link fails.
    """


# Endpoints.

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
        if self.link_layer not in _LINK_NAMES:
            return "unknown link layer %r" % (self.link_layer,)
        if self.mtu not in _MTU_BYTES:
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
            self.qpn, self.lid, _gid_text(self.gid))


def _gid_text(raw):
    """16 raw GID bytes as pyverbs' 'xxxx:xxxx:...' text."""
    h = raw.hex()
    return ":".join(h[i:i + 4] for i in range(0, 32, 4))


def _gid_raw(text):
    """pyverbs' GID text as 16 raw bytes."""
    raw = bytes.fromhex(str(text).replace(":", ""))
    if len(raw) != 16:
        raise ValueError("bad GID %r" % (text,))
    return raw


# Registered memory.

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


# pyverbs.

def _load_verbs():
    """Import the parts of pyverbs this module uses (lazily)."""
    return verbs_loader.load()


class _Unusable(Exception):
    """This device or port cannot be used; the text says why."""


def _device_name(dev):
    name = dev.name
    return name.decode() if isinstance(name, bytes) else str(name)


def probe(device=None, port=1, gid_index=None):
    """Open an RDMA device: ``(RdmaDevice, "")`` or ``(None, reason)``.

    ``device`` None takes the first device whose ``port`` is active;
    ``gid_index`` None picks a RoCE v2 GID on Ethernet ports.  Never
    raises: the reason says what is missing.  A pyverbs that is installed
    but unusable gives "pyverbs incompatible: ...", never a reason that
    starts "no RDMA".
    """
    try:
        verbs = _load_verbs()
    except verbs_loader.PyverbsMissing as exc:
        return None, "no RDMA device: %s" % exc
    except verbs_loader.PyverbsIncompatible as exc:
        return None, str(exc)
    except Exception as exc:  # noqa: B902 - never raises, says why
        return None, "pyverbs incompatible: %s" % exc
    try:
        devices = verbs.device.get_device_list()
    except Exception as exc:
        return None, ("no RDMA device: pyverbs get_device_list failed: %s "
                      "(no RDMA kernel driver such as ib_uverbs with "
                      "mlx5_ib or rdma_rxe is loaded?)" % exc)
    try:
        names = [_device_name(d) for d in devices]
        transports = {_device_name(d): getattr(d, "transport_type",
                                               TRANSPORT_IB)
                      for d in devices}
    except Exception as exc:
        return None, "no RDMA device: cannot read the device list: %s" % exc
    if not names:
        return None, "no RDMA device: the device list is empty"
    if device is not None:
        if device not in names:
            return None, ("RDMA device %r not found (present: %s)"
                          % (device, ", ".join(names)))
        names = [device]
    reasons = []
    for name in names:
        transport = transports.get(name, TRANSPORT_IB)
        if transport != TRANSPORT_IB:
            # iWARP connects queue pairs through RDMA CM over TCP; this
            # plane connects them by hand, as InfiniBand and RoCE allow.
            reasons.append("RDMA device %s uses the %s transport, which "
                           "this data plane does not support"
                           % (name, _TRANSPORT_NAMES.get(
                               transport, "transport %s" % transport)))
            continue
        try:
            return RdmaDevice(verbs, name, port, gid_index), ""
        except _Unusable as exc:
            reasons.append(str(exc))
        except Exception as exc:
            reasons.append("cannot open RDMA device %s: %s" % (name, exc))
    return None, "; ".join(reasons)


class RdmaDevice:
    """An open device port, its protection domain and registered pools.

    Made by ``probe``.  ``make_pool`` registers buffer memory;
    ``source_plane`` / ``sink_plane`` make the data planes over a pool.
    """

    def __init__(self, verbs, name, port, gid_index):
        self._v = verbs
        self.name = name
        self.port = port
        self._lock = threading.Lock()
        self._pools = []
        self._planes = []
        self._closed = False
        self._ctx = verbs.device.Context(name=name)
        try:
            self._query(gid_index)
            self._pd = verbs.pd.PD(self._ctx)
        except BaseException:
            self._ctx.close()
            raise

    def _query(self, gid_index):
        v, e, name, port = self._v, self._v.e, self.name, self.port
        try:
            pattr = self._ctx.query_port(port)
        except v.error as exc:
            raise _Unusable("RDMA device %s has no port %d: %s"
                            % (name, port, exc))
        if pattr.state != e.IBV_PORT_ACTIVE:
            try:
                state = v.device.port_state_to_str(pattr.state)
            except Exception:
                state = str(pattr.state)
            raise _Unusable("port %d of RDMA device %s is not active "
                            "(state %s)" % (port, name, state))
        self.link_layer = pattr.link_layer
        if self.link_layer not in _LINK_NAMES:
            # Unspecified (old drivers) means InfiniBand.
            self.link_layer = LINK_INFINIBAND
        self.lid = pattr.lid
        self.mtu = pattr.active_mtu
        self.max_msg = pattr.max_msg_sz or MAX_READ_CHUNK
        dattr = self._ctx.query_device()
        self.max_mr_size = dattr.max_mr_size
        self.responder_depth = max(1, min(MAX_RD_ATOMIC,
                                          dattr.max_qp_rd_atom))
        self.initiator_depth = max(1, min(MAX_RD_ATOMIC,
                                          dattr.max_qp_init_rd_atom))
        self.send_depth = max(1, min(SEND_QUEUE_DEPTH, dattr.max_qp_wr))
        if gid_index is None:
            gid_index = self._pick_gid(pattr.gid_tbl_len)
        try:
            self.gid = _gid_raw(self._ctx.query_gid(port, gid_index))
        except (v.error, ValueError) as exc:
            raise _Unusable("cannot read GID %d of port %d of RDMA device "
                            "%s: %s" % (gid_index, port, name, exc))
        self.gid_index = gid_index
        if self.link_layer == LINK_ETHERNET and not any(self.gid):
            raise _Unusable("GID %d of port %d of RDMA device %s is empty "
                            "(RoCE needs an address on the interface)"
                            % (gid_index, port, name))
        if self.link_layer == LINK_INFINIBAND and not self.lid:
            raise _Unusable("port %d of RDMA device %s has no LID (no "
                            "subnet manager?)" % (port, name))

    def _pick_gid(self, table_len):
        """On RoCE prefer the first RoCE v2 GID; otherwise index 0."""
        if self.link_layer != LINK_ETHERNET:
            return 0
        e, first = self._v.e, None
        for index in range(min(table_len, 256)):
            try:
                raw = _gid_raw(self._ctx.query_gid(self.port, index))
                if not any(raw):
                    continue
                if first is None:
                    first = index
                kind = self._ctx.query_gid_type(self.port, index)
                if kind == e.IBV_GID_TYPE_SYSFS_ROCE_V2:
                    return index
            except (self._v.error, ValueError):
                continue
        return 0 if first is None else first

    def __repr__(self):
        return "<RdmaDevice %s>" % self.describe()

    def describe(self):
        return "%s port %d (%s, LID %#x, GID[%d] %s, MTU %d)" % (
            self.name, self.port, _LINK_NAMES[self.link_layer], self.lid,
            self.gid_index, _gid_text(self.gid), _MTU_BYTES.get(self.mtu, 0))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _check_open(self):
        if self._closed:
            raise RdmaError("RDMA device %s is closed" % self.name)

    # Memory.
    def make_pool(self, count, size, remote_read=True):
        """A pool of ``count`` buffers of ``size`` bytes in one MR of the
        device's protection domain, deregistered when the device closes.

        The result is a ``buffers.BufferPool``.  ``remote_read`` False (a
        sink-only pool) keeps the memory closed to the peer's RDMA READ.
        Remote-readable memory belongs in a plane's own protection domain
        (``source_plane``), not in the device's.
        """
        self._check_open()
        pool = self._register(self._pd, count, size, remote_read)
        with self._lock:
            self._pools.append(pool)
        return pool

    def _register(self, pd, count, size, remote_read):
        """``count`` buffers of ``size`` bytes registered as one MR of
        ``pd``: a ``RegionPool`` whose region holds the MR.
        """
        if count < 1 or size < 1:
            raise ValueError("a pool needs at least one non-empty buffer")
        stride = stride_for(size)
        length = count * stride
        if self.max_mr_size and length > self.max_mr_size:
            raise RdmaError("%d buffers of %d bytes exceed the largest MR "
                            "of %s (%d bytes)" % (count, size, self.name,
                                                  self.max_mr_size))
        e = self._v.e
        access = e.IBV_ACCESS_LOCAL_WRITE
        if remote_read:
            access |= e.IBV_ACCESS_REMOTE_READ
        # An optional flag: libibverbs drops it where unsupported.
        access |= e.IBV_ACCESS_RELAXED_ORDERING
        block, address = allocate_block(length)
        try:
            mr = self._v.mr.MR(pd, length, access, address=address)
        except self._v.error as exc:
            block.close()
            # Usually RLIMIT_MEMLOCK or the adapter's MR table: both free
            # up as other transfers end, so the caller may retry.
            raise RdmaExhausted("cannot register %d bytes of buffers with "
                                "%s: %s%s" % (length, self.name, exc,
                                              _memlock_hint(length)))
        region = Region(block, address, count, size, lkey=mr.lkey,
                        rkey=mr.rkey, stride=stride, mr=mr, owner=self)
        return region.make_pool()

    # Planes.
    def _plane_region(self, pool):
        region = getattr(pool, "region", None)
        if not isinstance(region, Region) or region.owner is not self:
            raise ValueError("pool was not made by %s.make_pool" % self.name)
        return region

    def source_plane(self, count, size):
        """A source plane for one peer session, with a protection domain
        and a pool (``plane.pool``) of its own.

        The pool is remote-readable, but only through this plane's queue
        pairs: a peer connected to another session's queue pairs cannot
        read it whatever rkey it tries.  ``plane.close()`` deregisters
        the pool and frees the domain, so a reconnecting transfer does
        not pin more memory with each attempt.
        """
        self._check_open()
        v = self._v
        try:
            pd = v.pd.PD(self._ctx)
        except v.error as exc:
            raise RdmaExhausted("cannot allocate a protection domain on "
                                "%s: %s" % (self.name, exc))
        try:
            pool = self._register(pd, count, size, True)
        except BaseException:
            _quiet_close(pd)
            raise
        plane = RdmaSourcePlane(self, pool, pd)
        with self._lock:
            closed = self._closed
            if not closed:
                self._planes.append(plane)
        if closed:
            plane.close()
            self._check_open()
        return plane

    def sink_plane(self, pool):
        self._check_open()
        plane = RdmaSinkPlane(self, self._plane_region(pool))
        with self._lock:
            self._planes.append(plane)
        return plane

    def _forget_plane(self, plane):
        with self._lock:
            if plane in self._planes:
                self._planes.remove(plane)

    def _queue_pair(self, stream, access, pd):
        self._check_open()
        return _QueuePair.create(self, stream, access, pd)

    def close(self):
        """Close every plane, deregister every pool, close the device.

        Pool memory stays valid while views of it live; its buffers just
        cannot be used for RDMA any more.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            planes, self._planes = self._planes, []
            pools, self._pools = self._pools, []
        for plane in planes:
            plane.close()
        for pool in pools:
            pool.close()
            _quiet_close(pool.region.mr)
        _quiet_close(self._pd)
        _quiet_close(self._ctx)


def _memlock_hint(length):
    try:
        import resource
        soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    except (ImportError, OSError, ValueError):
        return ""
    if soft == resource.RLIM_INFINITY or soft >= length:
        return ""
    return (" (RLIMIT_MEMLOCK is %d bytes: raise it, e.g. LimitMEMLOCK="
            "infinity for the service)" % soft)


def _quiet_close(obj):
    if obj is None:
        return
    try:
        obj.close()
    except Exception:
        pass


# Queue pairs.

_WC_HINTS = {
    "IBV_WC_REM_ACCESS_ERR": "the source refused the access: bad rkey, "
                             "address or length",
    "IBV_WC_RETRY_EXC_ERR": "the source stopped answering (transport "
                            "retries exhausted)",
    "IBV_WC_RNR_RETRY_EXC_ERR": "the source was not ready (RNR retries "
                                "exhausted)",
    "IBV_WC_REM_INV_REQ_ERR": "the source found the request invalid",
    "IBV_WC_REM_OP_ERR": "the source could not complete the operation",
    "IBV_WC_LOC_PROT_ERR": "local buffer not in the registered memory",
    "IBV_WC_LOC_LEN_ERR": "local length error",
    "IBV_WC_LOC_QP_OP_ERR": "local queue pair error",
    "IBV_WC_WR_FLUSH_ERR": "queue pair was in the error state",
}


class _QueuePair:
    """One RC queue pair and its completion queue (one data stream)."""

    def __init__(self, verbs, dev, stream, qp, cq, depth):
        self._v = verbs
        self.dev = dev
        self.stream = stream
        self.qp = qp
        self.cq = cq
        self.depth = depth
        self.lock = threading.Lock()     # held while READs are outstanding
        self.closing = False
        self.broken = ""
        self.connected = False
        self.remote = None
        self._next_id = 1
        self.psn = int.from_bytes(os.urandom(3), "big")

    @classmethod
    def create(cls, dev, stream, access, pd):
        """A new queue pair of ``pd`` in INIT, READ-capable as ``access``
        says.
        """
        v, e = dev._v, dev._v.e
        depth = dev.send_depth
        try:
            cq = v.cq.CQ(dev._ctx, 2 * depth, None, None, 0)
        except v.error as exc:
            raise RdmaError("cannot create a completion queue on %s: %s"
                            % (dev.name, exc))
        try:
            cap = v.qp.QPCap(max_send_wr=depth, max_recv_wr=1,
                             max_send_sge=1, max_recv_sge=1)
            init = v.qp.QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                                   cap=cap, sq_sig_all=1)
            attr = v.qp.QPAttr(port_num=dev.port)
            attr.pkey_index = 0
            attr.qp_access_flags = access
            # Created in RESET; given ``attr`` pyverbs moves it to INIT.
            qp = v.qp.QP(pd, init, attr)
        except v.error as exc:
            _quiet_close(cq)
            raise RdmaError("cannot create an RC queue pair on %s: %s"
                            % (dev.name, exc))
        return cls(v, dev, stream, qp, cq, depth)

    def endpoint(self):
        dev = self.dev
        return Endpoint(qpn=self.qp.qp_num, psn=self.psn, lid=dev.lid,
                        gid=dev.gid, mtu=dev.mtu,
                        rd_atomic=dev.responder_depth,
                        link_layer=dev.link_layer)

    def connect(self, remote):
        """INIT -> RTR -> RTS towards the peer's ``Endpoint``."""
        dev, v, e = self.dev, self._v, self._v.e
        if remote.link_layer != dev.link_layer:
            raise errors.ProtocolError(
                "RDMA link layers differ: peer %s, here %s"
                % (_LINK_NAMES[remote.link_layer],
                   _LINK_NAMES[dev.link_layer]))
        # RoCE always needs a GRH; InfiniBand only across subnets.
        routed = dev.link_layer == LINK_ETHERNET or (
            any(remote.gid) and remote.gid[:8] != dev.gid[:8])
        attr = v.qp.QPAttr(qp_state=e.IBV_QPS_RTR, port_num=dev.port,
                           path_mtu=min(dev.mtu, remote.mtu))
        attr.dest_qp_num = remote.qpn
        attr.rq_psn = remote.psn
        attr.max_dest_rd_atomic = dev.responder_depth
        attr.min_rnr_timer = QP_MIN_RNR_TIMER
        if routed:
            route = v.addr.GlobalRoute(
                dgid=v.addr.GID(_gid_text(remote.gid)),
                sgid_index=dev.gid_index, hop_limit=GRH_HOP_LIMIT)
            attr.ah_attr = v.addr.AHAttr(port_num=dev.port, is_global=1,
                                         gr=route, dlid=remote.lid)
        else:
            attr.ah_attr = v.addr.AHAttr(port_num=dev.port, is_global=0,
                                         dlid=remote.lid)
        attr.timeout = QP_TIMEOUT
        attr.retry_cnt = QP_RETRY_CNT
        attr.rnr_retry = QP_RNR_RETRY
        attr.sq_psn = self.psn
        attr.max_rd_atomic = min(dev.initiator_depth, remote.rd_atomic)
        step = "RTR"
        try:
            self.qp.to_rtr(attr)
            step = "RTS"
            self.qp.to_rts(attr)
        except v.error as exc:
            raise ConnectionError(
                "cannot bring the RDMA queue pair of data stream %d to %s "
                "towards %s: %s" % (self.stream, step, remote.describe(),
                                    exc))
        self.remote = remote
        self.connected = True

    def read(self, local_addr, lkey, remote_addr, rkey, length):
        """RDMA READ ``length`` bytes; return once they are all here.

        The caller holds ``self.lock``.  On failure raises ConnectionError
        only after every posted READ has completed or been flushed, so the
        local buffer is no longer a DMA target; the queue pair is then
        broken for good (an RC queue pair that failed is in ERROR).
        """
        if self.broken:
            raise ConnectionError(self.broken)
        if not self.connected:
            raise ConnectionError("data stream %d has no connected RDMA "
                                  "queue pair" % self.stream)
        e = self._v.e
        chunk = max(1, min(self.dev.max_msg, MAX_READ_CHUNK))
        offset = outstanding = 0
        failure = ""
        forced = False
        deadline = time.monotonic() + READ_DEADLINE
        while True:
            while not failure and offset < length \
                    and outstanding < self.depth:
                n = min(chunk, length - offset)
                try:
                    self._post_read(local_addr + offset, lkey,
                                    remote_addr + offset, rkey, n)
                except self._v.error as exc:
                    failure = "posting an RDMA READ failed: %s" % exc
                    break
                offset += n
                outstanding += 1
            if not outstanding:
                break
            if not forced and (self.closing or time.monotonic() > deadline):
                failure = failure or (
                    "the data stream was released" if self.closing else
                    "no completion within %d s" % READ_DEADLINE)
                self._force_error()
                forced = True
                deadline = time.monotonic() + DRAIN_DEADLINE
            wcs = self._wait(deadline, stop_on_close=not forced)
            if not wcs and forced and time.monotonic() > deadline:
                failure += "; %d READs were never flushed" % outstanding
                break
            for wc in wcs:
                outstanding -= 1
                if wc.status != e.IBV_WC_SUCCESS and not failure:
                    failure = _wc_text(e, wc)
        if failure:
            self.broken = ("RDMA READ of %d bytes at %#x (rkey %#x) on "
                           "data stream %d failed: %s"
                           % (length, remote_addr, rkey, self.stream,
                              failure))
            raise ConnectionError(self.broken)

    def _post_read(self, local_addr, lkey, remote_addr, rkey, length):
        v, e = self._v, self._v.e
        sge = v.wr.SGE(local_addr, length, lkey)
        try:
            wr = v.wr.SendWR(wr_id=self._next_id, opcode=e.IBV_WR_RDMA_READ,
                             num_sge=1, sg=[sge],
                             send_flags=e.IBV_SEND_SIGNALED)
        finally:
            # SendWR copied the SGE.  pyverbs 44 frees neither object on
            # garbage collection (close() is idempotent in later releases).
            sge.close()
        try:
            wr.set_wr_rdma(rkey, remote_addr)
            self.qp.post_send(wr)
        finally:
            wr.close()       # the send queue holds its own copy
        self._next_id += 1

    def _wait(self, deadline, stop_on_close=True):
        """Completions, polling with backoff.

        [] once past ``deadline`` (or once the stream is closing, with
        ``stop_on_close``).
        """
        sleep = POLL_SLEEP_MIN
        spins = 0
        while True:
            try:
                n, wcs = self.cq.poll(self.depth)
            except self._v.error as exc:
                self._force_error()
                self.broken = ("polling the completion queue of data stream "
                               "%d failed: %s" % (self.stream, exc))
                raise ConnectionError(self.broken)
            if n:
                return wcs
            if (stop_on_close and self.closing) \
                    or time.monotonic() > deadline:
                return []
            if spins < POLL_SPIN:
                spins += 1
                continue
            time.sleep(sleep)
            sleep = min(sleep * 2, POLL_SLEEP_MAX)

    def _force_error(self):
        """Move the queue pair to ERROR: posted READs flush at once."""
        v, e = self._v, self._v.e
        try:
            self.qp.modify(v.qp.QPAttr(qp_state=e.IBV_QPS_ERR),
                           e.IBV_QP_STATE)
        except Exception:
            pass

    def close(self):
        self.closing = True
        with self.lock:                  # wait out a READ in progress
            self.connected = False
            _quiet_close(self.qp)
            _quiet_close(self.cq)


def _wc_text(e, wc):
    try:
        name = e.ibv_wc_status(wc.status).name
    except Exception:
        name = "status %d" % wc.status
    hint = _WC_HINTS.get(name)
    text = "%s (%s)" % (name, hint) if hint else name
    return "%s, vendor error %#x" % (text, wc.vendor_err)


class _Streams:
    """Per data stream queue pairs of one plane."""

    def __init__(self, dev, region, access, pd):
        self.dev = dev
        self.region = region
        self._access = access
        self._pd = pd
        self._qps = {}
        self._lock = threading.Lock()
        self._closed = False

    def create(self, stream):
        if not 0 <= stream < protocol.MAX_STREAMS:
            raise ValueError("data stream index %r out of range" % (stream,))
        qp = self.dev._queue_pair(stream, self._access, self._pd)
        with self._lock:
            old = self._qps.pop(stream, None)
            if self._closed:
                old, qp = qp, None
            else:
                self._qps[stream] = qp
        if old is not None:
            old.close()
        if qp is None:
            raise RdmaError("data plane is closed")
        return qp

    def get(self, stream):
        with self._lock:
            return self._qps.get(stream)

    def drop(self, stream, qp=None):
        with self._lock:
            if qp is None or self._qps.get(stream) is qp:
                qp = self._qps.pop(stream, None)
            else:
                qp = None
        if qp is not None:
            qp.close()

    def close(self):
        with self._lock:
            self._closed = True
            qps, self._qps = list(self._qps.values()), {}
        for qp in qps:
            qp.close()


class RdmaSourcePlane(base.SourcePlane):
    """Source: expose each object's buffer; the sink READs it."""

    kind = protocol.DataPlane.RDMA
    releases_on_send = False

    def __init__(self, dev, pool, pd):
        self.dev = dev
        self.pool = pool
        self.region = pool.region
        self.pd = pd
        self._closed = False
        self._streams = _Streams(dev, self.region,
                                 dev._v.e.IBV_ACCESS_REMOTE_READ, pd)

    def endpoint(self, stream):
        return self._streams.create(stream).endpoint().encode()

    def attach(self, stream, remote):
        peer = Endpoint.decode(remote)
        qp = self._streams.get(stream)
        if qp is None:
            raise ValueError("attach before endpoint for data stream %d"
                             % stream)
        qp.connect(peer)

    def send(self, conn, stream, msg, buf, fd):
        if msg.length > self.region.size:
            raise ValueError("object of %d bytes in a %d-byte buffer"
                             % (msg.length, self.region.size))
        qp = self._streams.get(stream)
        if qp is None or not qp.connected:
            raise ConnectionError("data stream %d has no connected RDMA "
                                  "queue pair" % stream)
        msg.addr = self.region.address_of(buf)
        msg.rkey = self.region.rkey
        conn.send(msg)

    def release_stream(self, stream):
        """Destroy a gone stream's queue pair: no more READs through it."""
        self._streams.drop(stream)

    def close(self):
        """Destroy the queue pairs, then deregister the pool and free the
        protection domain.  The pool's memory stays valid for views still
        held; it just cannot be read remotely any more.
        """
        self._streams.close()
        if not self._closed:
            self._closed = True
            self.pool.close()
            _quiet_close(self.region.mr)
            _quiet_close(self.pd)
        self.dev._forget_plane(self)


class RdmaSinkPlane(base.SinkPlane):
    """Sink: pull each object with RDMA READ into a registered buffer."""

    kind = protocol.DataPlane.RDMA
    acks_pull = True

    def __init__(self, dev, region):
        self.dev = dev
        self.region = region
        self._streams = _Streams(dev, region, 0, dev._pd)

    def accept(self, stream, remote):
        peer = Endpoint.decode(remote)
        qp = self._streams.create(stream)
        try:
            qp.connect(peer)
        except BaseException:
            self._streams.drop(stream, qp)
            raise
        return qp.endpoint().encode()

    def discard(self, conn, stream, msg):
        """Nothing to pull: the bytes stay in the source's memory, and
        BLOCK_PULLED frees them there.
        """

    def receive(self, conn, stream, msg, buf):
        if msg.length > len(buf.view):
            raise errors.BoundsError(
                "object of %d bytes does not fit a %d-byte buffer"
                % (msg.length, len(buf.view)))
        if not msg.length:
            return
        if not msg.addr:
            raise errors.ProtocolError("NEW_BLOCK over RDMA names no buffer")
        local = self.region.address_of(buf)
        qp = self._streams.get(stream)
        if qp is None:
            raise ConnectionError("data stream %d has no RDMA queue pair"
                                  % stream)
        with qp.lock:
            if qp.closing:
                raise ConnectionError("data stream %d was released" % stream)
            qp.read(local, self.region.lkey, msg.addr, msg.rkey, msg.length)

    def release_stream(self, stream):
        self._streams.drop(stream)

    def close(self):
        self._streams.close()
        self.dev._forget_plane(self)
