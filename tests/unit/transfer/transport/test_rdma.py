"""Tests of the RDMA data plane (dtn_migrate.transfer.transport.rdma).

Most tests run everywhere: endpoint encoding, pool carving, ``probe``
reasons, and the queue pair logic over fake queue pairs (with pyverbs'
real attribute classes when pyverbs imports).  ``DeviceTest`` needs a
real InfiniBand or RoCE device (rdma_rxe will do) and skips elsewhere with the
reason ``probe`` gave; DTN_RDMA_DEVICE, DTN_RDMA_PORT and
DTN_RDMA_GID_INDEX choose the device.
"""

import collections
import ctypes
import os
import random
import sys
import tempfile
import threading
import time
import types
from unittest import mock


from dtn_migrate.transfer import buffers
from dtn_migrate.transfer import errors
from dtn_migrate.transfer.transport import base
from dtn_migrate.transfer.transport import rdma
from dtn_migrate.transfer.transport.rdma import endpoint as endpoint_mod
from dtn_migrate.transfer.transport.rdma import probing
from dtn_migrate.transfer.transport.rdma import queuepair
from dtn_migrate.transfer.transport import verbs as verbs_loader
from dtn_migrate.transfer.wire import protocol
from tests.unit.transfer.transport import fakeverbs
from tests.unit import utils as test_utils
from tests.unit import testcase

try:
    VERBS = probing._load_verbs()
    VERBS_REASON = ""
except Exception as exc:            # pragma: no cover - no pyverbs
    VERBS = None
    VERBS_REASON = "pyverbs is not importable: %s" % exc

GID_A = bytes.fromhex("00000000000000000000ffff0a000001")
GID_B = bytes.fromhex("00000000000000000000ffff0a000002")
IB_GID_A = bytes.fromhex("fe800000000000000002c90300000001")
IB_GID_B = bytes.fromhex("fe800000000000000002c90300000002")


def endpoint(**kw):
    fields = dict(qpn=0x1234, psn=0x56789a, lid=0, gid=GID_A, mtu=5,
                  rd_atomic=16, link_layer=rdma.LINK_ETHERNET)
    fields.update(kw)
    return rdma.Endpoint(**fields)


def new_block(length, index=0):
    return protocol.NewBlock(file_id=1, index=index, offset=index << 20,
                             length=length, xxh3=0)


class FakeConn:
    def __init__(self):
        self.sent = []

    def send(self, msg, payload=None, sendfile=None):
        self.sent.append((msg, payload, sendfile))


class EndpointTest(testcase.TestCase):

    def test_round_trip(self):
        for ep in (endpoint(),
                   endpoint(link_layer=rdma.LINK_INFINIBAND, lid=0x1f,
                            gid=IB_GID_A, mtu=4, rd_atomic=1,
                            qpn=(1 << 24) - 1, psn=0)):
            blob = ep.encode()
            self.assertEqual(rdma.ENDPOINT_SIZE, len(blob))
            self.assertEqual(ep, rdma.Endpoint.decode(blob))
            self.assertEqual(ep, rdma.Endpoint.decode(bytearray(blob)))
            self.assertEqual(ep, rdma.Endpoint.decode(memoryview(blob)))

    def test_fits_connect(self):
        blob = endpoint().encode()
        self.assertLessEqual(len(blob), 4096)
        self.assertTrue(blob.startswith(b"DTNR\x01"))

    def assertRejected(self, blob, text=None):
        exc = self.assertRaises(errors.ProtocolError,
                                rdma.Endpoint.decode, blob)
        if text:
            self.assertIn(text, str(exc))
        return exc

    def test_truncated(self):
        blob = endpoint().encode()
        for n in range(len(blob)):
            self.assertRejected(blob[:n])
        self.assertRejected(b"", "no RDMA endpoint")
        self.assertRejected(blob[:-1], "expected %d" % rdma.ENDPOINT_SIZE)

    def test_oversized(self):
        blob = endpoint().encode()
        self.assertRejected(blob + b"\0", "expected %d" % len(blob))
        self.assertRejected(blob + bytes(4096))

    def test_wrong_version(self):
        blob = endpoint().encode()
        for version in (0, 2, 255):
            bad = blob[:4] + bytes([version]) + blob[5:]
            self.assertRejected(bad, "version %d" % version)
        # A longer blob of a later version names the version, not length.
        self.assertRejected(blob[:4] + b"\x02" + blob[5:] + bytes(20),
                            "version 2")

    def test_bad_magic_and_reserved(self):
        blob = endpoint().encode()
        self.assertRejected(b"XXXX" + blob[4:], "magic")
        reserved = 4 + 4 + 2
        bad = blob[:reserved] + b"\0\1" + blob[reserved + 2:]
        self.assertRejected(bad, "reserved")

    def test_not_bytes(self):
        self.assertRejected("DTNR")
        self.assertRejected(None)

    def test_field_checks(self):
        cases = [dict(qpn=0), dict(qpn=1), dict(psn=1 << 24),
                 dict(mtu=0), dict(mtu=6), dict(rd_atomic=0),
                 dict(link_layer=0), dict(link_layer=3),
                 dict(gid=bytes(16)),
                 dict(link_layer=rdma.LINK_INFINIBAND, lid=0)]
        for case in cases:
            ep = endpoint(**case)
            self.assertRaises(ValueError, ep.encode)
            # Same fields forged on the wire are refused as junk.
            good = endpoint()
            blob = endpoint_mod._ENDPOINT_V1.pack(
                b"DTNR", 1, ep.link_layer, ep.mtu, ep.rd_atomic, ep.lid, 0,
                ep.qpn & 0xffffffff, ep.psn, ep.gid)
            self.assertNotEqual(good.encode(), blob)
            self.assertRejected(blob, "bad RDMA endpoint")

    def test_junk_only_raises_protocol_error(self):
        rnd = random.Random(1234)
        blob = endpoint().encode()
        for _ in range(2000):
            junk = bytearray(blob)
            for _ in range(rnd.randint(1, 4)):
                junk[rnd.randrange(len(junk))] = rnd.randrange(256)
            if rnd.random() < 0.3:
                junk = junk[:rnd.randrange(len(junk) + 8)]
            try:
                rdma.Endpoint.decode(bytes(junk))
            except errors.ProtocolError:
                pass

    def test_gid_text(self):
        text = endpoint_mod.gid_text(IB_GID_A)
        self.assertEqual("fe80:0000:0000:0000:0002:c903:0000:0001", text)
        self.assertEqual(IB_GID_A, endpoint_mod.gid_raw(text))
        self.assertRaises(ValueError, endpoint_mod.gid_raw, "fe80::1")


