"""client.drills against the real API (noauth2, SQLite, the API tests'
fake engine) over HTTP.
"""

import time
from unittest import mock

from dtn_migrate.client import exceptions
from tests.unit.api import base as api_base
from tests.unit.client import test_real_api


class TestDrills(test_real_api.RealApiTestCase):

    def setUp(self):
        super().setUp()
        self.policy = self.add_policy(role="replica", mode="manual",
                                      enabled=False)

    def test_start_get_list(self):
        dtn = self.dtn()
        drill = dtn.drills.start(self.policy["id"])
        self.assertEqual(("running", False, "gold"),
                         (drill["state"], drill["clone"],
                          drill["policy_name"]))
        # Clones are an administrator's (dtn:drill:start:clone).
        self.assertRaises(exceptions.HttpForbidden, dtn.drills.start,
                          self.policy["id"], clone=True)
        self.assertIs(True, self.dtn("admin").drills.start(
            self.policy["id"], clone=True)["clone"])
        shown = dtn.drills.get(drill["id"])
        self.assertEqual({"images": []}, shown["report"])
        for _ in range(5):          # the API's pages hold 5 at most
            self.add_drill(policy_id=self.policy["id"])
        self.assertEqual(7, len(dtn.drills.list()))
        self.assertEqual(2, len(dtn.drills.list(limit=2)))
        self.assertEqual(2, len(dtn.drills.list(state="running")))
        self.assertEqual(7, len(dtn.drills.list(
            policy_id=self.policy["id"])))
        self.assertEqual([], dtn.drills.list(policy_id="f" * 32))
        self.assertRaises(exceptions.HttpForbidden, dtn.drills.list,
                          all_projects=True)

    def test_errors(self):
        dtn = self.dtn()
        self.assertRaises(exceptions.HttpNotFound, dtn.drills.start,
                          "f" * 32)
        self.assertRaises(exceptions.HttpBadRequest, dtn.drills.start, "x")
        self.assertRaises(exceptions.HttpNotFound, dtn.drills.get, "f" * 32)
        self.assertRaises(exceptions.HttpForbidden,
                          self.dtn("reader").drills.start,
                          self.policy["id"])

    def test_wait_until_finished(self):
        dtn = self.dtn()
        drill = dtn.drills.start(self.policy["id"])
        polls = []

        def sleep(seconds):
            polls.append(seconds)
            if len(polls) == 2:     # the engine is done
                self.db.drill_update(drill["id"], {
                    "state": "failed", "images_total": 1,
                    "images_bad": 1, "images_intact": 0,
                    "report": {"images": [dict(api_base.DRILL_IMAGE,
                                               status="corrupt")]}})
        done = dtn.drills.wait(drill["id"], interval=0.5, sleep=sleep)
        self.assertEqual("failed", done["state"])
        self.assertEqual("corrupt", done["report"]["images"][0]["status"])
        self.assertEqual([0.5, 0.5], polls)

    def test_wait_timeout(self):
        dtn = self.dtn()
        drill = dtn.drills.start(self.policy["id"])
        pauses = []

        def sleep(seconds):
            pauses.append(seconds)
            time.sleep(seconds)
        exc = self.assertRaises(exceptions.WaitTimeout, dtn.drills.wait,
                                drill["id"], timeout=0.3, interval=0.2,
                                sleep=sleep)
        self.assertIn(drill["id"], str(exc))
        self.assertTrue(pauses)
        self.assertTrue(all(0 <= p <= 0.2 for p in pauses), pauses)

    def test_wait_rides_out_an_outage(self):
        dtn = self.dtn()
        drill = dtn.drills.start(self.policy["id"])
        finished = dict(drill, state="passed")
        answers = [exceptions.HttpServiceUnavailable("away",
                                                     http_status=503),
                   finished]

        def get(drill_id):
            answer = answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer
        with mock.patch.object(dtn.drills, "get", side_effect=get):
            self.assertEqual(finished, dtn.drills.wait(
                drill["id"], sleep=lambda s: None))
