"""The stall clock shared by the engine's stage waits and the staging
follower.
"""

from dtn_migrate.common import stall
from tests.unit import testcase


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class TestStall(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.clock = Clock()
        self.stall = stall.Stall(10, clock=self.clock)

    def test_the_same_value_past_the_timeout_is_a_stall(self):
        self.assertTrue(self.stall.see(1))
        self.clock.now += 10
        self.assertFalse(self.stall.see(1))
        self.assertFalse(self.stall.stalled())      # not past it yet
        self.clock.now += 0.5
        self.assertTrue(self.stall.stalled())
        self.assertEqual(10.5, self.stall.quiet_for())

    def test_a_change_restarts_the_clock(self):
        self.stall.see(1)
        self.clock.now += 9
        self.assertTrue(self.stall.see(2))
        self.clock.now += 9
        self.assertFalse(self.stall.stalled())

    def test_moved_restarts_it_without_a_value(self):
        self.clock.now += 11
        self.assertTrue(self.stall.stalled())
        self.stall.moved()
        self.assertFalse(self.stall.stalled())