class RegionTest(testcase.TestCase):

    def test_stride(self):
        page = rdma.PAGE_SIZE
        self.assertEqual(page, rdma.stride_for(1))
        self.assertEqual(page, rdma.stride_for(page))
        self.assertEqual(2 * page, rdma.stride_for(page + 1))
        self.assertRaises(ValueError, rdma.stride_for, 0)

    def _pool(self, count=4, size=5000):
        stride = rdma.stride_for(size)
        block = bytearray(count * stride)
        region = rdma.Region(block, 0x7f0000000000, count, size,
                             lkey=11, rkey=22)
        return block, region, region.make_pool()

    def test_views_disjoint_sized_writable_zero_copy(self):
        block, region, pool = self._pool()
        self.assertIsInstance(pool, rdma.RegionPool)
        self.assertEqual((4, 5000), (pool.count, pool.size))
        bufs = [pool.acquire(timeout=0) for _ in range(4)]
        self.assertIsNone(pool.acquire(timeout=0))
        spans = []
        for buf in bufs:
            self.assertEqual(5000, len(buf.view))
            self.assertFalse(buf.view.readonly)
            addr = region.address_of(buf)
            self.assertEqual(0x7f0000000000 + buf.index * region.stride,
                             addr)
            self.assertEqual(0, addr % rdma.PAGE_SIZE)
            spans.append((addr, addr + len(buf.view)))
        spans.sort()
        for (_, end), (start, _) in zip(spans, spans[1:]):
            self.assertLessEqual(end, start)
        for buf in bufs:
            buf.view[:] = bytes([buf.index + 1]) * len(buf.view)
        for buf in bufs:
            off = buf.index * region.stride
            self.assertEqual(bytes([buf.index + 1]) * 5000,
                             bytes(block[off:off + 5000]))
            # Nothing spilled past the buffer into the padding.
            self.assertEqual(bytes(region.stride - 5000),
                             bytes(block[off + 5000:off + region.stride]))
        block[region.stride] = 0xee
        self.assertEqual(0xee, bufs[1].view[0])

    def test_address_of_rejects_foreign_buffers(self):
        _, region, pool = self._pool()
        _, _, other = self._pool()
        buf = pool.acquire()
        self.assertRaises(ValueError, region.address_of,
                          other.acquire())
        self.assertRaises(ValueError, region.address_of,
                          buffers.Buffer(buf.index,
                                         memoryview(bytearray(5000))))
        self.assertRaises(ValueError, region.address_of,
                          buffers.Buffer(99, buf.view))

    def test_bad_regions(self):
        self.assertRaises(ValueError, rdma.Region, bytearray(100), 0, 1, 50,
                          stride=10)
        self.assertRaises(ValueError, rdma.Region,
                          bytearray(rdma.PAGE_SIZE), 0, 2, 10)
        self.assertRaises(ValueError, rdma.Region, bytes(rdma.PAGE_SIZE),
                          0, 1, 10)
        self.assertRaises(ValueError, rdma.Region,
                          bytearray(rdma.PAGE_SIZE), 0, 0, 10)
        _, region, _ = self._pool(count=2)
        self.assertRaises(IndexError, region.allocator, 2, 10)
        self.assertRaises(ValueError, region.allocator, 0, 5001)

    def test_allocated_block_address_matches_views(self):
        size, count = 10000, 3
        stride = rdma.stride_for(size)
        block, address = rdma.allocate_block(count * stride)
        self.assertEqual(0, address % rdma.PAGE_SIZE)
        region = rdma.Region(block, address, count, size, stride=stride)
        pool = region.make_pool()
        bufs = [pool.acquire() for _ in range(count)]
        data = os.urandom(size)
        with tempfile.TemporaryFile() as f:
            f.write(data)
            f.flush()
            for buf in bufs:
                # The engine's zero-copy I/O: preadv into, pwrite from.
                self.assertEqual(size, os.preadv(f.fileno(), [buf.view], 0))
                # What the adapter sees at the buffer's address.
                self.assertEqual(data, ctypes.string_at(
                    region.address_of(buf), size))
            bufs[1].view[:4] = b"abcd"
            self.assertEqual(b"abcd", ctypes.string_at(address + stride, 4))
            self.assertEqual(4, os.pwrite(f.fileno(), bufs[1].view[:4], 0))
            f.seek(0)
            self.assertEqual(b"abcd", f.read(4))
        # Views keep the memory alive: it cannot be unmapped under them.
        self.assertRaises(BufferError, block.close)


