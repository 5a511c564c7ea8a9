"""dtn_migrate.engine.protection.metadata_sync: a failback's metadata
changes, applied on the source cloud (A), on a real SQLite database with
a fake Glance.
"""

import uuid

from dtn_migrate.conf import peer as peer_conf
from dtn_migrate.engine.protection import catalog
from dtn_migrate.engine.protection import metadata_sync
from dtn_migrate import exception
from tests.unit.engine.protection import test_sync

PEER = test_sync.PEER


class FakeGlance(test_sync.FakeGlance):
    def __init__(self):
        super().__init__()
        self.updates = []
        self.error = None

    def update(self, image_id, changes, remove=()):
        if self.error is not None:
            raise self.error
        self.updates.append((image_id, dict(changes), list(remove)))
        image = self.images[image_id]
        image.update(changes)
        for key in remove:
            image.pop(key, None)
        return dict(image)


def wanted(**changes):
    out = {"name": "web", "min_disk": None, "min_ram": None,
           "tags": ["gold"], "properties": {}}
    out.update(changes)
    return out


class HelpersTestCase(test_sync.ProtectionTestCase):
    def test_of_leaves_out_glance_and_the_marker(self):
        image = {"id": "i", "name": "web", "min_disk": 1, "min_ram": 0,
                 "tags": ["b", "a"], "status": "active", "owner": "p",
                 "os_hash_value": "h", "os_glance_x": "1",
                 "dtn_migrate_transfer_id": "t", "hw_disk_bus": "scsi"}
        self.assertEqual({"name": "web", "min_disk": 1, "min_ram": 0,
                          "tags": ["a", "b"],
                          "properties": {"hw_disk_bus": "scsi"}},
                         metadata_sync.of(image))

    def test_check_refuses(self):
        for bad in (None, [], {}, wanted(extra=1), wanted(name=7),
                    wanted(name="x" * 256), wanted(min_disk=-1),
                    wanted(min_ram=True), wanted(min_disk=1 << 31),
                    wanted(tags="gold"), wanted(tags=[""]),
                    wanted(tags=["t%d" % i for i in range(129)]),
                    wanted(properties=[]),
                    wanted(properties={"os_hash_value": "0"}),
                    wanted(properties={"status": "active"}),
                    wanted(properties={"dtn_migrate_transfer_id": "t"}),
                    wanted(properties={"": "x"}),
                    wanted(properties={"k": 1}),
                    wanted(properties={"k": "v" * 65536}),
                    wanted(properties={"k%d" % i: "v"
                                       for i in range(257)})):
            self.assertRaises(exception.InvalidInput, metadata_sync.check,
                              bad)
        good = wanted(properties={"os_distro": "debian"}, min_ram=512)
        self.assertIs(good, metadata_sync.check(good))

    def test_changes(self):
        image = {"name": "web", "min_disk": 1, "min_ram": 0,
                 "tags": ["gold"], "a": "1", "b": "2"}
        self.assertEqual(({}, []), metadata_sync.changes(
            wanted(min_disk=1, min_ram=0, properties={"a": "1", "b": "2"}),
            image))
        self.assertEqual((
            {"name": "app", "tags": ["gold", "x"], "a": "9", "c": "3"},
            ["b"]), metadata_sync.changes(
            wanted(name="app", tags=["x", "gold"],
                   properties={"a": "9", "c": "3"}), image))
        # None leaves a field as it is.
        self.assertEqual(({}, []), metadata_sync.changes(
            wanted(name=None, properties={"a": "1", "b": "2"}), image))


