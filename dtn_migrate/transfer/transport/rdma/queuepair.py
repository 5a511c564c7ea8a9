"""One RC queue pair per data stream: creating it, connecting it to the
peer's ``Endpoint``, and RDMA READ through it.
"""

import os
import threading
import time

from dtn_migrate.transfer import errors
from dtn_migrate.transfer.transport.rdma import endpoint as endpoint_mod
from dtn_migrate.transfer.transport.rdma import resources

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


class QueuePair:
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
            raise resources.RdmaError(
                "cannot create a completion queue on %s: %s"
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
            resources.quiet_close(cq)
            raise resources.RdmaError(
                "cannot create an RC queue pair on %s: %s"
                % (dev.name, exc))
        return cls(v, dev, stream, qp, cq, depth)

    def endpoint(self):
        dev = self.dev
        return endpoint_mod.Endpoint(qpn=self.qp.qp_num, psn=self.psn,
                                     lid=dev.lid, gid=dev.gid, mtu=dev.mtu,
                                     rd_atomic=dev.responder_depth,
                                     link_layer=dev.link_layer)

    def connect(self, remote):
        """INIT -> RTR -> RTS towards the peer's ``Endpoint``."""
        dev, v, e = self.dev, self._v, self._v.e
        if remote.link_layer != dev.link_layer:
            raise errors.ProtocolError(
                "RDMA link layers differ: peer %s, here %s"
                % (endpoint_mod.LINK_NAMES[remote.link_layer],
                   endpoint_mod.LINK_NAMES[dev.link_layer]))
        # RoCE always needs a GRH; InfiniBand only across subnets.
        routed = dev.link_layer == endpoint_mod.LINK_ETHERNET or (
            any(remote.gid) and remote.gid[:8] != dev.gid[:8])
        attr = v.qp.QPAttr(qp_state=e.IBV_QPS_RTR, port_num=dev.port,
                           path_mtu=min(dev.mtu, remote.mtu))
        attr.dest_qp_num = remote.qpn
        attr.rq_psn = remote.psn
        attr.max_dest_rd_atomic = dev.responder_depth
        attr.min_rnr_timer = QP_MIN_RNR_TIMER
        if routed:
            route = v.addr.GlobalRoute(
                dgid=v.addr.GID(endpoint_mod.gid_text(remote.gid)),
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
            resources.quiet_close(self.qp)
            resources.quiet_close(self.cq)


def _wc_text(e, wc):
    try:
        name = e.ibv_wc_status(wc.status).name
    except Exception:
        name = "status %d" % wc.status
    hint = _WC_HINTS.get(name)
    text = "%s (%s)" % (name, hint) if hint else name
    return "%s, vendor error %#x" % (text, wc.vendor_err)
