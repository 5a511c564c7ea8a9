"""Which migration a request gets (dtn_migrate.engine.reuse): a verified
copy on the peer reused whatever failed or was cancelled since, another
copy for other options, a 409 against a running migration asked for
something else (issue 37 items 1 and 2).
"""

import time

from dtn_migrate import context
from dtn_migrate.engine.protection import catalog
from dtn_migrate.engine import reuse
from dtn_migrate import exception
from tests.unit.engine import base
from tests.unit import testcase


def _ctx(project):
    return context.RequestContext(user_id="u-" + project,
                                  project_id=project, is_admin=False)


class TestReuse(base.EngineTestCase):

    def copies(self):
        """The active images of b."""
        return [i for i in self.glance_b.images.values()
                if i["status"] == "active"]

    def complete(self, image, **options):
        [m] = self.run_request([image["id"]], **options)
        self.assertEqual("complete", m["state"], m["error"])
        return m

    def running(self, image, **options):
        """A migration of ``image`` that runs (slowly) until cancelled."""
        self.agents.rate = 1 << 20
        [m] = self.a.request("b", images=[image["id"]],
                             options=options or None)["migrations"]
        deadline = time.monotonic() + 30
        while self.a.get(m["migration_id"])["state"] != "running":
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.05)
        return m

    def stop(self, m):
        base.cancel(self.a, m["migration_id"])
        self.quiesce()
        self.agents.rate = None

    def test_a_cancelled_attempt_after_a_complete_one(self):
        # Before: the plain request after the cancelled --force resumed
        # the cancelled transfer and made a second copy on b.
        image = self.image(size=4 << 20)
        done = self.complete(image)
        forced = self.running(image, force=True)
        self.stop(forced)
        self.assertEqual("cancelled",
                         self.a.get(forced["migration_id"])["state"])
        [m] = self.a.request("b", images=[image["id"]])["migrations"]
        self.assertEqual((done["migration_id"], True, "complete"),
                         (m["migration_id"], m.get("reused"), m["state"]))
        self.assertTrue(self.a.wait_idle(60))
        self.assertTrue(self.b.wait_idle(60))
        self.assertEqual([done["peer_image"]["image_id"]],
                         [i["id"] for i in self.copies()])
        self.assertEqual(2, len(self.a.list(direction="outgoing")))

    def test_a_failed_attempt_after_a_complete_one(self):
        image = self.image()
        done = self.complete(image)
        self.agents.fail_start = 1
        [failed] = self.run_request([image["id"]], force=True)
        self.assertEqual("failed", failed["state"])
        [m] = self.run_request([image["id"]])
        self.assertEqual(done["migration_id"], m["migration_id"])
        self.assertEqual(1, len(self.copies()))

    def test_a_failed_attempt_alone_is_resumed(self):
        # Nothing on the peer: the next request runs again, resuming the
        # failed attempt's transfer.
        image = self.image()
        self.agents.fail_start = 1
        [failed] = self.run_request([image["id"]])
        self.assertEqual("failed", failed["state"])
        [m] = self.run_request([image["id"]])
        self.assertEqual("complete", m["state"], m["error"])
        self.assertNotEqual(failed["migration_id"], m["migration_id"])
        self.assertEqual((failed["transfer_id"], 2),
                         (m["transfer_id"], m["attempt"]))
        self.assertEqual(1, len(self.copies()))

    def test_a_resumed_transfer_s_claims_come_after_the_last_attempt_s(self):
        # The agent fences a transfer's commands by the claim's epoch
        # (agent.fences): a migration that resumes another's transfer
        # starts where that one's claims ended, or each of its commands
        # would be refused as stale.  Before: its epoch started at 0.
        image = self.image()
        self.agents.fail_start = 1
        [failed] = self.run_request([image["id"]])
        mid = failed["migration_id"]
        for owner in ("engine-1", "engine-2", "engine-3"):
            self.a.store.claim(mid, owner, self.a.store.record(mid)["epoch"])
        self.a.store.release(mid)
        self.agents.fence_transfer({}, "dtn-a", failed["transfer_id"], 3)
        [m] = self.a.request("b", images=[image["id"]])["migrations"]
        self.assertEqual(failed["transfer_id"], m["transfer_id"])
        self.assertEqual(3, self.a.store.record(m["migration_id"])["epoch"])
        # Its first claim is the transfer's next: the agent takes it.
        self.a.store.claim(m["migration_id"], "engine-1", 3)
        self.assertTrue(self.a.wait_idle(60))
        self.assertEqual("complete",
                         self.a.get(m["migration_id"])["state"])
        self.assertEqual([], self.agents.refused)

    def test_other_copy_options_are_a_new_migration(self):
        # Before: the visibility, project and id choice asked for were
        # ignored and the complete migration returned.
        image = self.image(visibility="shared")
        done = self.complete(image)
        for options in ({"visibility": "private"}, {"keep_id": True},
                        {"target_project": "p-b"}):
            [m] = self.run_request([image["id"]], **options)
            self.assertNotEqual(done["migration_id"], m["migration_id"],
                                options)
            self.assertFalse(m.get("reused"), options)
        # b allows no target project: that one was refused there.
        self.assertEqual("failed", m["state"])
        self.assertEqual(3, len(self.copies()))
        # The source image's visibility said explicitly is the same copy;
        # so are another mode and transfer options.
        for options in ({"visibility": "shared"}, {"mode": "serial"},
                        {"transfer_options": {"streams": 2}}):
            req = self.a.request("b", images=[image["id"]], options=options)
            [m] = req["migrations"]
            self.assertEqual((done["migration_id"], True),
                             (m["migration_id"], m.get("reused")), options)
        # A copy made without the metadata check is not a checked one.
        other = self.image()
        unchecked = self.complete(other, verify=False)
        [m] = self.run_request([other["id"]])
        self.assertNotEqual(unchecked["migration_id"], m["migration_id"])
        [m] = self.a.request("b", images=[other["id"]], options={
            "verify": False})["migrations"]
        self.assertTrue(m.get("reused"))

    def test_force_while_one_runs_is_409(self):
        # Before: the running migration was returned, reused, exit 0.
        image = self.image(size=4 << 20)
        run = self.running(image)
        exc = self.assertRaises(exception.MigrationInProgress,
                                self.a.request, "b", images=[image["id"]],
                                options={"force": True})
        self.assertIn("by migration %s (running since" % run["migration_id"],
                      str(exc))
        self.assertIn("force asks for another copy while it runs", str(exc))
        self.assertEqual(409, exc.code)
        self.assertEqual(1, len(self.a.list()))
        self.stop(run)

    def test_other_options_while_one_runs_are_409(self):
        image = self.image(size=4 << 20, visibility="shared")
        other = self.image()
        run = self.running(image)
        exc = self.assertRaises(exception.MigrationInProgress,
                                self.a.request, "b",
                                images=[other["id"], image["id"]],
                                options={"visibility": "private"})
        self.assertIn("this request asks for visibility 'private' (it has "
                      "'shared')", str(exc))
        # Decided before any starts: nothing for the other image.
        self.assertEqual([run["migration_id"]],
                         [r["migration_id"] for r in self.a.list()])
        # The same options: the running one, reused.
        [m] = self.a.request("b", images=[image["id"]], options={
            "visibility": "shared"})["migrations"]
        self.assertEqual((run["migration_id"], True),
                         (m["migration_id"], m.get("reused")))
        self.stop(run)

    def test_a_copy_the_catalog_says_is_deleted_is_not_reused(self):
        image = self.image()
        done = self.complete(image)
        self.a.store.db.replica_upsert(
            catalog.OUTGOING, "b", image["id"], {
                "replica_image_id": done["peer_image"]["image_id"],
                "hash_value": image["os_hash_value"], "project_id": None,
                "state": catalog.DELETED})
        [m] = self.run_request([image["id"]])
        self.assertNotEqual(done["migration_id"], m["migration_id"])
        self.assertEqual("complete", m["state"], m["error"])

    def test_another_projects_copy_is_never_reused(self):
        image = self.image()
        [mine] = self.a.request("b", images=[image["id"]],
                                context=_ctx("p1"))["migrations"]
        self.assertTrue(self.a.wait_idle(60))
        self.assertTrue(self.b.wait_idle(60))
        [theirs] = self.a.request("b", images=[image["id"]],
                                  context=_ctx("p2"))["migrations"]
        self.assertNotEqual(mine["migration_id"], theirs["migration_id"])
        self.assertFalse(theirs.get("reused"))
        self.assertTrue(self.a.wait_idle(60))
        self.assertTrue(self.b.wait_idle(60))
        [again] = self.a.request("b", images=[image["id"]],
                                 context=_ctx("p1"))["migrations"]
        self.assertEqual(mine["migration_id"], again["migration_id"])


