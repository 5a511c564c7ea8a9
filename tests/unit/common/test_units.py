"""Sizes, rates and durations as people read and write them."""


from dtn_migrate.common import units

from tests.unit import testcase

KiB, MiB, GiB, TiB = 1 << 10, 1 << 20, 1 << 30, 1 << 40


class SizeTest(testcase.TestCase):
    def test_valid(self):
        self.assertEqual(4 * MiB, units.size("4M"))
        self.assertEqual(512 * KiB, units.size("512KiB"))
        self.assertEqual(1536, units.size("1.5K"))

    def test_invalid_and_negative(self):
        for text in ("", "abc", "4X", "inf", "-1"):
            self.assertRaises(ValueError, units.size, text)


class HumanTest(testcase.TestCase):
    def test_units(self):
        self.assertEqual("0 B", units.human(0))
        self.assertEqual("1023 B", units.human(1023))
        self.assertEqual("1.0 KiB", units.human(1024))
        self.assertEqual("1.5 MiB", units.human(1.5 * MiB))
        self.assertEqual("3.0 GiB", units.human(3 * GiB))
        self.assertEqual("2048.0 TiB", units.human(2048 * TiB))

    def test_rate(self):
        self.assertEqual("310.0 MiB/s", units.rate(310 * MiB))


class DurationTest(testcase.TestCase):
    def test_minutes_then_hours(self):
        self.assertEqual(["00:00", "01:05", "59:59", "1:00:00"],
                         [units.duration(s) for s in (0, 65.9, 3599, 3600)])
