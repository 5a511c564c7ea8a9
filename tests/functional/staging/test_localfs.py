"""The path backend on a disk file system: an image staged from
Glance-sized chunks and read back by the import's stream, whole blocks
with O_DIRECT (nothing of them left in the page cache), bit-exact, with
and without sync writes, while a reader follows the watermark.
"""

import os
import shutil
import tempfile
import threading

import testtools

from dtn_migrate.staging import copy
from dtn_migrate.staging import localfs
from dtn_migrate.staging import stream as staging_stream
from dtn_migrate.staging import watermark
from dtn_migrate.transfer import config
from dtn_migrate.transfer import dataset
from dtn_migrate.transfer.sink import server as sink
from dtn_migrate.transfer.source import transfer as source
from tests.functional.staging.test_copy import chunks
from tests.functional.staging.test_copy import KEY
from tests.functional.staging.test_copy import options
from tests.functional.staging.test_copy import sha
from tests.functional.transfer import test_direct_io

KiB, MiB = 1 << 10, 1 << 20


class TestDirectStaging(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.root = tempfile.mkdtemp(prefix="dtnm-stage-", dir="/var/tmp")
        self.addCleanup(shutil.rmtree, self.root, True)
        self.data = os.urandom(24 * MiB + 4321)

    def stage(self, be, **kw):
        return copy.stage(be, "images/img", chunks(self.data, 64 * KiB),
                          len(self.data), expected_sha512=sha(self.data),
                          options=options(**kw))

    def test_staged_past_the_page_cache_and_read_back(self):
        be = localfs.LocalBackend(self.root)
        result = self.stage(be)
        self.assertEqual(sha(self.data), result.sha512)
        path = os.path.join(self.root, "images", "img")
        # The short last block (and the watermark) may be cached.
        self.assertLessEqual(test_direct_io.resident_bytes(path), MiB)
        with staging_stream.open_staged(
                be, "images/img", len(self.data),
                sha(self.data), options=options()) as stream:
            self.assertEqual(self.data, b"".join(stream))
        self.assertLessEqual(test_direct_io.resident_bytes(path), MiB)

    def test_sync_writes(self):
        be = localfs.LocalBackend(self.root)
        self.assertEqual(sha(self.data), self.stage(be, sync=True).sha512)
        with open(os.path.join(self.root, "images", "img"), "rb") as fh:
            self.assertEqual(self.data, fh.read())

    def test_transfer_follows_the_staging(self):
        """The pipeline on disk: the source sends the staged file as it
        grows (O_DIRECT reads of what O_DIRECT writes committed), and
        the sink writes it with O_DIRECT.
        """
        be = localfs.LocalBackend(self.root)
        dst, state = (os.path.join(self.root, d) for d in ("dst", "state"))
        os.makedirs(dst)
        be.open_write("img").close()
        watermark.publish(be, "img", 0)
        cfg = config.TransferConfig(
            object_size=MiB, window_bytes=8 * MiB, sync_bytes=4 * MiB,
            sync_interval=0.05, min_free_bytes=0)
        server = sink.SinkServer(dst, cfg, "sink",
                                 lambda p: KEY if p == "source" else None,
                                 host="127.0.0.1")
        server.start()
        self.addCleanup(server.stop)
        spec = dataset.FileSpec(
            name="img", path=be.path("img"), size=len(self.data),
            sha512=sha(self.data), growing=True,
            watermark_file=be.path("img.watermark"))
        transfer = source.SourceTransfer(
            dataset.Manifest.new("sink", [spec]),
            source.Peer("sink", "127.0.0.1", server.port, KEY), cfg, state,
            "source")
        self.addCleanup(transfer.close)
        sent = {}
        sender = threading.Thread(target=lambda: sent.update(transfer.run()))
        sender.start()
        self.addCleanup(sender.join, 60)
        result = copy.stage(be, "img", chunks(self.data, 256 * KiB,
                                              pause=0.001),
                            len(self.data), expected_sha512=sha(self.data),
                            options=options(commit_interval=2 * MiB))
        sender.join(60)
        self.assertEqual(sha(self.data), result.sha512)
        self.assertEqual("complete", sent.get("state"), sent.get("error"))
        received = os.path.join(dst, "img")
        self.assertLessEqual(test_direct_io.resident_bytes(received), MiB)
        with open(received, "rb") as f:
            self.assertEqual(self.data, f.read())

    def test_off_is_cached(self):
        be = localfs.LocalBackend(self.root, direct_io=False)
        self.stage(be)
        path = os.path.join(self.root, "images", "img")
        self.assertGreater(test_direct_io.resident_bytes(path),
                           len(self.data) // 2)
