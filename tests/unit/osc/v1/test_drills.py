"""openstack dtn drill start/list/show against the real API (noauth2,
SQLite, the API tests' fake engine) over HTTP.
"""

import json
import signal
from unittest import mock

from osc_lib import exceptions

from dtn_migrate.osc.v1 import drills
from tests.unit.api import base as api_base
from tests.unit.client import test_real_api
from tests.unit.osc.v1 import test_migrations
from tests.unit.osc.v1 import test_real_api as osc_real_api

BAD_IMAGE = dict(api_base.DRILL_IMAGE, status="corrupt",
                 replica_image_id="r2", image_name="fedora",
                 error="sha512 differs\nfrom the catalog")


class TestDrillCommands(test_real_api.RealApiTestCase):

    def setUp(self):
        super().setUp()
        self.use_persona("member")
        self.policy = self.add_policy(role="replica", mode="manual",
                                      enabled=False)

    use_persona = osc_real_api.TestCommandsOnRealApi.use_persona
    run_command = osc_real_api.TestCommandsOnRealApi.run_command

    def finish(self, drill_id, state="passed", images=(), **values):
        """What the engine does once the drill ran."""
        bad = sum(1 for i in images if i["status"] != "intact")
        values = dict(dict(
            state=state, images_total=len(images),
            images_intact=len(images) - bad, images_bad=bad,
            rto_seconds=3.0, report={"images": list(images)}), **values)
        self.db.drill_update(drill_id, values)

    def test_start_by_name_without_wait(self):
        status, out = self.run_command(drills.StartDrill,
                                       ["gold", "-f", "json"])
        self.assertEqual(0, status)
        shown = json.loads(out)
        self.assertEqual(("running", False, self.policy["id"], "gold"),
                         (shown["state"], shown["clone"],
                          shown["policy_id"], shown["policy_name"]))
        self.assertNotIn("images", shown)
        self.assertEqual(list(drills.SHOW_FIELDS[:-1]), list(shown))
        # By ID too.
        _, out = self.run_command(drills.StartDrill,
                                  [self.policy["id"], "-f", "value", "-c",
                                   "state"])
        self.assertEqual("running\n", out)

    def test_clone_is_an_administrators(self):
        exc = self.assertRaises(exceptions.CommandError, self.run_command,
                                drills.StartDrill, ["gold", "--clone"])
        self.assertIn("dtn:drill:start:clone", str(exc))
        self.use_persona("admin")
        _, out = self.run_command(drills.StartDrill, [
            self.policy["id"], "--clone", "-f", "value", "-c", "clone"])
        self.assertEqual("True\n", out)

    def _wait_finishing(self, state, images, **values):
        """Make the waiting client's sleep finish the drill."""
        real_wait = self.app_.client_manager.dtn.drills.wait

        def wait(drill_id, **kwargs):
            self.finish(drill_id, state, images, **values)
            return real_wait(drill_id, **kwargs)
        return mock.patch.object(self.app_.client_manager.dtn.drills,
                                 "wait", side_effect=wait)

    def test_start_wait_passed(self):
        with self._wait_finishing("passed", [api_base.DRILL_IMAGE]):
            status, out = self.run_command(
                drills.StartDrill, ["gold", "--wait", "--interval", "0.1",
                                    "-f", "json"])
        self.assertEqual(0, status)
        shown = json.loads(out)
        self.assertEqual(("passed", 1, 0, 3.0),
                         (shown["state"], shown["images_intact"],
                          shown["images_bad"], shown["rto_seconds"]))
        self.assertEqual([api_base.DRILL_IMAGE], shown["images"])

    def test_start_wait_failed_exits_1(self):
        images = [api_base.DRILL_IMAGE, BAD_IMAGE]
        with self._wait_finishing("failed", images):
            exc = self.assertRaises(
                exceptions.CommandError, self.run_command,
                drills.StartDrill, ["gold", "--wait", "--interval", "0.1"])
        self.assertIn("failed: 1 of 2 replica(s) bad", str(exc))
        # The finished drill was printed first.
        out = self.app_.stdout.getvalue()
        self.assertIn("fedora r2: corrupt (sha512 differs)", out)
        self.assertIn("cirros %s: intact" % api_base.IMAGE2, out)

    def test_start_wait_error_exits_1(self):
        with self._wait_finishing("error", [],
                                  error="glance unreachable\ntrace"):
            exc = self.assertRaises(
                exceptions.CommandError, self.run_command,
                drills.StartDrill, ["gold", "--wait"])
        self.assertIn("error: glance unreachable", str(exc))

    def test_ctrl_c_lost_inside_a_request_still_stops_waiting(self):
        """As for migrations: a Ctrl-C that a library drops where it
        lands still ends ``drill start --wait`` (before, the wait went on
        to its timeout).
        """
        dtn = self.app_.client_manager.dtn
        real_get = dtn.drills.get
        old = signal.signal(signal.SIGINT, signal.default_int_handler)
        self.addCleanup(signal.signal, signal.SIGINT, old)
        get, gets = test_migrations.ctrl_c_dropped_at_second_call(real_get)

        with mock.patch.object(dtn.drills, "get", side_effect=get):
            self.assertRaises(KeyboardInterrupt, self.run_command,
                              drills.StartDrill,
                              ["gold", "--wait", "--interval", "0.05",
                               "--timeout", "5"])
        self.assertEqual(2, len(gets))
        self.assertIs(signal.default_int_handler,
                      signal.getsignal(signal.SIGINT))

    def test_start_errors(self):
        for argv, words in ((["silver"], "silver"),
                            (["gold", "--wait", "--interval", "0"],
                             "--interval"),
                            (["gold", "--wait", "--timeout", "-1"],
                             "--timeout")):
            exc = self.assertRaises(exceptions.CommandError,
                                    self.run_command, drills.StartDrill,
                                    argv)
            self.assertIn(words, str(exc))
        self.use_persona("reader")
        self.assertRaises(exceptions.CommandError, self.run_command,
                          drills.StartDrill, ["gold"])

    def test_start_wait_timeout(self):
        exc = self.assertRaises(
            exceptions.CommandError, self.run_command, drills.StartDrill,
            ["gold", "--wait", "--interval", "0.05", "--timeout", "0.1"])
        self.assertIn("not finished", str(exc))

    def test_list_and_show(self):
        first = self.add_drill(policy_id=self.policy["id"])
        other = self.add_policy(name="silver")
        second = self.add_drill(policy_id=other["id"], policy_name=None,
                                state="failed", images_bad=1,
                                images_intact=0,
                                report={"images": [BAD_IMAGE]})
        _, out = self.run_command(drills.ListDrill, ["-f", "json"])
        rows = json.loads(out)
        self.assertEqual(["ID", "Policy", "State", "Images", "Intact", "Bad",
                          "RTO (s)", "Started"], list(rows[0]))
        self.assertEqual([(second["id"], other["id"], "failed"),
                          (first["id"], "gold", "passed")],
                         [(r["ID"], r["Policy"], r["State"]) for r in rows])
        _, out = self.run_command(drills.ListDrill,
                                  ["--policy", "silver", "-f", "value",
                                   "-c", "ID"])
        self.assertEqual(second["id"] + "\n", out)
        _, out = self.run_command(drills.ListDrill,
                                  ["--state", "passed", "-f", "value",
                                   "-c", "ID"])
        self.assertEqual(first["id"] + "\n", out)
        self.assertRaises(exceptions.CommandError, self.run_command,
                          drills.ListDrill, ["--all-projects"])
        self.assertRaises(exceptions.CommandError, self.run_command,
                          drills.ListDrill, ["--policy", "bronze"])
        # show: flat fields and the images one a line.
        _, out = self.run_command(drills.ShowDrill, [second["id"]])
        self.assertIn("fedora r2: corrupt (sha512 differs)", out)
        _, out = self.run_command(drills.ShowDrill,
                                  [first["id"], "-f", "json"])
        shown = json.loads(out)
        self.assertEqual(list(drills.SHOW_FIELDS), list(shown))
        self.assertEqual([api_base.DRILL_IMAGE], shown["images"])
        self.assertRaises(exceptions.CommandError, self.run_command,
                          drills.ShowDrill, ["f" * 32])

    def test_admin_names_a_policy_of_the_import_project(self):
        # In the replicas' cloud the policy is the import project's: an
        # administrator names it anyway (the runbooks run as admin).
        self.use_persona("admin")
        status, out = self.run_command(drills.StartDrill,
                                       ["gold", "-f", "value", "-c",
                                        "policy_id"])
        self.assertEqual(self.policy["id"] + "\n", out)
        _, out = self.run_command(drills.ListDrill,
                                  ["--policy", "gold", "--all-projects",
                                   "-f", "value", "-c", "Policy"])
        self.assertEqual("gold\n", out)
        # Two projects' policies of that name: ask for an ID.
        self.add_policy(project=api_base.OTHER)
        exc = self.assertRaises(exceptions.CommandError, self.run_command,
                                drills.StartDrill, ["gold"])
        self.assertIn("give an ID", str(exc))
        # A member does not see other projects: not found.
        self.use_persona("other")
        exc = self.assertRaises(exceptions.CommandError, self.run_command,
                                drills.StartDrill, ["silver"])
        self.assertIn("silver", str(exc))
