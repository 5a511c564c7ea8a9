"""The RDMA data plane inside the engine, on the conformant fake pyverbs.

A real ``SinkServer`` (its ``SinkSession``) and a real ``SourceTransfer``
(its attempts) talk over loopback TCP; object bytes move by simulated RDMA
READ between two opened fake devices (``fakeverbs``: keys checked per
protection domain, pinned memory counted).  Covered: NACK resends whose
first copy's BLOCK_PULLED comes late, the drain of a failed file's
objects, reconnects after broken READs, pinned memory across attempts and
when RLIMIT_MEMLOCK is reached, a source object size larger than the
sink's, and the isolation of sessions' memory.
"""

import hashlib
import os
import threading
import time
from unittest import mock

from dtn_migrate.transfer import dataset
from dtn_migrate.transfer.source import transfer as source
from dtn_migrate.transfer.transport import rdma
from dtn_migrate.transfer.transport import stream
from dtn_migrate.transfer.wire import protocol
from tests.unit.transfer import test_engine
from tests.unit.transfer.transport import fakeverbs

KiB = 1 << 10
MiB = 1 << 20
OBJECT = 256 * KiB


class RdmaEngineTestCase(test_engine.EngineTestCase):

    def setUp(self):
        super().setUp()
        if fakeverbs.REAL_ENUMS is None:       # pragma: no cover
            self.skipTest("pyverbs is not importable")
        self.fabric = fakeverbs.Fabric()
        patcher = fakeverbs.install(self.fabric)
        patcher.start()
        self.addCleanup(patcher.stop)
        self.src_dev = self.device()
        self.dst_dev = self.device()
        self.thread_errors = []
        hook = mock.patch.object(threading, "excepthook",
                                 self.thread_errors.append)
        hook.start()
        self.addCleanup(hook.stop)

    def device(self):
        dev, reason = rdma.probe()
        self.assertIsNotNone(dev, reason)
        self.addCleanup(dev.close)
        return dev

    def cfg(self, **kw):
        kw.setdefault("transport", "rdma")
        kw.setdefault("object_size", OBJECT)
        kw.setdefault("max_file_retries", 1)
        return super().cfg(**kw)

    def rdma_sink(self, cfg=None):
        return self.start_sink(cfg or self.cfg(), rdma_device=self.dst_dev)

    def rdma_transfer(self, port, files, cfg=None):
        specs = dataset.expand(self.src, files, None)
        manifest = dataset.Manifest.new("sink", specs)
        peer = source.Peer("sink", "127.0.0.1", port, test_engine.KEY)
        t = source.SourceTransfer(manifest, peer, cfg or self.cfg(),
                                  self.state, "source",
                                  rdma_device=self.src_dev)
        self.addCleanup(t.close)
        return t

    def files(self, sizes):
        for i, (name, size) in enumerate(sizes.items()):
            test_engine.write_file(os.path.join(self.src, name), size, i)
        return list(sizes)

    def assertComplete(self, status, names):
        self.assertEqual("complete", status.get("state"),
                         status.get("error") or "the transfer raised")
        for name in names:
            self.assertSameFile(name)
        self.assertEqual([], self.thread_errors)

    def sink_pinned(self, server):
        pools = [server.pool] + list(server._pools.values())
        return sum(p.region.count * p.region.stride for p in pools
                   if p is not None)