def fake_verbs(devices=("fake0",), link=rdma.LINK_ETHERNET, state=4,
               transports=None, lid=0, gids=None, list_error=None,
               open_error=None, reg_error=None):
    """The fake pyverbs (``fakeverbs``, checked against the real one by
    test_verbs_conformance) as ``_load_verbs`` returns it, and its log.
    """
    if gids is None:
        gids = [("fe80:0000:0000:0000:0000:00ff:fe00:0001", 0),
                ("fe80:0000:0000:0000:0000:00ff:fe00:0001", 1),
                ("0000:0000:0000:0000:0000:ffff:0a00:0001", 0),
                ("0000:0000:0000:0000:0000:ffff:0a00:0001", 1)]
    fabric = fakeverbs.Fabric(
        devices=devices, link_layer=link, state=state, lid=lid, gids=gids,
        transports=transports, list_error=list_error,
        open_error=open_error, reg_error=reg_error)
    with fakeverbs.install(fabric):
        verbs = verbs_loader.load()
    return verbs, fabric.log


class ProbeTest(testcase.TestCase):

    def probe(self, verbs, **kw):
        with mock.patch.object(probing, "_load_verbs", return_value=verbs):
            return rdma.probe(**kw)

    def test_probe_here_does_not_raise(self):
        dev, reason = rdma.probe()
        if dev is not None:         # pragma: no cover - a device exists
            dev.close()
            self.skipTest("this machine has an RDMA device")
        self.assertTrue(reason.startswith("no RDMA device"), reason)
        self.assertTrue("get_device_list failed" in reason
                        or "not importable" in reason
                        or "device list is empty" in reason, reason)
        dev, reason2 = rdma.probe(device="mlx5_0", port=2, gid_index=3)
        self.assertIsNone(dev)
        self.assertTrue(reason2)

    def test_pyverbs_missing(self):
        with mock.patch.dict(sys.modules, {"pyverbs": None}):
            dev, reason = rdma.probe()
        self.assertIsNone(dev)
        self.assertTrue(reason.startswith(
            "no RDMA device: pyverbs is not installed"), reason)

    def test_device_list_fails(self):
        verbs, _ = fake_verbs(list_error="Failed to get devices list")
        dev, reason = self.probe(verbs)
        self.assertIsNone(dev)
        self.assertIn("get_device_list failed: Failed to get devices list",
                      reason)

    def test_no_devices(self):
        verbs, _ = fake_verbs(devices=())
        self.assertEqual((None, "no RDMA device: the device list is empty"),
                         self.probe(verbs))

    def test_named_device_missing(self):
        verbs, _ = fake_verbs(devices=("mlx5_0", "mlx5_1"))
        dev, reason = self.probe(verbs, device="rxe0")
        self.assertIsNone(dev)
        self.assertIn("'rxe0' not found", reason)
        self.assertIn("mlx5_0, mlx5_1", reason)

    def test_port_not_active(self):
        verbs, log = fake_verbs(state=1)
        dev, reason = self.probe(verbs)
        self.assertIsNone(dev)
        self.assertIn("port 1 of RDMA device fake0 is not active", reason)
        self.assertIn("Down", reason)
        self.assertIn(("close", "Context"), log)

    def test_bad_port_and_open_failure(self):
        verbs, _ = fake_verbs()
        dev, reason = self.probe(verbs, port=2)
        self.assertIsNone(dev)
        self.assertIn("has no port 2", reason)
        verbs, _ = fake_verbs(open_error="Failed to open device")
        dev, reason = self.probe(verbs)
        self.assertIsNone(dev)
        self.assertIn("cannot open RDMA device fake0", reason)

    def test_unusable_gids_and_lids(self):
        verbs, _ = fake_verbs(gids=[("0000:" * 7 + "0000", 0)])
        self.assertIn("is empty", self.probe(verbs)[1])
        verbs, _ = fake_verbs(link=rdma.LINK_INFINIBAND, lid=0)
        self.assertIn("has no LID", self.probe(verbs)[1])
        verbs, _ = fake_verbs()
        self.assertIn("cannot read GID 9", self.probe(verbs, gid_index=9)[1])

    def test_first_usable_device_wins(self):
        verbs, _ = fake_verbs(devices=("a", "b"))
        dev, reason = self.probe(verbs)
        self.assertEqual("", reason)
        self.assertEqual("a", dev.name)
        dev.close()
        verbs, _ = fake_verbs(devices=("siw0", "rxe0"),
                              transports={"siw0": 1})
        dev, reason = self.probe(verbs)
        self.assertEqual("rxe0", dev.name)
        dev.close()

    def test_iwarp_refused(self):
        verbs, log = fake_verbs(devices=("siw0",), transports={"siw0": 1})
        dev, reason = self.probe(verbs, device="siw0")
        self.assertIsNone(dev)
        self.assertIn("siw0 uses the iWARP transport", reason)
        self.assertEqual([], log)

    def test_roce_gid_choice(self):
        verbs, _ = fake_verbs()
        dev, _ = self.probe(verbs, gid_index=None)
        self.assertEqual(1, dev.gid_index)      # first RoCE v2 GID
        self.assertEqual(rdma.LINK_ETHERNET, dev.link_layer)
        self.assertEqual(8, dev.initiator_depth)
        self.assertIn("fake0 port 1 (Ethernet", dev.describe())
        dev.close()
        dev, _ = self.probe(verbs, gid_index=3)
        self.assertEqual(bytes.fromhex("00" * 10 + "ffff0a000001"), dev.gid)
        dev.close()

    def test_make_pool_registers_one_mr(self):
        verbs, log = fake_verbs(link=rdma.LINK_INFINIBAND, lid=7)
        dev, _ = self.probe(verbs)
        pool = dev.make_pool(3, 6000)
        region = pool.region
        stride = rdma.stride_for(6000)
        regs = [x for x in log if x[0] == "reg"]
        relaxed = int(verbs_loader.enum_namespace(
            fakeverbs.REAL_ENUMS).IBV_ACCESS_RELAXED_ORDERING)
        self.assertEqual([("reg", 3 * stride, 1 | 4 | relaxed,
                           region.address)], regs)
        self.assertEqual((region.mr.lkey, region.mr.rkey),
                         (region.lkey, region.rkey))
        bufs = [pool.acquire() for _ in range(3)]
        self.assertEqual(region.address + stride,
                         region.address_of(bufs[1]))
        bufs[2].view[-1] = 0x5a
        self.assertEqual(b"\x5a", ctypes.string_at(
            region.address_of(bufs[2]) + 5999, 1))
        dev.make_pool(1, 100, remote_read=False)
        self.assertEqual(1 | relaxed, log[-1][2])
        # Planes only over this device's pools.
        self.assertRaises(ValueError, dev.sink_plane,
                          rdma.Region(bytearray(rdma.PAGE_SIZE), 0, 1,
                                      10).make_pool())
        dev.close()
        self.assertIsNone(pool.acquire(timeout=0))
        self.assertTrue(region.mr.closed)
        self.assertEqual(["MR", "MR", "PD", "Context"],
                         [x[1] for x in log if x[0] == "close"])
        # The memory outlives the registration.
        bufs[0].view[0] = 1
        self.assertRaises(rdma.RdmaError, dev.make_pool, 1, 10)
        dev.close()

    def test_make_pool_registration_failure(self):
        verbs, _ = fake_verbs(reg_error="Failed to register a MR")
        dev, _ = self.probe(verbs)
        exc = self.assertRaises(rdma.RdmaError, dev.make_pool, 2, 4096)
        self.assertIn("cannot register 8192 bytes", str(exc))
        # Retryable: the source retries an attempt on ConnectionError.
        self.assertIsInstance(exc, ConnectionError)
        dev.close()


