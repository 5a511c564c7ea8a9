"""client.policies and client.replicas against the real API (noauth2,
SQLite, the API tests' fake engine) over HTTP.
"""

import uuid

from dtn_migrate.client import exceptions
from tests.unit.api import base as api_base
from tests.unit.client import test_real_api

SELECTOR = {"tags": ["gold"]}


class TestPolicies(test_real_api.RealApiTestCase):

    def test_create_get_find_update_delete(self):
        dtn = self.dtn()
        policy = dtn.policies.create(name="gold", peer="b",
                                     selector=SELECTOR, rpo_minutes=30)
        self.assertEqual(("gold", 30),
                         (policy["name"], policy["rpo"]["target_minutes"]))
        self.assertEqual(policy["id"], dtn.policies.get(policy["id"])["id"])
        self.assertEqual(policy["id"], dtn.policies.find("gold")["id"])
        self.assertEqual(policy["id"],
                         dtn.policies.find(policy["id"])["id"])
        self.assertRaises(exceptions.HttpNotFound, dtn.policies.find,
                          "silver")
        changed = dtn.policies.update(policy["id"], enabled=False,
                                      selector={"tags": ["gold", "db"]})
        self.assertEqual((False, ["gold", "db"]),
                         (changed["enabled"], changed["selector"]["tags"]))
        self.assertRaises(TypeError, dtn.policies.update, policy["id"],
                          colour="red")
        self.assertIsNone(dtn.policies.delete(policy["id"]))
        self.assertRaises(exceptions.HttpNotFound, dtn.policies.get,
                          policy["id"])

    def test_errors_carry_the_api_message(self):
        dtn = self.dtn()
        exc = self.assertRaises(exceptions.HttpBadRequest,
                                dtn.policies.create, name="x", peer="b",
                                selector={})
        self.assertIn("at least one of", str(exc))
        dtn.policies.create(name="x", peer="b", selector=SELECTOR)
        self.assertRaises(exceptions.HttpConflict, dtn.policies.create,
                          name="x", peer="b", selector=SELECTOR)

    def test_list_follows_pages(self):
        dtn = self.dtn()
        for i in range(7):          # the API's pages hold 5 at most
            dtn.policies.create(name="p%d" % i, peer="b" if i % 2 else "c",
                                selector=SELECTOR)
        self.assertEqual(["p%d" % i for i in reversed(range(7))],
                         [p["name"] for p in dtn.policies.list()])
        self.assertEqual(3, len(dtn.policies.list(limit=3)))
        self.assertEqual(["p5", "p3", "p1"],
                         [p["name"] for p in dtn.policies.list(peer="b")])
        self.assertEqual(0, len(dtn.policies.list(enabled=False)))
        self.assertRaises(exceptions.HttpForbidden, dtn.policies.list,
                          all_projects=True)
        self.assertEqual(7, len(self.dtn("admin").policies.list(
            all_projects=True)))

    def test_sync_and_images(self):
        dtn = self.dtn()
        policy = dtn.policies.create(name="gold", peer="b",
                                     selector=SELECTOR)
        result = dtn.policies.sync(policy["id"])
        self.assertEqual([api_base.IMAGE],
                         [m["image_id"] for m in result["migrations"]])
        self.assertEqual(1, result["policy"]["images"]["syncing"])
        images = dtn.policies.images(policy["id"])
        self.assertEqual([(api_base.IMAGE, "syncing")],
                         [(i["image_id"], i["state"]) for i in images])
        self.assertEqual([], dtn.policies.images(policy["id"],
                                                 state=["failed"]))

    def test_failover_and_failback(self):
        policy = self.add_policy(role="replica", mode="manual",
                                 enabled=False)
        admin = self.dtn("admin")
        result = admin.policies.failover(policy["id"])
        self.assertEqual(("failed-over", "gold-failback", 0),
                         (result["policy"]["role"],
                          result["reverse_policy"]["name"],
                          result["promoted"]))
        reverse = result["reverse_policy"]["id"]
        self.db.policy_image_upsert(reverse, api_base.IMAGE2, {
            "state": "pending", "image_name": "new"})
        result = admin.policies.failback(policy["id"])
        self.assertFalse(result["complete"])
        self.assertEqual([api_base.IMAGE2],
                         [m["image_id"] for m in result["migrations"]])
        self.db.policy_image_upsert(reverse, api_base.IMAGE2,
                                    {"state": "replicated"})
        result = admin.policies.failback(policy["id"])
        self.assertEqual((True, "replica", reverse),
                         (result["complete"], result["policy"]["role"],
                          result["reverse_policy"]["id"]))
        # An operator's actions; a primary policy is a conflict.
        for call in (self.dtn().policies.failover,
                     self.dtn().policies.failback):
            self.assertRaises(exceptions.HttpForbidden, call, policy["id"])
        primary = self.add_policy(name="primary")
        exc = self.assertRaises(exceptions.HttpConflict,
                                admin.policies.failover, primary["id"])
        self.assertIn("fail over", str(exc))

    def test_find_is_scoped_to_the_project(self):
        for project in (api_base.PROJECT, api_base.OTHER):
            self.dtn("admin").policies.create(
                name="same", peer="b", selector=SELECTOR,
                project_id=project)
        admin = self.dtn("admin")
        # The admin's list is its own project's: none named so.
        self.assertRaises(exceptions.HttpNotFound, admin.policies.find,
                          "same")
        self.assertEqual("same", self.dtn().policies.find("same")["name"])


class TestReplicas(test_real_api.RealApiTestCase):

    def test_list(self):
        for i in range(7):
            self.db.replica_upsert("outgoing", "b", str(uuid.UUID(int=i)),
                                   {"project_id": api_base.PROJECT})
        dtn = self.dtn()
        self.assertEqual(7, len(dtn.replicas.list()))
        self.assertEqual(2, len(dtn.replicas.list(limit=2)))
        self.assertEqual([], dtn.replicas.list(direction="incoming"))
        self.assertEqual(1, len(dtn.replicas.list(
            source_image_id=str(uuid.UUID(int=3)))))
