"""Tests of dtn_migrate.transfer.buffers.BufferPool."""

import threading
import time


from dtn_migrate.transfer import buffers

from tests.unit import testcase

WAIT = 5.0


class Waiter(threading.Thread):
    def __init__(self, pool, timeout=WAIT):
        super().__init__(daemon=True)
        self.pool = pool
        self.timeout = timeout
        self.started_at = None
        self.result = "not run"
        self.waited = None

    def run(self):
        self.started_at = time.monotonic()
        self.result = self.pool.acquire(timeout=self.timeout)
        self.waited = time.monotonic() - self.started_at


class BufferPoolTest(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.calls = []

    def allocator(self, index, size):
        self.calls.append((index, size))
        return memoryview(bytearray(size))

    def test_needs_one_buffer(self):
        self.assertRaises(ValueError, buffers.BufferPool, 0, 10)
        self.assertRaises(ValueError, buffers.BufferPool, -1, 10)

    def test_lazy_allocation(self):
        pool = buffers.BufferPool(3, 64, self.allocator)
        self.assertEqual([], self.calls)
        self.assertEqual(0, pool.in_use)
        a = pool.acquire()
        self.assertEqual([(0, 64)], self.calls)
        b = pool.acquire()
        c = pool.acquire()
        self.assertEqual([(0, 64), (1, 64), (2, 64)], self.calls)
        self.assertEqual([0, 1, 2], [x.index for x in (a, b, c)])
        self.assertEqual(3, pool.in_use)

    def test_exhausted_times_out(self):
        pool = buffers.BufferPool(2, 8, self.allocator)
        pool.acquire()
        pool.acquire()
        t0 = time.monotonic()
        self.assertIsNone(pool.acquire(timeout=0.05))
        self.assertGreaterEqual(time.monotonic() - t0, 0.04)
        self.assertIsNone(pool.acquire(timeout=0))
        self.assertEqual(2, len(self.calls))

    def test_release_recycles(self):
        pool = buffers.BufferPool(1, 8, self.allocator)
        a = pool.acquire()
        pool.release(a)
        self.assertEqual(0, pool.in_use)
        self.assertIs(a, pool.acquire())
        self.assertEqual(1, len(self.calls))
        self.assertEqual(1, pool.in_use)

    def test_buffers_distinct_and_writable(self):
        pool = buffers.BufferPool(4, 16)
        bufs = [pool.acquire() for _ in range(4)]
        for n, buf in enumerate(bufs):
            self.assertEqual(16, len(buf.view))
            self.assertFalse(buf.view.readonly)
            buf.view[:] = bytes([n]) * 16
        for n, buf in enumerate(bufs):
            self.assertEqual(bytes([n]) * 16, bytes(buf.view))
        self.assertEqual(4, len({id(b) for b in bufs}))

    def test_aligned_allocator(self):
        import ctypes
        for size in (1, 32, 4096, 5000, 1 << 20):
            view = buffers.aligned_allocator(0, size)
            self.assertIsInstance(view, memoryview)
            self.assertEqual(size, view.nbytes)
            view[0] = 255
            self.assertEqual(255, view[0])
            addr = ctypes.addressof(ctypes.c_char.from_buffer(view))
            # Page-aligned: kernel copies into it take the fast path.
            self.assertEqual(0, addr % 4096)

    def test_release_wakes_waiter(self):
        pool = buffers.BufferPool(1, 8)
        held = pool.acquire()
        waiter = Waiter(pool)
        waiter.start()
        time.sleep(0.05)
        self.assertTrue(waiter.is_alive())
        pool.release(held)
        waiter.join(WAIT)
        self.assertFalse(waiter.is_alive())
        self.assertIs(held, waiter.result)
        self.assertLess(waiter.waited, WAIT / 2)

    def test_each_release_wakes_one(self):
        pool = buffers.BufferPool(2, 8)
        held = [pool.acquire(), pool.acquire()]
        waiters = [Waiter(pool) for _ in range(2)]
        for w in waiters:
            w.start()
        time.sleep(0.05)
        for b in held:
            pool.release(b)
        for w in waiters:
            w.join(WAIT)
            self.assertFalse(w.is_alive())
        self.assertEqual({id(b) for b in held},
                         {id(w.result) for w in waiters})

    def test_close_wakes_all(self):
        pool = buffers.BufferPool(1, 8)
        pool.acquire()
        waiters = [Waiter(pool) for _ in range(4)]
        for w in waiters:
            w.start()
        time.sleep(0.05)
        pool.close()
        for w in waiters:
            w.join(WAIT)
            self.assertFalse(w.is_alive())
            self.assertIsNone(w.result)
            self.assertLess(w.waited, WAIT / 2)

    def test_acquire_after_close(self):
        pool = buffers.BufferPool(2, 8)
        pool.release(pool.acquire())
        pool.close()
        self.assertIsNone(pool.acquire())
        self.assertIsNone(pool.acquire(timeout=1))
