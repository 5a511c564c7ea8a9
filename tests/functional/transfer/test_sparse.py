"""Issue 13 acceptance, between two real agents (the relay in front of
the sink counts what crosses the link, and damages it on demand):

* a sparse image migrates bit-exact, with only its data on the link and
  its holes left holes at the sink;
* with compression on, a corrupting relay: the damage is detected (a
  decoder error or a failed check of the decoded object), the object is
  sent again, the file is exact;
* kill -9 of either agent while zero extents and compressed objects are
  in flight: the transfer resumes and completes bit-exact.

The two agents and the relay are shared by each class.
"""

import hashlib
import os

from testtools import content

from dtn_migrate.transfer.sink import server as sink
from tests.functional import base
from tests.functional.transfer import shared

MiB = base.MiB


def text_bytes(n, seed):
    """Compressible (about 2:1) and different for every seed."""
    return hashlib.shake_256(b"t%d" % seed).digest(n // 2).hex().encode()


class CountingRelay(shared.SharedPairTestCase):
    """The relay counts the bytes that go to the sink."""

    with_relay = True

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.link_bytes = 0
        damage = cls.relay._damage

        def counting(data, seen):
            cls.link_bytes += len(data)
            return damage(data, seen)
        cls.relay._damage = counting

    def setUp(self):
        super().setUp()
        with self.relay.lock:
            self.relay.corrupt_after = None
            self.relay.corrupt_every = None
            self.relay.corrupt_left = 0
            self.relay.corrupted = 0
            type(self).link_bytes = 0

    def send(self, name, timeout=240):
        tid = self.start_transfer(self.src, self.dst, [name])
        status = self.wait_for(self.src, tid, timeout=timeout)
        self.assertEqual("complete", status["state"], status.get("error"))
        src = os.path.join(self.src.staging, name)
        dst = os.path.join(self.dst.staging, name)
        self.assertSame(src, dst)
        # The sha512 the sink verified is the file's.
        self.assertEqual(base.sha512(src),
                         os.getxattr(dst, sink.XATTR_SHA512).decode())
        return tid, status


class TestSparse(CountingRelay):
    names = ("src-sparse", "dst-sparse")
    transfer_conf = {"object_size": MiB, "streams": 2,
                     "zero_extents": "true", "compression": "off"}

    def test_sparse_image_sends_only_its_data(self):
        size = 2048 * MiB
        data = 10 * MiB
        pieces = {(37 + 199 * i) * MiB: base.random_bytes(MiB, i)
                  for i in range(10)}
        name = "sparse.raw"
        path = os.path.join(self.src.staging, name)
        base.write_at(path, size, pieces)
        self.addCleanup(os.unlink, path)
        tid, status = self.send(name)
        self.addDetail("link-bytes", content.text_content(
            "%d bytes on the link for %d of data in %d" %
            (self.link_bytes, data, size)))
        self.assertLessEqual(self.link_bytes, 1.05 * data + MiB)
        self.assertGreater(self.link_bytes, data)
        received = os.path.join(self.dst.staging, name)
        # The holes are holes at the sink too.
        self.assertLessEqual(os.stat(received).st_blocks * 512,
                             1.1 * data + MiB)
        incoming = self.api.get_incoming({}, self.dst.name, tid)
        self.assertEqual(1, incoming["files_done"], incoming)
        self.assertEqual(0, incoming["objects_corrupt"], incoming)

    def test_data_not_aligned_to_objects(self):
        """Data pieces that straddle objects (the rest of those objects
        holes): the zero runs inside an object travel encoded, and are
        holes at the sink too.
        """
        size = 1024 * MiB
        data = 10 * MiB
        pieces = {(37 + 97 * i) * MiB + 12345 + 4096 * i:
                  base.random_bytes(MiB, 100 + i) for i in range(10)}
        name = "unaligned.raw"
        path = os.path.join(self.src.staging, name)
        base.write_at(path, size, pieces)
        self.addCleanup(os.unlink, path)
        self.send(name)
        self.addDetail("link-bytes", content.text_content(
            "%d bytes on the link for %d of data" % (self.link_bytes, data)))
        self.assertLessEqual(self.link_bytes, 1.05 * data + MiB)
        received = os.path.join(self.dst.staging, name)
        self.assertLessEqual(os.stat(received).st_blocks * 512,
                             1.1 * data + MiB)

    def test_zero_bytes_written_are_zero_extents_too(self):
        """An allocated file full of written zeros (no holes): the zeros
        are found by the source's check and stay holes at the sink.
        """
        name = "zeros.raw"
        path = os.path.join(self.src.staging, name)
        with open(path, "wb") as f:
            for i in range(64):
                f.write(base.random_bytes(MiB, i) if i in (5, 40)
                        else bytes(MiB))
        self.addCleanup(os.unlink, path)
        self.send(name)
        self.assertLessEqual(self.link_bytes, 1.05 * 2 * MiB + MiB)
        received = os.path.join(self.dst.staging, name)
        self.assertLessEqual(os.stat(received).st_blocks * 512,
                             1.1 * 2 * MiB + MiB)


class TestCompressedCorruption(CountingRelay):
    names = ("src-zcorrupt", "dst-zcorrupt")
    transfer_conf = {"object_size": MiB, "streams": 2,
                     "window_bytes": 4 * MiB, "max_object_retries": 200,
                     "compression": "on",
                     "reconnect_initial_interval": 0.1}

    def make(self, name, nobjects):
        path = os.path.join(self.src.staging, name)
        with open(path, "wb") as f:
            for i in range(nobjects):
                f.write(text_bytes(MiB, i))
        self.addCleanup(os.unlink, path)
        return path

    def test_compressed_objects_cross_a_corrupting_relay(self):
        self.make("text.img", 48)
        # Flips about every 3 MiB of the stream: inside compressed
        # object bytes mostly (a header hit costs a reconnect instead).
        self.relay.corrupt_many(3 * MiB + 4099, 6)
        tid, status = self.send("text.img")
        self.assertEqual(6, self.relay.corrupted)
        self.assertGreater(status["objects_compressed"], 0, status)
        incoming = self.api.get_incoming({}, self.dst.name, tid)
        self.assertGreaterEqual(incoming["objects_corrupt"], 1, incoming)
        self.assertGreaterEqual(status["objects_resent"], 1, status)
        log = self.dst.log_text()
        self.assertTrue("failed its decoding" in log or
                        "failed its checksum" in log)
        # Compressed: well under the 48 MiB of the file crossed the link,
        # resends included.
        self.assertLess(self.link_bytes, 40 * MiB)

    def test_clean_link_compresses(self):
        self.make("clean.img", 16)
        _, status = self.send("clean.img")
        self.assertEqual(16, status["objects_compressed"], status)
        self.assertLess(self.link_bytes, 0.6 * 16 * MiB + MiB)


class TestKillWithZerosAndCompression(shared.SharedPairTestCase):
    """kill -9 either agent while a file of holes, compressible and
    random objects is on its way; the restarted agent resumes it.
    """

    names = ("src-zkill", "dst-zkill")
    transfer_conf = {
        "object_size": MiB,
        "window_bytes": 16 * MiB,
        "sync_bytes": 4 * MiB,
        "sync_interval": 0.02,
        "rate_limit": 24 * MiB,
        "compression": "on",
        "hash_checkpoint_bytes": 32 * MiB,
        "reconnect_initial_interval": 0.1,
        "reconnect_max_interval": 1.0,
    }

    def make(self, name):
        """384 MiB: per 4 MiB region a hole, compressible text, or
        random bytes, in turn.
        """
        path = os.path.join(self.src.staging, name)
        with open(path, "wb") as f:
            f.truncate(384 * MiB)
            for r in range(96):
                kind = r % 3
                if kind == 0:
                    continue
                f.seek(r * 4 * MiB)
                for i in range(4):
                    seed = r * 4 + i
                    f.write(text_bytes(MiB, seed) if kind == 1
                            else base.random_bytes(MiB, seed))
        self.addCleanup(os.unlink, path)
        return path

    def _at(self, tid, percent):
        return self.wait_for(
            self.src, tid, timeout=120,
            until=lambda s: s.get("percent", 0) >= percent or
            s.get("state") in base.FINAL)

    def run_killing(self, agent, name):
        path = self.make(name)
        tid = self.start_transfer(self.src, self.dst, [name])
        for percent in (30, 60):
            before = self._at(tid, percent)
            self.assertEqual("running", before["state"],
                             "finished before %d %%" % percent)
            agent.kill9()
            agent.start().wait_ready(self.api)
        status = self.wait_for(self.src, tid, timeout=240)
        self.assertEqual("complete", status["state"], status.get("error"))
        received = os.path.join(self.dst.staging, name)
        self.assertSame(path, received)
        self.assertEqual(base.sha512(path),
                         os.getxattr(received, sink.XATTR_SHA512).decode())
        self.assertGreater(status["objects_compressed"], 0, status)
        self.assertGreater(status["objects_zero"], 0, status)
        # Holes stay holes (a third of the file).
        self.assertLess(os.stat(received).st_blocks * 512, 300 * MiB)
        incoming = self.api.get_incoming({}, self.dst.name, tid)
        self.assertEqual(1, incoming["files_done"], incoming)
        return status

    def test_kill_sink_agent(self):
        status = self.run_killing(self.dst, "killsink.img")
        self.assertGreaterEqual(status["attempts"], 3, status)

    def test_kill_source_agent(self):
        self.run_killing(self.src, "killsource.img")