# Queue pair logic over fakes, with pyverbs' own attribute classes.

class FakeCQ:
    def __init__(self):
        self.done = collections.deque()
        self.closed = False
        self.polls = 0

    def poll(self, num_entries=1):
        self.polls += 1
        wcs = []
        while self.done and len(wcs) < num_entries:
            wr_id, status = self.done.popleft()
            wcs.append(VERBS.cq.WC(wr_id=wr_id, status=status,
                                   vendor_err=0x42 if status else 0))
        return len(wcs), wcs

    def close(self):
        self.closed = True


class FakeQP:
    """Records what the code asks of a queue pair.

    ``mode``: "ok" completes each READ at once, "hang" never completes
    until the queue pair is moved to ERROR, "bad" fails the first READ.
    """

    def __init__(self, cq, qp_num=0x1234, mode="ok", fail_step=None,
                 post_error_at=None):
        self.cq = cq
        self.qp_num = qp_num
        self.mode = mode
        self.fail_step = fail_step
        self.post_error_at = post_error_at
        self.steps = []
        self.posted = []
        self.pending = []
        self.max_pending = 0
        self.error = False
        self.closed = False

    def _snap(self, step, attr):
        if step == self.fail_step:
            raise VERBS.error("Failed to modify QP state to %s" % step)
        ah = attr.ah_attr
        self.steps.append(dict(
            step=step, qp_state=attr.qp_state, path_mtu=attr.path_mtu,
            dest_qp_num=attr.dest_qp_num, rq_psn=attr.rq_psn,
            sq_psn=attr.sq_psn, max_rd_atomic=attr.max_rd_atomic,
            max_dest_rd_atomic=attr.max_dest_rd_atomic,
            timeout=attr.timeout, retry_cnt=attr.retry_cnt,
            rnr_retry=attr.rnr_retry, min_rnr_timer=attr.min_rnr_timer,
            port_num=attr.port_num, is_global=ah.is_global, dlid=ah.dlid,
            dgid=ah.dgid, sgid_index=ah.sgid_index,
            hop_limit=ah.hop_limit, ah_port=ah.port_num))

    def to_rtr(self, attr):
        self._snap("RTR", attr)

    def to_rts(self, attr):
        self._snap("RTS", attr)

    def post_send(self, wr):
        if self.post_error_at is not None and \
                len(self.posted) == self.post_error_at:
            raise VERBS.error("Failed to post send")
        self.posted.append((wr.wr_id, wr.opcode, wr.num_sge,
                            wr.send_flags))
        e = VERBS.e
        if self.error:
            self.cq.done.append((wr.wr_id,
                                 e.ibv_wc_status.IBV_WC_WR_FLUSH_ERR))
        elif self.mode == "bad":
            self.cq.done.append((wr.wr_id,
                                 e.ibv_wc_status.IBV_WC_REM_ACCESS_ERR))
            self.error = True
            self.flush()
        elif self.mode == "ok":
            self.cq.done.append((wr.wr_id, e.ibv_wc_status.IBV_WC_SUCCESS))
        else:
            self.pending.append(wr.wr_id)
        self.max_pending = max(self.max_pending, len(self.pending))

    def flush(self):
        for wr_id in self.pending:
            self.cq.done.append((wr_id,
                                 VERBS.e.ibv_wc_status.IBV_WC_WR_FLUSH_ERR))
        self.pending = []

    def complete_one(self):
        self.cq.done.append((self.pending.pop(0),
                             VERBS.e.ibv_wc_status.IBV_WC_SUCCESS))

    def modify(self, attr, mask):
        if attr.qp_state == VERBS.e.IBV_QPS_ERR:
            self.error = True
            self.flush()

    def close(self):
        self.closed = True


