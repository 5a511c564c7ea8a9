"""An open RDMA device port: its protection domain, pools and planes."""

import threading

from dtn_migrate.transfer.transport.rdma import endpoint as endpoint_mod
from dtn_migrate.transfer.transport.rdma import memory
from dtn_migrate.transfer.transport.rdma import planes as planes_mod
from dtn_migrate.transfer.transport.rdma import queuepair
from dtn_migrate.transfer.transport.rdma import resources


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
            raise resources.DeviceUnusable(
                "RDMA device %s has no port %d: %s" % (name, port, exc))
        if pattr.state != e.IBV_PORT_ACTIVE:
            try:
                state = v.device.port_state_to_str(pattr.state)
            except Exception:
                state = str(pattr.state)
            raise resources.DeviceUnusable(
                "port %d of RDMA device %s is not active (state %s)"
                % (port, name, state))
        self.link_layer = pattr.link_layer
        if self.link_layer not in endpoint_mod.LINK_NAMES:
            # Unspecified (old drivers) means InfiniBand.
            self.link_layer = endpoint_mod.LINK_INFINIBAND
        self.lid = pattr.lid
        self.mtu = pattr.active_mtu
        self.max_msg = pattr.max_msg_sz or queuepair.MAX_READ_CHUNK
        dattr = self._ctx.query_device()
        self.max_mr_size = dattr.max_mr_size
        self.responder_depth = max(1, min(queuepair.MAX_RD_ATOMIC,
                                          dattr.max_qp_rd_atom))
        self.initiator_depth = max(1, min(queuepair.MAX_RD_ATOMIC,
                                          dattr.max_qp_init_rd_atom))
        self.send_depth = max(1, min(queuepair.SEND_QUEUE_DEPTH,
                                     dattr.max_qp_wr))
        if gid_index is None:
            gid_index = self._pick_gid(pattr.gid_tbl_len)
        try:
            self.gid = endpoint_mod.gid_raw(
                self._ctx.query_gid(port, gid_index))
        except (v.error, ValueError) as exc:
            raise resources.DeviceUnusable(
                "cannot read GID %d of port %d of RDMA device %s: %s"
                % (gid_index, port, name, exc))
        self.gid_index = gid_index
        if self.link_layer == endpoint_mod.LINK_ETHERNET and not any(self.gid):
            raise resources.DeviceUnusable(
                "GID %d of port %d of RDMA device %s is empty "
                "(RoCE needs an address on the interface)"
                % (gid_index, port, name))
        if self.link_layer == endpoint_mod.LINK_INFINIBAND and not self.lid:
            raise resources.DeviceUnusable(
                "port %d of RDMA device %s has no LID (no subnet manager?)"
                % (port, name))

    def _pick_gid(self, table_len):
        """On RoCE prefer the first RoCE v2 GID; otherwise index 0."""
        if self.link_layer != endpoint_mod.LINK_ETHERNET:
            return 0
        e, first = self._v.e, None
        for index in range(min(table_len, 256)):
            try:
                raw = endpoint_mod.gid_raw(
                    self._ctx.query_gid(self.port, index))
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
            self.name, self.port, endpoint_mod.LINK_NAMES[self.link_layer],
            self.lid, self.gid_index, endpoint_mod.gid_text(self.gid),
            endpoint_mod.MTU_BYTES.get(self.mtu, 0))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _check_open(self):
        if self._closed:
            raise resources.RdmaError("RDMA device %s is closed" % self.name)

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
        stride = memory.stride_for(size)
        length = count * stride
        if self.max_mr_size and length > self.max_mr_size:
            raise resources.RdmaError(
                "%d buffers of %d bytes exceed the largest MR of %s (%d "
                "bytes)" % (count, size, self.name, self.max_mr_size))
        e = self._v.e
        access = e.IBV_ACCESS_LOCAL_WRITE
        if remote_read:
            access |= e.IBV_ACCESS_REMOTE_READ
        # An optional flag: libibverbs drops it where unsupported.
        access |= e.IBV_ACCESS_RELAXED_ORDERING
        block, address = memory.allocate_block(length)
        try:
            mr = self._v.mr.MR(pd, length, access, address=address)
        except self._v.error as exc:
            block.close()
            # Usually RLIMIT_MEMLOCK or the adapter's MR table: both free
            # up as other transfers end, so the caller may retry.
            raise resources.RdmaExhausted(
                "cannot register %d bytes of buffers with %s: %s%s"
                % (length, self.name, exc, memory.memlock_hint(length)))
        region = memory.Region(block, address, count, size, lkey=mr.lkey,
                               rkey=mr.rkey, stride=stride, mr=mr,
                               owner=self)
        return region.make_pool()

    # Planes.
    def _plane_region(self, pool):
        region = getattr(pool, "region", None)
        if not isinstance(region, memory.Region) or region.owner is not self:
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
            raise resources.RdmaExhausted(
                "cannot allocate a protection domain on %s: %s"
                % (self.name, exc))
        try:
            pool = self._register(pd, count, size, True)
        except BaseException:
            resources.quiet_close(pd)
            raise
        plane = planes_mod.RdmaSourcePlane(self, pool, pd)
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
        plane = planes_mod.RdmaSinkPlane(self, self._plane_region(pool))
        with self._lock:
            self._planes.append(plane)
        return plane

    def _forget_plane(self, plane):
        with self._lock:
            if plane in self._planes:
                self._planes.remove(plane)

    def _queue_pair(self, stream, access, pd):
        self._check_open()
        return queuepair.QueuePair.create(self, stream, access, pd)

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
            resources.quiet_close(pool.region.mr)
        resources.quiet_close(self._pd)
        resources.quiet_close(self._ctx)
