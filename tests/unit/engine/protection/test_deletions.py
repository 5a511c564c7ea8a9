"""dtn_migrate.engine.protection.deletions: mirror deletions, both ends,
on a real SQLite database with a fake Glance and agent.
"""

import datetime
import uuid

from dtn_migrate.conf import peer as peer_conf
from dtn_migrate.engine.protection import catalog
from dtn_migrate.engine.protection import deletions
from dtn_migrate.engine.protection import replicas
from dtn_migrate import exception
from tests.unit.engine.protection import test_sync

PEER = test_sync.PEER
SOURCE = "dtn-a"


class SourceTestCase(test_sync.ProtectionTestCase):
    """The cloud whose image was deleted."""

    def setUp(self):
        super().setUp()
        self.agent = self.migrations.res.agent
        self.sent = []
        self.answer = {"result": "deleted"}
        self.agent.peer_request = self.peer_request
        self.migrations.state = "complete"

    def peer_request(self, ctxt, host, peer, request, timeout=None):
        self.assertEqual(130, timeout)      # no [agent] group here
        if request.get("action") == "preflight":
            # The policy's creation asks the peer's preflight.
            return {"allowed": True}
        self.sent.append((host, peer, request))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer

    def protected(self, deletion="mirror", grace=10):
        policy = self.policy(options={"deletion": deletion,
                                      "deletion_grace_minutes": grace})
        image = self.glance.add()
        self.p.protect(policy, image)
        self.assertEqual("replicated",
                         self.db.policy_image_get(policy["id"],
                                                  image["id"])["state"])
        return policy, image

    def delete(self, image):
        del self.glance.images[image["id"]]
        self.p.image_deleted(image["id"])

    def row(self, policy, image):
        return self.db.policy_image_get(policy["id"], image["id"])

    def outgoing(self, policy, image):
        return self.db.replica_get(catalog.OUTGOING, PEER, image["id"],
                                   policy_id=policy["id"])

    def test_mirror_deletes_the_replica_after_the_grace_period(self):
        policy, image = self.protected(grace=10)
        replica = self.outgoing(policy, image)
        self.later(2)
        self.delete(image)
        row = self.row(policy, image)
        self.assertEqual("deleting", row["state"])
        self.assertEqual(self.now, row["changed_at"])
        # Not counted against the recovery point.
        self.p.check_rpo()
        self.assertEqual(0.0, self.db.policy_get(policy["id"])[
            "rpo_seconds"])

        self.later(11)                      # 9 minutes: within the grace
        self.assertEqual({}, self.p.deletions.send_due())
        self.assertEqual([], self.sent)

        self.later(12)
        self.assertEqual({image["id"]: "deleted"},
                         self.p.deletions.send_due())
        [(host, peer, request)] = self.sent
        self.assertEqual(("dtn-a", PEER), (host, peer))
        self.assertEqual({"action": "delete_replica",
                          "policy_id": policy["id"],
                          "source_image_id": image["id"],
                          "replica_image_id": replica["replica_image_id"],
                          "hash_value": image["os_hash_value"]}, request)
        row = self.row(policy, image)
        self.assertEqual("removed", row["state"])
        self.assertIn("replica deleted", row["error"])
        self.assertEqual("deleted", self.outgoing(policy, image)["state"])
        # Done: never asked again.
        self.later(30)
        self.p.deletions.send_due()
        self.assertEqual(1, len(self.sent))

    def test_keep_never_asks_the_peer(self):
        policy, image = self.protected(deletion="keep", grace=0)
        self.delete(image)
        self.assertEqual("removed", self.row(policy, image)["state"])
        self.later(600)
        self.assertEqual({}, self.p.deletions.send_due())
        self.assertEqual([], self.sent)
        self.assertEqual("current", self.outgoing(policy, image)["state"])

    def test_a_second_notice_keeps_the_first_time(self):
        policy, image = self.protected(grace=10)
        self.delete(image)
        first = self.row(policy, image)["changed_at"]
        self.later(5)
        self.p.image_deleted(image["id"])
        self.assertEqual(first, self.row(policy, image)["changed_at"])

    def test_a_scan_that_misses_the_image_starts_the_grace(self):
        policy, image = self.protected(grace=0)
        del self.glance.images[image["id"]]     # the notification was lost
        self.p.scan_policy(self.db.policy_get(policy["id"]))
        self.assertEqual("deleting", self.row(policy, image)["state"])
        # The next scan leaves it waiting.
        self.p.scan_policy(self.db.policy_get(policy["id"]))
        self.assertEqual("deleting", self.row(policy, image)["state"])
        self.assertEqual({image["id"]: "deleted"},
                         self.p.deletions.send_due())

    def test_unreachable_peer_is_asked_again(self):
        policy, image = self.protected(grace=0)
        self.delete(image)
        self.answer = exception.PeerUnreachable(peer=PEER,
                                                reason="link cut")
        for _ in range(3):
            self.assertEqual({}, self.p.deletions.send_due())
            row = self.row(policy, image)
            self.assertEqual("deleting", row["state"])
            self.assertIn("link cut", row["error"])
        self.answer = {"result": "deleted"}
        self.assertEqual({image["id"]: "deleted"},
                         self.p.deletions.send_due())
        self.assertEqual(4, len(self.sent))
        self.assertEqual("removed", self.row(policy, image)["state"])

    def test_refusal_ends_the_deletion_and_keeps_the_catalog(self):
        policy, image = self.protected(grace=0)
        self.delete(image)
        self.answer = {"result": "refused", "reason": "failed over"}
        self.assertEqual({image["id"]: "refused"},
                         self.p.deletions.send_due())
        row = self.row(policy, image)
        self.assertEqual("removed", row["state"])
        self.assertIn("kept its replica: failed over", row["error"])
        self.assertEqual("current", self.outgoing(policy, image)["state"])

    def test_nonsense_answer_is_asked_again(self):
        policy, image = self.protected(grace=0)
        self.delete(image)
        for answer in ({"result": "maybe"}, ["deleted"], None):
            self.answer = answer
            self.assertEqual({}, self.p.deletions.send_due())
            self.assertEqual("deleting", self.row(policy, image)["state"])

    def test_policy_switched_to_keep_within_the_grace(self):
        policy, image = self.protected(grace=10)
        self.delete(image)
        self.p.update(test_sync.member(), policy["id"],
                      {"options": {"deletion": "keep"}})
        self.later(60)
        self.assertEqual({}, self.p.deletions.send_due())
        self.assertEqual([], self.sent)
        row = self.row(policy, image)
        self.assertEqual("removed", row["state"])
        self.assertIn("kept", row["error"])

    def test_disabled_policy_waits(self):
        policy, image = self.protected(grace=0)
        self.delete(image)
        self.p.update(test_sync.member(), policy["id"], {"enabled": False})
        self.assertEqual({}, self.p.deletions.send_due())
        self.assertEqual("deleting", self.row(policy, image)["state"])
        self.p.update(test_sync.member(), policy["id"], {"enabled": True})
        self.assertEqual({image["id"]: "deleted"},
                         self.p.deletions.send_due())

    def test_an_image_still_in_glance_is_not_mirrored(self):
        policy, image = self.protected(grace=0)
        self.glance.images[image["id"]]["status"] = "deleted"
        self.p.image_deleted(image["id"])
        self.assertEqual("deleting", self.row(policy, image)["state"])
        # Glance shows it again (a deletion that failed there).
        self.glance.images[image["id"]]["status"] = "active"
        self.assertEqual({}, self.p.deletions.send_due())
        self.assertEqual([], self.sent)
        self.assertIn("back", self.row(policy, image)["error"])

    def test_never_replicated_image_is_just_removed(self):
        policy = self.policy(options={"deletion": "mirror",
                                      "deletion_grace_minutes": 0})
        self.migrations.state = "queued"
        image = self.glance.add()
        self.p.protect(policy, image)
        self.delete(image)
        self.assertEqual("removed", self.row(policy, image)["state"])
        self.assertEqual({}, self.p.deletions.send_due())


