"""Watermark side files, in-process watermarks and followers."""

import os
import shutil
import tempfile


from dtn_migrate.staging import localfs
from dtn_migrate.staging import watermark
from dtn_migrate.transfer import dataset

from tests.unit import testcase


class TestFormat(testcase.TestCase):
    def test_format(self):
        self.assertEqual(b"0\n", watermark.format_watermark(0))
        self.assertEqual(b"4096 failed\n",
                         watermark.format_watermark(4096, failed=True))

    def test_parse(self):
        cases = {b"": (0, False), b"123\n": (123, False),
                 b"77 failed\n": (77, True), b"77 other\n": (77, False),
                 b"junk\n": (0, False), b"-5\n": (0, False),
                 b"  9  failed  ": (9, True)}
        for data, want in cases.items():
            self.assertEqual(want, watermark.parse_watermark(data), data)

    def test_side_file_name(self):
        self.assertEqual("img/a.watermark", watermark.side_file("img/a"))


class TestSideFile(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.root = tempfile.mkdtemp(prefix="dtnm-wm-")
        self.addCleanup(shutil.rmtree, self.root, True)
        self.backend = localfs.LocalBackend(self.root)

    def test_missing(self):
        self.assertIsNone(watermark.read(self.backend, "a"))

    def test_publish_is_read_by_the_transfer_engine(self):
        for committed, failed in ((0, False), (1 << 40, False),
                                  (12345, True)):
            watermark.publish(self.backend, "d/a", committed, failed)
            path = os.path.join(self.root, "d", "a.watermark")
            self.assertEqual((committed, failed),
                             dataset.read_watermark_file(path))
            self.assertEqual((committed, failed),
                             watermark.read(self.backend, "d/a"))
        # Replaced by rename: no temporary file is left.
        self.assertEqual(["a.watermark"],
                         os.listdir(os.path.join(self.root, "d")))

    def test_reads_what_the_transfer_engine_writes(self):
        dataset.write_watermark_file(os.path.join(self.root, "a.watermark"),
                                     99, failed=True)
        self.assertEqual((99, True), watermark.read(self.backend, "a"))

    def test_side_file_follower(self):
        follow = watermark.side_file_follower(self.backend, "a")
        self.assertEqual((0, None), follow())
        watermark.publish(self.backend, "a", 10)
        self.assertEqual((10, "open"), follow())
        watermark.publish(self.backend, "a", 10, failed=True)
        self.assertEqual((10, "failed"), follow())


class TestWatermark(testcase.TestCase):
    def test_provider_and_follow(self):
        cell = watermark.Watermark(size=100)
        self.assertEqual(0, cell.provider())
        self.assertEqual((0, "open"), cell.follow())
        cell.publish(40)
        self.assertEqual(40, cell.provider())
        self.assertEqual((40, "open"), cell.follow())
        cell.publish(100)
        self.assertEqual((100, "done"), cell.follow())

    def test_failure_stops_the_transfer_engine(self):
        cell = watermark.Watermark(size=100)
        cell.publish(30, failed=True)
        self.assertEqual((30, "failed"), cell.follow())
        self.assertRaises(dataset.GrowingFileFailed, cell.provider)
        spec = dataset.FileSpec(name="a", path="/x", size=100, growing=True)
        self.assertRaises(dataset.GrowingFileFailed,
                          dataset.available_bytes, spec, cell.provider)

    def test_unknown_size_never_done(self):
        cell = watermark.Watermark()
        cell.publish(1 << 30)
        self.assertEqual((1 << 30, "open"), cell.follow())


class TestSinkFollower(testcase.TestCase):
    def test_unknown_file(self):
        follow = watermark.sink_follower(lambda: None)
        self.assertEqual((0, None, None), follow())

    def test_without_root(self):
        info = {"durable": 5, "state": "open", "path": "/srv/x/.p/t/1"}
        follow = watermark.sink_follower(lambda: info)
        self.assertEqual((5, "open", None), follow())

    def test_names_relative_to_root(self):
        info = {"durable": 5, "state": "open",
                "path": "/srv/x/.dtn-partial/t/1"}
        follow = watermark.sink_follower(lambda: info, root="/srv/x")
        self.assertEqual((5, "open", ".dtn-partial/t/1"), follow())
        info.update(durable=9, state="done", path="/srv/x/img")
        self.assertEqual((9, "done", "img"), follow())
        info.update(path="/elsewhere/img")
        self.assertEqual((9, "done", None), follow())

    def test_missing_durable(self):
        follow = watermark.sink_follower(lambda: {"state": "failed"})
        self.assertEqual((0, "failed", None), follow())

    def test_with_wait(self):
        info = {"durable": 5, "state": "open", "path": None}
        waits = []
        follow = watermark.sink_follower(
            lambda: info, wait=lambda s: waits.append(s) or True)
        self.assertEqual((5, "open", None), follow())
        self.assertTrue(follow.wait(0.1))
        self.assertEqual([0.1], waits)
        self.assertFalse(hasattr(watermark.sink_follower(lambda: info),
                                 "wait"))
