"""dtn_migrate.engine.protection.replicas: the policies a cloud learns
from the incoming migrations of its peers, on a real SQLite database.
"""

import datetime
import shutil
import uuid

import fixtures
from oslo_utils import timeutils

from dtn_migrate.db import api
from dtn_migrate.engine.protection import replicas
from dtn_migrate.engine.protection import selectors
from dtn_migrate import exception
from tests.unit.engine.protection import test_sync as base
from tests.unit import testcase

SOURCE = "dtn-a"


def served(**values):
    out = {"policy_id": uuid.uuid4().hex, "name": "gold", "rpo_minutes": 15,
           "selector": {"tags": ["gold"]}}
    out.update(values)
    return out


class TestLearn(testcase.TestCase):
    def setUp(self):
        super().setUp()
        tmp = self.useFixture(fixtures.TempDir()).path
        shutil.copy(base.template(), "%s/db.sqlite" % tmp)
        self.db = api.Database(base.make_conf("sqlite:///%s/db.sqlite"
                                              % tmp))
        self.addCleanup(self.db.dispose)
        self.now = base.T0
        self.useFixture(fixtures.MockPatchObject(
            timeutils, "utcnow", side_effect=lambda *a, **k: self.now))

    def learn(self, policy, peer=SOURCE, owner="p7"):
        return replicas.learn(self.db, policy, peer, owner)

    def test_no_policy(self):
        for nothing in (None, {}):
            self.assertIsNone(self.learn(nothing))
        self.assertEqual([], self.db.policy_get_all())

    def test_learnt(self):
        policy = served()
        self.assertEqual(policy["policy_id"], self.learn(policy))
        row = self.db.policy_get(policy["policy_id"])
        self.assertEqual("gold", row["name"])
        self.assertEqual("replica", row["role"])
        self.assertEqual("manual", row["mode"])
        self.assertFalse(row["enabled"])
        self.assertEqual(SOURCE, row["peer"])
        self.assertEqual("p7", row["project_id"])
        self.assertEqual(15, row["rpo_minutes"])
        # As the API stores a selector: every key.
        self.assertEqual(selectors.check({"tags": ["gold"]}),
                         row["selector"])
        self.assertEqual({}, row["options"])
        self.assertIn(SOURCE, row["description"])
        self.assertIn("gold", row["description"])
        self.assertIsNone(row["rpo_state"])

    def test_defaults(self):
        policy = served(rpo_minutes=None)
        self.learn(policy)
        row = self.db.policy_get(policy["policy_id"])
        self.assertEqual(60, row["rpo_minutes"])

    def test_learnt_again(self):
        policy = served()
        self.learn(policy)
        before = self.db.policy_get(policy["policy_id"])
        self.now = base.T0 + datetime.timedelta(minutes=5)
        # The same: not written again.
        self.assertEqual(policy["policy_id"], self.learn(policy))
        self.assertEqual(before, self.db.policy_get(policy["policy_id"]))
        # Changed at the source: followed.
        changed = dict(policy, rpo_minutes=5, selector={"tags": ["x"]})
        self.assertEqual(policy["policy_id"],
                         self.learn(changed, owner="p8"))
        row = self.db.policy_get(policy["policy_id"])
        self.assertEqual((5, selectors.check({"tags": ["x"]}), SOURCE),
                         (row["rpo_minutes"], row["selector"], row["peer"]))
        self.assertEqual(self.now, row["updated_at"])
        # Its owner and its state as a replica stay.
        self.assertEqual(("p7", "replica", False, "manual"),
                         (row["project_id"], row["role"], row["enabled"],
                          row["mode"]))
        self.assertEqual(1, len(self.db.policy_get_all()))

    def test_name_taken_in_the_owners_project(self):
        mine = self.db.policy_create({
            "name": "gold", "project_id": "p7", "peer": "dtn-c",
            "mode": "manual", "rpo_minutes": 60,
            "selector": {"tags": ["gold"]}})
        policy = served()
        self.assertEqual(policy["policy_id"], self.learn(policy))
        row = self.db.policy_get(policy["policy_id"])
        self.assertEqual("gold@%s" % SOURCE, row["name"])
        self.assertEqual("gold", self.db.policy_get(mine["id"])["name"])
        # In another project the name is free.
        other = served()
        self.learn(other, owner="p8")
        self.assertEqual("gold", self.db.policy_get(other["policy_id"])
                         ["name"])

    def test_both_names_taken(self):
        for name in ("gold", "gold@%s" % SOURCE):
            self.db.policy_create({
                "name": name, "project_id": "p7", "peer": "dtn-c",
                "mode": "manual", "rpo_minutes": 60,
                "selector": {"tags": ["gold"]}})
        policy = served()
        log = self.useFixture(fixtures.FakeLogger())
        # No row, and the replicas are catalogued without a policy (no
        # id of a policy that does not exist).
        self.assertIsNone(self.learn(policy))
        self.assertRaises(exception.ProtectionPolicyNotFound,
                          self.db.policy_get, policy["policy_id"])
        self.assertIn("names are taken", log.output)

    def test_long_name(self):
        policy = served(name="n" * 250)
        self.learn(policy)
        self.assertEqual("n" * 250, self.db.policy_get(
            policy["policy_id"])["name"])
        again = served(name="n" * 250)
        self.learn(again)
        # The fallback name fits the column: the name is cut, never the
        # peer.
        name = self.db.policy_get(again["policy_id"])["name"]
        self.assertEqual(255, len(name))
        self.assertTrue(name.endswith("n@" + SOURCE), name)

    def test_fallback_name_of_a_255_character_name(self):
        # Was a bug: "<name>@<peer>"[:255] of a 255-character name (the
        # longest a policy may have) is the name itself, which is taken:
        # the replica policy was never made, and its replicas could not
        # be drilled (ProtectionPolicyNotFound).
        self.learn(served(name="n" * 255))
        again = served(name="n" * 255)
        self.learn(again)
        self.assertNotEqual("n" * 255, self.db.policy_get(
            again["policy_id"])["name"])

    def test_a_local_policy_is_never_taken_over(self):
        mine = self.db.policy_create({
            "name": "gold", "project_id": "p1", "peer": "dtn-c",
            "mode": "continuous", "rpo_minutes": 60,
            "selector": {"tags": ["gold"]}})
        log = self.useFixture(fixtures.FakeLogger())
        self.assertIsNone(self.learn(served(policy_id=mine["id"],
                                            rpo_minutes=1)))
        self.assertEqual(mine, self.db.policy_get(mine["id"]))
        self.assertIn("has the id of a policy of this cloud", log.output)

    def test_another_peer_never_takes_a_policy_over(self):
        # A peer that names the id of a policy learnt from another peer
        # (its replicas, its drills, its failover) is refused: its
        # replicas are catalogued without a policy.
        policy = served()
        self.learn(policy)
        before = self.db.policy_get(policy["policy_id"])
        log = self.useFixture(fixtures.FakeLogger())
        taken = dict(policy, rpo_minutes=1, selector={"tags": ["evil"]})
        self.assertIsNone(self.learn(taken, peer="dtn-evil", owner="p9"))
        self.assertEqual(before, self.db.policy_get(policy["policy_id"]))
        self.assertIn("is the replica policy of peer %s here" % SOURCE,
                      log.output)
        # Failed over here, it is no more the other peer's.
        self.db.policy_update(policy["policy_id"], {"role": "failed-over"})
        self.assertIsNone(self.learn(taken, peer="dtn-evil"))
        self.assertEqual(SOURCE, self.db.policy_get(policy["policy_id"])
                         ["peer"])

    def test_selector_checked_as_the_api_does(self):
        # A selector the API would refuse is never learnt: a scan, a
        # failover and its failback read it later.
        log = self.useFixture(fixtures.FakeLogger())
        for selector in (None, {}, {"projects": ["p1"]},
                         {"tags": "gold"}, {"properties": ["a", "b"]},
                         {"tags": ["gold"], "colour": "red"},
                         {"visibility": ["everyone"]},
                         {"name_pattern": 7},
                         {"tags": ["x\u0000"]}):
            policy = served(selector=selector)
            self.assertIsNone(self.learn(policy), selector)
            self.assertRaises(exception.ProtectionPolicyNotFound,
                              self.db.policy_get, policy["policy_id"])
        self.assertIn("its replicas are catalogued without it", log.output)
        # Nor an RPO out of the API's bounds.
        self.assertIsNone(self.learn(served(rpo_minutes=1 << 40)))
        # A learnt policy keeps its selector when a later one is bad.
        policy = served()
        self.learn(policy)
        before = self.db.policy_get(policy["policy_id"])
        self.assertIsNone(self.learn(dict(
            policy, selector={"properties": "x"})))
        self.assertEqual(before, self.db.policy_get(policy["policy_id"]))

    def test_without_owner(self):
        # The image's owner was not known: the policy is the admin's.
        policy = served()
        self.learn(policy, owner=None)
        self.assertIsNone(self.db.policy_get(policy["policy_id"])
                          ["project_id"])

    def test_learnt_at_the_same_time(self):
        # Another import of the same policy made the row between this
        # one's read and its create.
        policy = served()
        self.learn(policy)
        real, reads = self.db.policy_get, []

        def policy_get(policy_id, project_id=None):
            reads.append(policy_id)
            if len(reads) == 1:         # before the other import's create
                raise exception.ProtectionPolicyNotFound(
                    policy_id=policy_id)
            return real(policy_id, project_id)
        self.useFixture(fixtures.MockPatchObject(
            self.db, "policy_get", side_effect=policy_get))
        self.assertEqual(policy["policy_id"], self.learn(policy))
        self.assertEqual(1, len(self.db.policy_get_all()))