def fake_dev(**kw):
    fields = dict(name="fake0", port=1, lid=0, gid=GID_A, gid_index=3,
                  mtu=5, responder_depth=16, initiator_depth=8,
                  max_msg=1 << 30, link_layer=rdma.LINK_ETHERNET,
                  send_depth=4)
    fields.update(kw)
    return types.SimpleNamespace(**fields)


def need_verbs(test):
    def wrapper(self, *a, **kw):
        if VERBS is None:
            self.skipTest(VERBS_REASON)
        return test(self, *a, **kw)
    wrapper.__name__ = test.__name__
    return wrapper


class QueuePairTest(testcase.TestCase):

    def make(self, dev=None, **kw):
        cq = FakeCQ()
        qp = FakeQP(cq, **kw)
        dev = dev or fake_dev()
        return queuepair.QueuePair(VERBS, dev, 0, qp, cq, dev.send_depth), qp

    @need_verbs
    def test_connect_roce(self):
        qpair, qp = self.make()
        remote = endpoint(gid=GID_B, mtu=3, rd_atomic=4, qpn=0x99,
                          psn=0x777)
        qpair.connect(remote)
        self.assertTrue(qpair.connected)
        rtr, rts = qp.steps
        e = VERBS.e
        self.assertEqual(e.IBV_QPS_RTR, rtr["qp_state"])
        self.assertEqual(rtr, dict(rts, step="RTR", qp_state=rtr["qp_state"]))
        self.assertEqual(3, rts["path_mtu"])          # min of both ports
        self.assertEqual(0x99, rts["dest_qp_num"])
        self.assertEqual(0x777, rts["rq_psn"])
        self.assertEqual(qpair.psn, rts["sq_psn"])
        self.assertEqual(4, rts["max_rd_atomic"])     # peer accepts 4
        self.assertEqual(16, rts["max_dest_rd_atomic"])
        self.assertEqual((queuepair.QP_TIMEOUT, queuepair.QP_RETRY_CNT,
                          queuepair.QP_RNR_RETRY, queuepair.QP_MIN_RNR_TIMER),
                         (rts["timeout"], rts["retry_cnt"],
                          rts["rnr_retry"], rts["min_rnr_timer"]))
        self.assertEqual(1, rts["is_global"])
        self.assertEqual(endpoint_mod.gid_text(GID_B), rts["dgid"])
        self.assertEqual(3, rts["sgid_index"])
        self.assertEqual(queuepair.GRH_HOP_LIMIT, rts["hop_limit"])
        self.assertEqual((1, 1), (rts["port_num"], rts["ah_port"]))
        ours = qpair.endpoint()
        self.assertEqual((0x1234, GID_A, 5, 16),
                         (ours.qpn, ours.gid, ours.mtu, ours.rd_atomic))
        self.assertEqual(ours, rdma.Endpoint.decode(ours.encode()))

    @need_verbs
    def test_connect_infiniband(self):
        dev = fake_dev(link_layer=rdma.LINK_INFINIBAND, lid=3,
                       gid=IB_GID_A, gid_index=0)
        qpair, qp = self.make(dev)
        qpair.connect(endpoint(link_layer=rdma.LINK_INFINIBAND, lid=9,
                               gid=IB_GID_B))
        rts = qp.steps[-1]
        self.assertEqual((0, 9), (rts["is_global"], rts["dlid"]))
        # Another subnet prefix: routed through the GRH.
        qpair, qp = self.make(dev)
        other = b"\xfe\x80\0\0\0\0\0\x01" + IB_GID_B[8:]
        qpair.connect(endpoint(link_layer=rdma.LINK_INFINIBAND, lid=9,
                               gid=other))
        self.assertEqual(1, qp.steps[-1]["is_global"])

    @need_verbs
    def test_connect_failures(self):
        qpair, _ = self.make()
        self.assertRaises(errors.ProtocolError, qpair.connect,
                          endpoint(link_layer=rdma.LINK_INFINIBAND, lid=2))
        qpair, _ = self.make(fail_step="RTR")
        exc = self.assertRaises(ConnectionError, qpair.connect, endpoint())
        self.assertIn("to RTR", str(exc))
        self.assertFalse(qpair.connected)
        qpair, _ = self.make(fail_step="RTS")
        exc = self.assertRaises(ConnectionError, qpair.connect, endpoint())
        self.assertIn("to RTS", str(exc))

    @need_verbs
    def test_read_posts_signaled_rdma_reads_in_a_window(self):
        qpair, qp = self.make(dev=fake_dev(max_msg=4096, send_depth=2),
                              mode="hang")
        qpair.connect(endpoint())

        def completer():
            while qpair.connected and not qp.closed:
                if qp.pending:
                    qp.complete_one()
                time.sleep(0.001)

        t = threading.Thread(target=completer)
        t.start()
        try:
            with qpair.lock:
                qpair.read(0x1000, 1, 0x2000, 2, 5 * 4096 + 1)
        finally:
            qpair.connected = False
            t.join()
        self.assertEqual(6, len(qp.posted))
        self.assertLessEqual(qp.max_pending, 2)
        e = VERBS.e
        for i, (wr_id, opcode, nsge, flags) in enumerate(qp.posted):
            self.assertEqual((i + 1, e.IBV_WR_RDMA_READ, 1), (wr_id, opcode,
                                                              nsge))
            self.assertTrue(flags & e.IBV_SEND_SIGNALED)
        self.assertFalse(qp.cq.done)

    @need_verbs
    def test_read_bad_completion(self):
        qpair, qp = self.make(dev=fake_dev(max_msg=4096), mode="bad")
        qpair.connect(endpoint())
        with qpair.lock:
            exc = self.assertRaises(ConnectionError, qpair.read,
                                    0x1000, 1, 0xdead000, 0xbad, 3 * 4096)
        text = str(exc)
        self.assertIn("IBV_WC_REM_ACCESS_ERR", text)
        self.assertIn("bad rkey", text)
        self.assertIn("rkey 0xbad", text)
        self.assertIn("data stream 0", text)
        self.assertEqual(3, len(qp.posted))       # one window
        self.assertFalse(qp.cq.done)              # all drained
        # The queue pair is broken for good.
        with qpair.lock:
            self.assertRaises(ConnectionError, qpair.read, 0, 1, 0, 2, 10)
        self.assertEqual(3, len(qp.posted))

    @need_verbs
    def test_read_post_failure_drains_what_was_posted(self):
        qpair, qp = self.make(dev=fake_dev(max_msg=4096), post_error_at=2)
        qpair.connect(endpoint())
        with qpair.lock:
            exc = self.assertRaises(ConnectionError, qpair.read,
                                    0x1000, 1, 0x2000, 2, 4 * 4096)
        self.assertIn("posting an RDMA READ failed", str(exc))
        self.assertEqual(2, len(qp.posted))
        self.assertFalse(qp.cq.done)

    @need_verbs
    def test_read_not_connected(self):
        qpair, _ = self.make()
        with qpair.lock:
            self.assertRaises(ConnectionError, qpair.read, 0, 1, 0, 2, 10)

    @need_verbs
    def test_read_deadline_forces_error_and_drains(self):
        qpair, qp = self.make(mode="hang")
        qpair.connect(endpoint())
        self.useFixture_patch("READ_DEADLINE", 0.05)
        with qpair.lock:
            exc = self.assertRaises(ConnectionError, qpair.read,
                                    0x1000, 1, 0x2000, 2, 100)
        self.assertIn("no completion within", str(exc))
        self.assertTrue(qp.error)
        self.assertFalse(qp.pending)
        self.assertFalse(qp.cq.done)

    def useFixture_patch(self, name, value):
        patcher = mock.patch.object(queuepair, name, value)
        patcher.start()
        self.addCleanup(patcher.stop)

    @need_verbs
    def test_close_interrupts_a_read(self):
        qpair, qp = self.make(mode="hang")
        qpair.connect(endpoint())
        result = []

        def reader():
            try:
                with qpair.lock:
                    qpair.read(0x1000, 1, 0x2000, 2, 100)
            except ConnectionError as exc:
                result.append(str(exc))

        t = threading.Thread(target=reader)
        t.start()
        test_utils.wait_until(lambda: qp.pending, 5, interval=0.001)
        qpair.close()
        t.join(5)
        self.assertFalse(t.is_alive())
        self.assertEqual(1, len(result))
        self.assertIn("released", result[0])
        self.assertTrue(qp.closed and qp.cq.closed)

    @need_verbs
    def test_wait_backs_off(self):
        qpair, qp = self.make()
        start = time.monotonic()
        self.assertEqual([], qpair._wait(start + 0.05))
        self.assertGreaterEqual(time.monotonic() - start, 0.05)
        # Spins first, then sleeps: far fewer polls than a busy loop.
        self.assertLess(qp.cq.polls, 0.05 / queuepair.POLL_SLEEP_MIN + 100)