class LateBlockPulled:
    """Damages the first copy of ``count`` objects in flight (every third
    object) and holds back the source's processing of each one's
    BLOCK_PULLED until the object's resend has gone out: the resend is
    then exposed while the first copy still is.
    """

    def __init__(self, count):
        self.count = count
        self.lock = threading.Lock()
        self.exposed = {}         # source address -> (file id, index)
        self.resent = {}          # damaged (file id, index) -> Event
        real_send = stream.Connection.send
        real_recv = stream.Connection.recv

        def send(conn, msg, *args, **kw):
            event = None
            if getattr(msg, "addr", None):
                # Known before the sink can READ it.
                key = (msg.file_id, msg.index)
                with self.lock:
                    self.exposed[msg.addr] = key
                    event = self.resent.get(key)
            result = real_send(conn, msg, *args, **kw)
            if event is not None:
                event.set()
            return result

        def recv(conn, *args, **kw):
            msg = real_recv(conn, *args, **kw)
            if threading.current_thread().name.startswith("pulled-"):
                with self.lock:
                    event = self.resent.get((msg.file_id, msg.index))
                if event is not None:
                    event.wait(2.0)
            return msg
        # Every registered pool, to find the source's at the end.
        self.pools = []
        real_init = rdma.RegionPool.__init__

        def init(pool, region):
            real_init(pool, region)
            self.pools.append(pool)
        self.patches = [mock.patch.object(stream.Connection, "send", send),
                        mock.patch.object(stream.Connection, "recv", recv),
                        mock.patch.object(rdma.RegionPool, "__init__", init)]

    def source_buffers_held(self):
        """Buffers of the source's pools still held (none should be)."""
        remote = fakeverbs.REAL_ENUMS.IBV_ACCESS_REMOTE_READ
        return sum(p.in_use for p in self.pools
                   if p.region.mr.access & remote)

    def on_read(self, n, view, remote_addr):
        with self.lock:
            key = self.exposed.get(remote_addr)
            if key is None or key[1] % 3 != 1 or key in self.resent or \
                    len(self.resent) >= self.count:
                return
            self.resent[key] = threading.Event()
        view[0] ^= 0xff

    def __enter__(self):
        for patch in self.patches:
            patch.start()
        return self

    def __exit__(self, *exc):
        for patch in self.patches:
            patch.stop()