class TestCopyIs(testcase.TestCase):
    IMAGE = {"id": "i", "visibility": "private", "os_hash_value": "h"}

    def done(self, **options):
        return {"state": "complete", "os_hash_value": "h",
                "peer_image": {"image_id": "p", "os_hash_value": "h"},
                "options": options}

    def test_policies(self):
        mine = {"policy_id": "x", "name": "gold"}
        # A plain request takes a policy's copy; a policy's takes only
        # its own.
        self.assertTrue(reuse.copy_is(self.done(protection=mine),
                                      self.IMAGE, {}))
        self.assertTrue(reuse.copy_is(
            self.done(protection=mine), self.IMAGE,
            {"protection": dict(mine, name="renamed")}))
        self.assertFalse(reuse.copy_is(self.done(), self.IMAGE,
                                       {"protection": mine}))

    def test_a_running_migration_taken_or_refused(self):
        run = {"migration_id": "m", "peer": "b", "state": "running",
               "created_at": "t", "os_hash_value": "h",
               "options": {"verify": True, "mode": "serial",
                           "protection": {"policy_id": "x"}}}
        # Need not be checked, serves no policy: takes it.
        reuse.check_running(run, self.IMAGE, {"verify": False,
                                              "mode": "serial"})
        exc = self.assertRaises(
            exception.MigrationInProgress, reuse.check_running, run,
            self.IMAGE, {"mode": "pipelined", "protection": {
                "policy_id": "y"}, "keep_id": True})
        self.assertIn("this request asks for keep_id true (it has false), "
                      "mode 'pipelined' (it has 'serial'), protection 'y' "
                      "(it has 'x')", str(exc))

    def test_verified(self):
        self.assertTrue(reuse.verified(self.done(), self.IMAGE))
        unverified = dict(self.done(), peer_image={"image_id": "p",
                                                   "os_hash_value": "x"})
        self.assertFalse(reuse.verified(unverified, self.IMAGE))
        self.assertFalse(reuse.verified(self.done(),
                                        dict(self.IMAGE, os_hash_value="g")))

    def test_differences_in_words(self):
        self.assertEqual(
            ["keep_id true (it has false)",
             "target_project 'p' (it has none)"],
            reuse.differences({}, {"keep_id": True, "target_project": "p"},
                              self.IMAGE, reuse.COPY_OPTIONS))