class SimQueuePair(queuepair.QueuePair):
    """A queue pair whose READs are memmoves checked like an adapter's."""

    def _post_read(self, local_addr, lkey, remote_addr, rkey, length):
        e = VERBS.e
        wr_id = self._next_id
        self._next_id += 1
        fabric = self.dev.fabric
        src = fabric.get(rkey)
        dst = fabric.get(("l", lkey))
        ok = (src is not None and dst is not None and not self.qp.error
              and src.address <= remote_addr
              and remote_addr + length <= src.address + len(src.view)
              and dst.address <= local_addr
              and local_addr + length <= dst.address + len(dst.view))
        if ok:
            ctypes.memmove(local_addr, remote_addr, length)
            self.cq.done.append((wr_id, e.ibv_wc_status.IBV_WC_SUCCESS))
        else:
            self.cq.done.append((wr_id, e.ibv_wc_status.IBV_WC_WR_FLUSH_ERR
                                 if self.qp.error else
                                 e.ibv_wc_status.IBV_WC_REM_ACCESS_ERR))
            self.qp.error = True


class SimDevice:
    """Enough of RdmaDevice for the planes, with simulated READ."""

    def __init__(self):
        self._v = VERBS
        self._pd = None
        self.fabric = {}
        self.forgotten = []
        self.qpn = 0x100
        self.__dict__.update(vars(fake_dev()))

    def region(self, count, size, key):
        stride = rdma.stride_for(size)
        block, address = rdma.allocate_block(count * stride)
        region = rdma.Region(block, address, count, size, lkey=key,
                             rkey=key + 1, owner=self)
        self.fabric[key + 1] = region
        self.fabric[("l", key)] = region
        return region

    def _queue_pair(self, stream, access, pd):
        self.qpn += 1
        cq = FakeCQ()
        return SimQueuePair(VERBS, self, stream, FakeQP(cq, self.qpn), cq,
                            self.send_depth)

    def _forget_plane(self, plane):
        self.forgotten.append(plane)