class TestRdmaEngine(RdmaEngineTestCase):

    def test_objects_move_by_read(self):
        names = self.files({"a": 3 * MiB + 12345, "b": 1, "c": 0})
        server = self.rdma_sink()
        status = self.run_transfer(self.rdma_transfer(server.port, names))
        self.assertComplete(status, names)
        self.assertGreaterEqual(self.fabric.read_bytes, 3 * MiB + 12346)
        # Each attempt's source memory is deregistered with its plane.
        self.assertEqual(self.sink_pinned(server), self.fabric.pinned)

    def test_nack_resend_before_block_pulled(self):
        # 11 objects are damaged in flight (fewer than the window's
        # slots) and each one's resend goes out before its first copy's
        # BLOCK_PULLED is handled.  Every buffer must be freed once, for
        # the copy it held: none leaked, none freed under a READ.
        names = self.files({"image": 8 * MiB})
        server = self.rdma_sink()
        t = self.rdma_transfer(server.port, names)
        with LateBlockPulled(11) as late:
            self.fabric.on_read = late.on_read
            status = self.run_transfer(t, timeout=60)
        self.assertComplete(status, names)
        self.assertEqual(11, len(late.resent))
        self.assertTrue(all(e.is_set() for e in late.resent.values()))
        self.assertEqual(11, server.status(t.transfer_id)["objects_corrupt"])
        self.assertEqual(0, late.source_buffers_held())

    def test_block_pulled_for_another_object_is_refused(self):
        # A sink that names the wrong object in BLOCK_PULLED (three times)
        # must not make the source free a buffer still exposed: the
        # attempt ends with a protocol error and the next one goes on.
        names = self.files({"image": 2 * MiB})
        real = protocol.BlockPulled
        calls = []

        def wrong(file_id, index):
            calls.append(index)
            return real(file_id, index + (1 if len(calls) in (1, 9, 17)
                                          else 0))
        server = self.rdma_sink()
        with mock.patch.object(protocol, "BlockPulled", wrong), \
                self.assertLogs("dtn_migrate.transfer.source",
                                "WARNING") as logs:
            status = self.run_transfer(self.rdma_transfer(server.port,
                                                          names))
        self.assertComplete(status, names)
        self.assertGreaterEqual(status["attempts"], 2)
        self.assertIn("BLOCK_PULLED for object", "\n".join(logs.output))

    def test_drain_of_a_failed_file(self):
        # Every write of "bad" fails at the sink: the file fails while
        # many of its objects are still in flight, and each one that
        # arrives afterwards is drained.  "good" goes on meanwhile.
        names = self.files({"bad": 8 * MiB, "good": 2 * MiB})
        real_pwrite = os.pwrite
        # The sink's partial copy of "bad" (named as
        # sinksession.SinkSession._prepare names it).
        bad = hashlib.sha256(b"bad").hexdigest()[:40] + ".part"

        def pwrite(fd, data, offset):
            if os.readlink("/proc/self/fd/%d" % fd).endswith(bad):
                raise OSError(5, "Input/output error")
            return real_pwrite(fd, data, offset)
        real_send = rdma.RdmaSourcePlane.send

        def send(plane, conn, stream, msg, buf, fd):
            # The later objects of "bad" (only it has more than 8) leave
            # after its first writes have failed, whatever the timing of
            # the sink's I/O threads: they must arrive to a failed file.
            if msg.index >= 8:
                time.sleep(0.2)
            return real_send(plane, conn, stream, msg, buf, fd)
        # Whether any later object is still on its way when the source
        # hears of the failure is timing (about one run in ten has
        # none to drain): up to three runs, each checked whole, until
        # one drained.
        for run in range(3):
            server = self.rdma_sink()
            t = self.rdma_transfer(server.port, names)
            discard = mock.patch.object(
                rdma.RdmaSinkPlane, "discard", autospec=True,
                side_effect=rdma.RdmaSinkPlane.discard)
            with mock.patch("dtn_migrate.transfer.sink.recv.os.pwrite",
                            pwrite), \
                    mock.patch.object(rdma.RdmaSourcePlane, "send", send), \
                    discard as drained:
                status = self.run_transfer(t)
            self.assertEqual("failed", status["state"])
            self.assertIn("bad", status["error"])
            self.assertSameFile("good")
            self.assertEqual([], self.thread_errors)
            if drained.call_count:
                break
        self.assertGreater(drained.call_count, 0,
                           "none of three runs drained an object")
        # No data stream broke: the source never had to reconnect.
        self.assertEqual(1, status["attempts"])

    def test_reconnects_after_broken_reads_pin_no_more(self):
        # Four READs fail: each breaks its stream's queue pair and the
        # source reconnects.  Memory for one source pool, beyond the
        # sink's, is all that may ever be pinned.
        names = self.files({"image": 8 * MiB})
        cfg = self.cfg()
        server = self.rdma_sink(cfg)
        count = min(cfg.pool_objects,
                    cfg.window_bytes // OBJECT + cfg.io_threads)
        self.fabric.memlock = (self.sink_pinned(server)
                               + count * rdma.stride_for(OBJECT))
        self.fabric.fail_read = lambda n: n in (5, 15, 25, 35)
        status = self.run_transfer(self.rdma_transfer(server.port, names,
                                                      cfg))
        self.assertComplete(status, names)
        self.assertGreaterEqual(status["attempts"], 5)
        self.assertEqual(self.sink_pinned(server), self.fabric.pinned)

    def test_memlock_reached_then_freed(self):
        # No room to register the source pool: the attempt is retried
        # with back-off until memory is freed, then the transfer runs.
        names = self.files({"image": 2 * MiB})
        server = self.rdma_sink()
        self.fabric.memlock = self.sink_pinned(server)
        timer = threading.Timer(1.0, setattr,
                                (self.fabric, "memlock", None))
        timer.start()
        self.addCleanup(timer.cancel)
        status = self.run_transfer(self.rdma_transfer(server.port, names))
        self.assertComplete(status, names)
        self.assertGreaterEqual(status["attempts"], 2)

    def test_source_objects_larger_than_the_sinks(self):
        names = self.files({"image": 5 * MiB + 7})
        server = self.rdma_sink(self.cfg(object_size=OBJECT))
        status = self.run_transfer(self.rdma_transfer(
            server.port, names, self.cfg(object_size=4 * OBJECT)))
        self.assertComplete(status, names)
        self.assertGreaterEqual(self.fabric.read_bytes, 5 * MiB)


class TestSessionIsolation(RdmaEngineTestCase):
    """A peer connected to one session cannot read another's memory."""

    def test_other_sessions_buffers_are_unreadable(self):
        sessions = [self.src_dev.source_plane(2, OBJECT) for _ in range(3)]
        sink_pool = self.dst_dev.make_pool(2, OBJECT, remote_read=False)
        kplane = self.dst_dev.sink_plane(sink_pool)
        self.addCleanup(kplane.close)
        secrets = []
        for i, plane in enumerate(sessions):
            self.addCleanup(plane.close)
            buf = plane.pool.acquire()
            buf.view[:16] = b"secret of %5d " % i
            secrets.append((plane, buf))
        # The hostile sink holds a queue pair of session 0 only.
        ours = kplane.accept(0, sessions[0].endpoint(0))
        sessions[0].attach(0, ours)
        dst = sink_pool.acquire()
        own, own_buf = secrets[0]
        msg = new_block(16, own.region.address_of(own_buf),
                        own.region.rkey)
        kplane.receive(None, 0, msg, dst)
        self.assertEqual(b"secret of     0 ", bytes(dst.view[:16]))
        for plane, buf in secrets[1:]:
            kplane.release_stream(0)
            ours = kplane.accept(0, sessions[0].endpoint(0))
            sessions[0].attach(0, ours)
            dst.view[:16] = bytes(16)
            msg = new_block(16, plane.region.address_of(buf),
                            plane.region.rkey)
            exc = self.assertRaises(ConnectionError, kplane.receive, None,
                                    0, msg, dst)
            self.assertIn("IBV_WC_REM_ACCESS_ERR", str(exc))
            self.assertEqual(bytes(16), bytes(dst.view[:16]))

    def test_closing_a_session_unpins_it(self):
        before = self.fabric.pinned
        planes = [self.src_dev.source_plane(4, OBJECT) for _ in range(5)]
        self.assertEqual(before + 5 * 4 * OBJECT, self.fabric.pinned)
        pds = len(self.fabric.pds)
        for plane in planes:
            plane.close()
        self.assertEqual(before, self.fabric.pinned)
        self.assertEqual(pds - 5, len(self.fabric.pds))


def new_block(length, addr, rkey):
    msg = protocol.NewBlock(file_id=1, index=0, offset=0, length=length,
                            xxh3=0)
    msg.addr, msg.rkey = addr, rkey
    return msg


class TestSinkPools(RdmaEngineTestCase):

    def test_registered_pools_for_every_object_size(self):
        cfg = self.cfg(object_size=OBJECT)
        server = test_engine.sink.SinkServer(self.dst, cfg, "sink",
                                             lambda peer: None,
                                             rdma_device=self.dst_dev)
        self.addCleanup(server.stop)
        self.assertIs(server.pool, server.pool_for(OBJECT))
        self.assertIs(server.pool, server.pool_for(4096))
        sizes = range(OBJECT + 4096, 64 * MiB + 1, 1 << 20)
        pools = {id(server.pool_for(size)): server.pool_for(size)
                 for size in sizes}
        # Powers of two from 512 KiB to 64 MiB: eight at most.
        self.assertLessEqual(len(pools), 8)
        remote = fakeverbs.REAL_ENUMS.IBV_ACCESS_REMOTE_READ
        for size in sizes:
            pool = server.pool_for(size)
            self.assertGreaterEqual(pool.size, size)
            # Registered (an RDMA session can pull into it), and closed to
            # the peer's READs.
            self.assertIsInstance(pool, rdma.RegionPool)
            self.assertFalse(pool.region.mr.access & remote)
