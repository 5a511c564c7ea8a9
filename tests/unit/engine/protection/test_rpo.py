"""dtn_migrate.engine.protection.rpo: age and grade of a recovery point."""

import datetime


from dtn_migrate.common import states
from dtn_migrate.engine.protection import rpo

from tests.unit import testcase

NOW = datetime.datetime(2026, 1, 1, 12, 0)


def ago(minutes):
    return NOW - datetime.timedelta(minutes=minutes)


class TestAge(testcase.TestCase):
    def test_nothing_waits(self):
        self.assertEqual(0.0, rpo.age([], NOW))
        self.assertEqual(0.0, rpo.age(
            [{"state": "replicated", "changed_at": None},
             {"state": "removed", "changed_at": None}], NOW))

    def test_oldest_unreplicated_change(self):
        rows = [{"state": "pending", "changed_at": ago(5)},
                {"state": "syncing", "changed_at": ago(20)},
                {"state": "failed", "changed_at": ago(10)},
                {"state": "replicated", "changed_at": ago(90)},
                {"state": "removed", "changed_at": ago(80)},
                {"state": "pending", "changed_at": None}]
        self.assertEqual(1200.0, rpo.age(rows, NOW))

    def test_never_negative(self):
        self.assertEqual(0.0, rpo.age(
            [{"state": "pending",
              "changed_at": NOW + datetime.timedelta(seconds=30)}], NOW))


class TestGrade(testcase.TestCase):
    def test_grades(self):
        # Target 60 min, at risk from half of it.
        self.assertEqual(states.RPO_OK, rpo.grade(0, 60, 0.5))
        self.assertEqual(states.RPO_OK, rpo.grade(1799.9, 60, 0.5))
        self.assertEqual(states.RPO_AT_RISK, rpo.grade(1800, 60, 0.5))
        self.assertEqual(states.RPO_AT_RISK, rpo.grade(3599, 60, 0.5))
        self.assertEqual(states.RPO_BREACHED, rpo.grade(3600, 60, 0.5))
        self.assertEqual(states.RPO_BREACHED, rpo.grade(10 ** 6, 60, 0.5))

    def test_fraction_bounds(self):
        self.assertEqual(states.RPO_AT_RISK, rpo.grade(1, 60, 0.0))
        self.assertEqual(states.RPO_OK, rpo.grade(0, 60, 0.0))
        self.assertEqual(states.RPO_OK, rpo.grade(3599, 60, 1.0))
        self.assertEqual(states.RPO_BREACHED, rpo.grade(3600, 60, 1.0))

    def test_peer_unreachable(self):
        # A waiting change cannot get better on its own: at risk.
        self.assertEqual(states.RPO_AT_RISK,
                         rpo.grade(1, 60, 0.5, peer_reachable=False))
        # Nothing waits: ok all the same.
        self.assertEqual(states.RPO_OK,
                         rpo.grade(0, 60, 0.5, peer_reachable=False))
        self.assertEqual(states.RPO_BREACHED,
                         rpo.grade(3600, 60, 0.5, peer_reachable=False))

    def test_states(self):
        self.assertEqual(("ok", "at-risk", "breached"), states.RPO_STATES)
        self.assertEqual(("pending", "syncing", "failed"),
                         states.UNREPLICATED_STATES)