class SimulatedPlaneTest(testcase.TestCase):
    """Source and sink planes end to end over simulated queue pairs."""

    def setUp(self):
        super().setUp()
        if VERBS is None:
            self.skipTest(VERBS_REASON)
        self.dev = SimDevice()
        self.src_region = self.dev.region(4, 64 << 10, 0x10)
        self.dst_region = self.dev.region(4, 64 << 10, 0x20)
        self.src_pool = self.src_region.make_pool()
        self.dst_pool = self.dst_region.make_pool()
        self.splane = rdma.RdmaSourcePlane(self.dev, self.src_pool, None)
        self.kplane = rdma.RdmaSinkPlane(self.dev, self.dst_region)
        self.conn = FakeConn()

    def connect(self, stream):
        ours = self.kplane.accept(stream, self.splane.endpoint(stream))
        self.splane.attach(stream, ours)

    def test_kinds(self):
        self.assertIsInstance(self.splane, base.SourcePlane)
        self.assertIsInstance(self.kplane, base.SinkPlane)
        self.assertEqual(protocol.DataPlane.RDMA, self.splane.kind)
        self.assertEqual(protocol.DataPlane.RDMA, self.kplane.kind)
        self.assertFalse(self.splane.releases_on_send)
        self.assertTrue(self.kplane.acks_pull)

    def test_objects_move(self):
        self.connect(0)
        self.connect(1)
        rnd = random.Random(7)
        for i, length in enumerate([1, 4096, 5000, 64 << 10, 12345]):
            stream = i % 2
            src = self.src_pool.acquire()
            data = rnd.randbytes(length)
            src.view[:length] = data
            self.splane.send(self.conn, stream, new_block(length, i), src,
                             None)
            msg, payload, sendfile = self.conn.sent[-1]
            self.assertIsNone(payload)
            self.assertIsNone(sendfile)
            self.assertEqual(self.src_region.address_of(src), msg.addr)
            self.assertEqual(self.src_region.rkey, msg.rkey)
            # The NEW_BLOCK survives the wire.
            msg = protocol.NewBlock.decode(msg.encode())
            dst = self.dst_pool.acquire()
            self.kplane.receive(self.conn, stream, msg, dst)
            self.assertEqual(data, bytes(dst.view[:length]))
            self.src_pool.release(src)
            self.dst_pool.release(dst)

    def test_bad_rkey(self):
        self.connect(0)
        src = self.src_pool.acquire()
        self.splane.send(self.conn, 0, new_block(100), src, None)
        msg = self.conn.sent[-1][0]
        msg.rkey ^= 0xffff
        exc = self.assertRaises(ConnectionError, self.kplane.receive,
                                self.conn, 0, msg, self.dst_pool.acquire())
        self.assertIn("IBV_WC_REM_ACCESS_ERR", str(exc))

    def test_sink_checks(self):
        self.connect(0)
        dst = self.dst_pool.acquire()
        self.assertRaises(errors.BoundsError, self.kplane.receive,
                          self.conn, 0, new_block((64 << 10) + 1), dst)
        msg = new_block(10)
        self.assertRaises(errors.ProtocolError, self.kplane.receive,
                          self.conn, 0, msg, dst)          # addr 0
        self.kplane.receive(self.conn, 0, new_block(0), dst)
        msg.addr = self.src_region.address
        self.assertRaises(ConnectionError, self.kplane.receive,
                          self.conn, 5, msg, dst)          # no such stream
        self.assertRaises(ValueError, self.kplane.receive, self.conn, 0,
                          msg, self.src_pool.acquire())    # foreign buffer

    def test_source_checks(self):
        src = self.src_pool.acquire()
        self.assertRaises(ConnectionError, self.splane.send, self.conn, 0,
                          new_block(10), src, None)        # not attached
        self.splane.endpoint(0)
        self.assertRaises(ConnectionError, self.splane.send, self.conn, 0,
                          new_block(10), src, None)
        self.assertRaises(ValueError, self.splane.attach, 1,
                          endpoint().encode())             # no endpoint(1)
        self.assertRaises(errors.ProtocolError, self.splane.attach, 0,
                          b"junk")
        self.assertRaises(errors.ProtocolError, self.kplane.accept, 0,
                          b"")
        self.assertRaises(ValueError, self.splane.endpoint,
                          protocol.MAX_STREAMS)
        self.assertEqual([], self.conn.sent)

    def test_release_and_reconnect(self):
        self.connect(0)
        old = self.kplane._streams.get(0)
        self.kplane.release_stream(0)
        self.assertTrue(old.qp.closed and old.cq.closed)
        self.kplane.release_stream(0)                      # idempotent
        msg = new_block(10)
        msg.addr = self.src_region.address
        self.assertRaises(ConnectionError, self.kplane.receive, self.conn,
                          0, msg, self.dst_pool.acquire())
        src_qp = self.splane._streams.get(0)
        self.splane.release_stream(0)
        self.assertTrue(src_qp.qp.closed)
        self.connect(0)
        first = self.kplane._streams.get(0)
        self.connect(0)                                    # replaces
        self.assertTrue(first.qp.closed)
        self.kplane.close()
        self.splane.close()
        self.assertEqual([self.kplane, self.splane], self.dev.forgotten)
        self.assertRaises(rdma.RdmaError, self.kplane.accept, 0,
                          endpoint().encode())

    def test_streams_in_parallel(self):
        for stream in range(3):
            self.connect(stream)
        failures = []

        def run(stream):
            rnd = random.Random(stream)
            try:
                for i in range(20):
                    length = rnd.randint(1, 20000)
                    data = rnd.randbytes(length)
                    src = self.src_pool.acquire()
                    src.view[:length] = data
                    conn = FakeConn()
                    self.splane.send(conn, stream, new_block(length, i),
                                     src, None)
                    dst = self.dst_pool.acquire()
                    self.kplane.receive(conn, stream, conn.sent[0][0], dst)
                    if bytes(dst.view[:length]) != data:
                        failures.append((stream, i))
                    self.src_pool.release(src)
                    self.dst_pool.release(dst)
            except Exception as exc:      # pragma: no cover
                failures.append(exc)

        threads = [threading.Thread(target=run, args=(s,)) for s in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual([], failures)


def _env_int(name):
    value = os.environ.get(name)
    return int(value) if value not in (None, "") else None


class DeviceTest(testcase.TestCase):
    """Real RDMA READ over two queue pairs of one device (loopback)."""

    def setUp(self):
        super().setUp()
        port = _env_int("DTN_RDMA_PORT")
        dev, reason = rdma.probe(device=os.environ.get("DTN_RDMA_DEVICE"),
                                 port=1 if port is None else port,
                                 gid_index=_env_int("DTN_RDMA_GID_INDEX"))
        if dev is None:
            # An unusable pyverbs is a defect, never a skip.
            self.assertFalse(reason.startswith("pyverbs incompatible"),
                             reason)
            self.skipTest(reason)
        self.dev = dev
        self.addCleanup(dev.close)
        self.size = 1 << 20
        self.dst_pool = dev.make_pool(4, self.size, remote_read=False)
        self.splane = dev.source_plane(4, self.size)
        self.src_pool = self.splane.pool
        self.kplane = dev.sink_plane(self.dst_pool)
        self.conn = FakeConn()

    def connect(self, stream):
        ours = self.kplane.accept(stream, self.splane.endpoint(stream))
        self.splane.attach(stream, ours)

    def move(self, stream, length, index=0):
        data = os.urandom(length)
        src = self.src_pool.acquire()
        dst = self.dst_pool.acquire()
        try:
            src.view[:length] = data
            conn = FakeConn()
            self.splane.send(conn, stream, new_block(length, index), src,
                             None)
            (msg, payload, _), = conn.sent
            self.assertIsNone(payload)
            msg = protocol.NewBlock.decode(msg.encode())
            self.kplane.receive(conn, stream, msg, dst)
            return data == bytes(dst.view[:length])
        finally:
            self.src_pool.release(src)
            self.dst_pool.release(dst)

    def test_loopback_read(self):
        self.connect(0)
        self.connect(1)
        for i, length in enumerate([1, 4096, 65537, self.size, 300000]):
            self.assertTrue(self.move(i % 2, length, i), length)

    def test_parallel_streams(self):
        for stream in range(3):
            self.connect(stream)
        results = []

        def run(stream):
            for i in range(8):
                results.append(self.move(stream, random.randint(
                    1, self.size), i))

        threads = [threading.Thread(target=run, args=(s,)) for s in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual([True] * 24, results)

    def test_bad_rkey(self):
        self.connect(0)
        src = self.src_pool.acquire()
        self.splane.send(self.conn, 0, new_block(4096), src, None)
        msg = self.conn.sent[-1][0]
        msg.rkey ^= 0x5a5a00
        exc = self.assertRaises(ConnectionError, self.kplane.receive,
                                self.conn, 0, msg, self.dst_pool.acquire())
        self.assertIn("RDMA READ of 4096 bytes", str(exc))
        self.assertIn("IBV_WC_", str(exc))
        # The stream is broken; a new one works.
        self.assertRaises(ConnectionError, self.kplane.receive, self.conn,
                          0, msg, self.dst_pool.acquire())
        self.kplane.release_stream(0)
        self.connect(0)
        self.assertTrue(self.move(0, 4096))

    def test_source_memory_closed_to_sink_pool(self):
        # A sink-only pool is not readable remotely.
        self.connect(0)
        dst = self.dst_pool.acquire()
        msg = new_block(4096)
        msg.addr = self.dst_pool.region.address_of(dst)
        msg.rkey = self.dst_pool.region.rkey
        self.assertRaises(ConnectionError, self.kplane.receive, self.conn,
                          0, msg, self.dst_pool.acquire())