class FakePeerGlance(test_sync.FakeGlance):
    def __init__(self):
        super().__init__()
        self.deleted = []

    def delete(self, image_id, unprotect=False):
        self.deleted.append(image_id)
        self.images.pop(image_id, None)


class PeerTestCase(test_sync.ProtectionTestCase):
    """The cloud that holds the replica."""

    def setUp(self):
        super().setUp()
        self.glance = self.migrations.res.images = FakePeerGlance()
        self.p.deletions.res = self.migrations.res
        self.policy_id = str(uuid.uuid4())
        replicas.learn(self.db, {"policy_id": self.policy_id,
                                 "name": "gold", "rpo_minutes": 30,
                                 "selector": {"tags": ["gold"]}},
                       SOURCE, "p1")
        self.copy = self.glance.add()
        self.source_id = str(uuid.uuid4())
        catalog.record(self.db, {
            "state": "complete", "direction": "incoming", "peer": SOURCE,
            "source_image_id": self.source_id, "image_id": self.copy["id"],
            "os_hash_value": self.copy["os_hash_value"],
            "migration_id": uuid.uuid4().hex}, policy_id=self.policy_id,
            owner="p1")

    def request(self, **changes):
        request = {"action": "delete_replica", "policy_id": self.policy_id,
                   "source_image_id": self.source_id,
                   "replica_image_id": self.copy["id"],
                   "hash_value": self.copy["os_hash_value"]}
        request.update(changes)
        return request

    def handle(self, peer=SOURCE, **changes):
        return self.p.peer_request(peer, self.request(**changes))

    def incoming(self):
        return self.db.replica_get(catalog.INCOMING, SOURCE, self.source_id,
                                   policy_id=self.policy_id)

    def test_deletes_the_catalogued_replica_once(self):
        self.assertEqual({"result": "deleted",
                          "replica_image_id": self.copy["id"]},
                         self.handle())
        self.assertEqual([self.copy["id"]], self.glance.deleted)
        self.assertEqual("deleted", self.incoming()["state"])
        # The answer was lost: asked again, nothing more is deleted.
        self.assertEqual("deleted", self.handle()["result"])
        self.assertEqual(1, len(self.glance.deleted))

    def test_unknown_replica_is_absent(self):
        self.assertEqual({"result": "absent"},
                         self.handle(source_image_id=str(uuid.uuid4())))
        # Another peer's request names nothing of ours either.
        self.assertEqual({"result": "absent"}, self.handle(peer="dtn-c"))
        self.assertEqual([], self.glance.deleted)

    def test_image_already_gone_is_deleted(self):
        del self.glance.images[self.copy["id"]]
        self.assertEqual("deleted", self.handle()["result"])
        self.assertEqual("deleted", self.incoming()["state"])

    def assertRefused(self, fragment, **changes):
        answer = self.handle(**changes)
        self.assertEqual("refused", answer["result"])
        self.assertIn(fragment, answer["reason"])
        self.assertEqual([], self.glance.deleted)
        self.assertEqual("current", self.incoming()["state"])

    def test_refused_after_failover(self):
        self.db.policy_update(self.policy_id,
                              {"role": replicas.FAILED_OVER})
        self.assertRefused("failed over")

    def test_refused_when_changed_here(self):
        self.glance.images[self.copy["id"]]["os_hash_value"] = "0" * 128
        self.assertRefused("changed on this cloud")

    def test_refused_when_protected(self):
        self.glance.images[self.copy["id"]]["protected"] = True
        self.assertRefused("protected")

    def test_another_policy_holds_nothing_here(self):
        self.assertEqual({"result": "absent"},
                         self.handle(policy_id=str(uuid.uuid4())))
        self.assertEqual([], self.glance.deleted)
        self.assertEqual("current", self.incoming()["state"])

    def test_another_projects_copy_of_the_image_stays(self):
        # A migration of the same source image by another project, which
        # served no policy, landed here too: the policy's deletion
        # deletes the policy's replica, never that copy.
        theirs = self.glance.add()
        catalog.record(self.db, {
            "state": "complete", "direction": "incoming", "peer": SOURCE,
            "source_image_id": self.source_id, "image_id": theirs["id"],
            "os_hash_value": theirs["os_hash_value"],
            "migration_id": uuid.uuid4().hex}, owner="p2")
        self.assertEqual({"result": "deleted",
                          "replica_image_id": self.copy["id"]},
                         self.handle())
        self.assertEqual([self.copy["id"]], self.glance.deleted)
        self.assertEqual("current", self.db.replica_get(
            catalog.INCOMING, SOURCE, self.source_id, project_id="p2")[
                "state"])

    def test_refused_for_another_peers_policy(self):
        self.db.policy_update(self.policy_id, {"peer": "dtn-c"})
        self.assertRefused("no such policy")

    def test_refused_when_deletions_are_not_accepted(self):
        peer_conf.section(self.conf, SOURCE)    # registers the group
        self.conf.set_override("accept_deletions", False,
                               group=peer_conf.group_name(SOURCE))
        self.assertRefused("accept_deletions")

    def test_refused_for_a_policy_of_this_cloud(self):
        self.db.policy_update(self.policy_id, {"role": "primary"})
        self.assertRefused("this cloud's own")

    def test_nonsense_requests(self):
        for request in (None, [], "delete", {"action": "format_disk"},
                        self.request(source_image_id=None),
                        self.request(source_image_id="x" * 65),
                        self.request(policy_id=7),
                        self.request(policy_id="")):
            self.assertRaises(exception.InvalidInput,
                              self.p.peer_request, SOURCE, request)
        self.assertEqual([], self.glance.deleted)


class HelpersTestCase(test_sync.ProtectionTestCase):
    def test_grace(self):
        self.assertEqual(datetime.timedelta(minutes=60),
                         deletions.grace({"options": {}}))
        self.assertEqual(datetime.timedelta(0), deletions.grace(
            {"options": {"deletion_grace_minutes": 0}}))
        self.assertFalse(deletions.mirrors({"options": None}))
        self.assertTrue(deletions.mirrors({"options": {
            "deletion": "mirror"}}))
