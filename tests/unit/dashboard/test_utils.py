"""Formatting helpers."""

import datetime


from dtn_migrate.dashboard import utils

from tests.unit import testcase


class FormatTest(testcase.TestCase):

    def test_human_bytes(self):
        self.assertEqual("-", utils.human_bytes(None))
        self.assertEqual("0 B", utils.human_bytes(0))
        self.assertEqual("1023 B", utils.human_bytes(1023))
        self.assertEqual("1.5 MiB", utils.human_bytes(1572864))
        self.assertEqual("2.0 TiB", utils.human_bytes(2 * 1024 ** 4))

    def test_human_rate(self):
        self.assertEqual("-", utils.human_rate(None))
        self.assertEqual("-", utils.human_rate(0))
        self.assertEqual("8.0 MiB/s", utils.human_rate(8 * 1024 ** 2))

    def test_human_duration(self):
        self.assertEqual("-", utils.human_duration(None))
        self.assertEqual("-", utils.human_duration(-1))
        self.assertEqual("42s", utils.human_duration(42.4))
        self.assertEqual("3m 05s", utils.human_duration(185))
        self.assertEqual("1h 02m", utils.human_duration(3725))

    def test_percent(self):
        self.assertEqual(0.0, utils.percent(None))
        self.assertEqual(0.0, utils.percent("junk"))
        self.assertEqual(42.4, utils.percent(0.42371))
        self.assertEqual(100.0, utils.percent(1.2))
        self.assertEqual(0.0, utils.percent(-0.5))

    def test_parse_time(self):
        parsed = utils.parse_time("2026-11-25T06:00:00.000000Z")
        self.assertEqual(datetime.timezone.utc, parsed.tzinfo)
        self.assertEqual(6, parsed.hour)
        self.assertIsNone(utils.parse_time(None))
        self.assertIsNone(utils.parse_time("yesterday"))
        naive = utils.parse_time(datetime.datetime(2026, 1, 1))
        self.assertIsNotNone(naive.tzinfo)

    def test_local_time_and_since(self):
        self.assertEqual("2026-11-25 06:00:00",
                         utils.local_time("2026-11-25T06:00:00Z"))
        self.assertEqual("-", utils.local_time(None))
        self.assertEqual("-", utils.since(None))
        self.assertIn("data-seconds", utils.since("2026-11-25T06:00:00Z"))

    def test_verified(self):
        self.assertTrue(utils.verified({"peer_image_hash": "a",
                                        "os_hash_value": "a"}))
        self.assertFalse(utils.verified({"peer_image_hash": "a",
                                         "os_hash_value": "b"}))
        self.assertFalse(utils.verified({"peer_image_hash": None,
                                         "os_hash_value": None}))