class HandleTestCase(test_sync.ProtectionTestCase):
    """A, asked by its peer B during B's failback."""

    def setUp(self):
        super().setUp()
        self.glance = self.migrations.res.images = FakeGlance()
        self.p.metadata.res = self.migrations.res
        self.policy_row = self.policy()
        self.image = dict(self.glance.add(x_keep="1"))
        self.copy_id = str(uuid.uuid4())
        catalog.record(self.db, {
            "state": "complete", "direction": "outgoing", "peer": PEER,
            "image_id": self.image["id"],
            "os_hash_value": self.image["os_hash_value"],
            "peer_image": {"image_id": self.copy_id,
                           "os_hash_value": self.image["os_hash_value"]},
            "migration_id": uuid.uuid4().hex},
            policy_id=self.policy_row["id"])

    def ask(self, peer=PEER, **changes):
        request = {"action": "update_metadata",
                   "policy_id": self.policy_row["id"],
                   "source_image_id": self.image["id"],
                   "replica_image_id": self.copy_id,
                   "hash_value": self.image["os_hash_value"],
                   "metadata": wanted(properties={"x_keep": "1"})}
        request.update(changes)
        return self.p.peer_request(peer, request)

    def test_updated_then_unchanged(self):
        answer = self.ask(metadata=wanted(
            name="renamed", tags=["gold", "tier1"],
            properties={"x_new": "2"}))
        self.assertEqual({"result": "updated",
                          "changed": ["name", "tags", "x_keep", "x_new"]},
                         answer)
        [(image_id, fields, remove)] = self.glance.updates
        self.assertEqual(self.image["id"], image_id)
        self.assertEqual({"name": "renamed", "tags": ["gold", "tier1"],
                          "x_new": "2"}, fields)
        self.assertEqual(["x_keep"], remove)
        # The same again (an interrupted failback run again): nothing.
        self.assertEqual({"result": "unchanged"}, self.ask(
            metadata=wanted(name="renamed", tags=["tier1", "gold"],
                            properties={"x_new": "2"})))
        self.assertEqual(1, len(self.glance.updates))

    def assertRefused(self, fragment, peer=PEER, **changes):
        answer = self.ask(peer=peer, metadata=wanted(name="evil"),
                          **changes)
        self.assertEqual("refused", answer["result"], answer)
        self.assertIn(fragment, answer["reason"])
        self.assertEqual([], self.glance.updates)
        self.assertEqual("web", self.glance.images[self.image["id"]][
            "name"])

    def test_refusals(self):
        self.assertRefused("did not replicate", peer="dtn-c")
        self.assertRefused("did not replicate",
                           source_image_id=str(uuid.uuid4()))
        self.assertRefused("did not replicate",
                           replica_image_id=str(uuid.uuid4()))
        self.assertRefused("did not replicate", policy_id=str(uuid.uuid4()))
        self.assertRefused("not what this cloud sent", hash_value="0" * 128)
        self.assertRefused("not what this cloud sent", hash_value=None)

    def test_refused_when_the_data_changed_here_or_is_gone(self):
        self.glance.images[self.image["id"]]["os_hash_value"] = "other"
        answer = self.ask(metadata=wanted(name="evil"))
        self.assertIn("data changed", answer["reason"])
        del self.glance.images[self.image["id"]]
        answer = self.ask(metadata=wanted(name="evil"))
        self.assertIn("not in this cloud's Glance", answer["reason"])
        self.assertEqual([], self.glance.updates)

    def test_refused_when_updates_are_not_accepted(self):
        peer_conf.section(self.conf, PEER)      # registers the group
        self.conf.set_override("accept_metadata_updates", False,
                               group=peer_conf.group_name(PEER))
        self.assertRefused("accept_metadata_updates")

    def test_deleted_replica_is_refused(self):
        row = self.db.replica_get("outgoing", PEER, self.image["id"],
                                  policy_id=self.policy_row["id"])
        self.db.replica_update(row["id"], {"state": catalog.DELETED})
        self.assertRefused("did not replicate")

    def test_glance_refusal_is_an_answer(self):
        self.glance.error = exception.InvalidInput(reason="bad property")
        answer = self.ask(metadata=wanted(name="x"))
        self.assertEqual("refused", answer["result"])
        self.assertIn("bad property", answer["reason"])

    def test_nonsense(self):
        for changes in ({"metadata": None}, {"metadata": wanted(tags=7)},
                        {"source_image_id": 5}, {"policy_id": None},
                        {"replica_image_id": "x" * 100}):
            self.assertRaises(exception.InvalidInput, self.ask, **changes)
        self.assertEqual([], self.glance.updates)
