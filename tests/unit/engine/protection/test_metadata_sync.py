"""dtn_migrate.engine.protection.metadata_sync: a failback's metadata
changes, applied on the source cloud (A), on a real SQLite database with
a fake Glance.
"""

import uuid

from dtn_migrate.conf import peer as peer_conf
from dtn_migrate.engine.protection import catalog
from dtn_migrate.engine.protection import failover
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


def replicated(db, image, copy_id, project="p1", policy_id=None):
    """The catalog: this cloud replicated ``image`` to PEER as
    ``copy_id``, for ``policy_id`` (else for ``project``).
    """
    catalog.record(db, {
        "state": "complete", "direction": "outgoing", "peer": PEER,
        "image_id": image["id"], "project_id": project,
        "os_hash_value": image["os_hash_value"],
        "peer_image": {"image_id": copy_id,
                       "os_hash_value": image["os_hash_value"]},
        "migration_id": uuid.uuid4().hex}, policy_id=policy_id)


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
        self.assertEqual(({}, [], []), metadata_sync.changes(
            wanted(min_disk=1, min_ram=0, properties={"a": "1", "b": "2"}),
            image))
        self.assertEqual((
            {"name": "app", "tags": ["gold", "x"], "a": "9", "c": "3"},
            ["b"], []), metadata_sync.changes(
            wanted(name="app", tags=["x", "gold"],
                   properties={"a": "9", "c": "3"}), image))
        # None leaves a field as it is.
        self.assertEqual(({}, [], []), metadata_sync.changes(
            wanted(name=None, properties={"a": "1", "b": "2"}), image))

    def test_changes_only_to_writable_properties(self):
        image = {"name": "web", "min_disk": 1, "min_ram": 0,
                 "tags": ["gold"], "x_a": "1", "hw_disk_bus": "virtio",
                 "note": "n"}
        fields, remove, kept = metadata_sync.changes(
            wanted(min_disk=1, min_ram=0, properties={
                "x_a": "2", "x_b": "3", "hw_machine_type": "pc",
                "img_signature": "forged", "os_distro": "evil"}),
            image, allowed=("x_*",))
        self.assertEqual({"x_a": "2", "x_b": "3"}, fields)
        # Not removed, not set: kept as this cloud has them.
        self.assertEqual([], remove)
        self.assertEqual(["hw_disk_bus", "hw_machine_type",
                          "img_signature", "note", "os_distro"], kept)

    def test_writable(self):
        everything = ("*",)
        for key in ("x_note", "description", "custom"):
            self.assertTrue(metadata_sync.writable(key, everything), key)
        # Never, whatever the configuration says.
        for key in ("img_signature", "img_signature_hash_method",
                    "img_signature_key_type",
                    "img_signature_certificate_uuid", "img_config_drive",
                    "os_hash_value", "os_hash_algo", "os_glance_x",
                    "os_distro", "os_type", "os_secure_boot",
                    "hw_disk_bus", "hw_firmware_type", "hw_cpu_cores",
                    "owner", "owner_specified.openstack.sha256",
                    "visibility", "protected", "os_hidden",
                    "dtn_migrate_transfer_id", "dtn_migrate_x",
                    "kernel_id", "ramdisk_id", "block_device_mapping",
                    "bdm_v2", "root_device_name", "trait:CUSTOM_X",
                    "traits_required", "architecture", "hypervisor_type",
                    "vm_mode", "auto_disk_config", "checksum", "size",
                    "status", "locations"):
            self.assertFalse(metadata_sync.writable(key, everything), key)
        # The default: description and x_* only.
        allowed = self.conf.protection.failback_properties
        self.assertEqual(["description", "x_*"], allowed)
        self.assertTrue(metadata_sync.writable("x_note", allowed))
        self.assertFalse(metadata_sync.writable("note", allowed))


class TestPeerTrust(test_sync.ProtectionTestCase):
    """What a peer's metadata update may do on this cloud (A), as its
    operator meets it: with the defaults, and around a failback opened
    here (``openstack dtn failback`` on A's primary policy).
    """

    def setUp(self):
        super().setUp()
        self.glance = self.migrations.res.images = FakeGlance()
        self.p.metadata.res = self.migrations.res
        self.policy_row = self.policy()
        self.image = dict(self.glance.add(hw_disk_bus="scsi",
                                          img_signature="good"))
        self.copy_id = str(uuid.uuid4())
        replicated(self.db, self.image, self.copy_id,
                   policy_id=self.policy_row["id"])

    def forged(self):
        return self.p.peer_request(PEER, {
            "action": "update_metadata",
            "policy_id": self.policy_row["id"],
            "source_image_id": self.image["id"],
            "replica_image_id": self.copy_id,
            "hash_value": self.image["os_hash_value"],
            "metadata": wanted(name="evil", properties={
                "x_note": "from b", "hw_machine_type": "evil",
                "img_signature": "forged", "os_secure_boot": "disabled"})})

    def test_refused_by_default(self):
        answer = self.forged()
        self.assertEqual("refused", answer["result"], answer)
        self.assertIn("accept_metadata_updates", answer["reason"])
        self.assertEqual([], self.glance.updates)

    def test_only_in_a_failback_opened_here_and_never_boot_keys(self):
        peer_conf.section(self.conf, PEER)
        self.conf.set_override("accept_metadata_updates", True,
                               group=peer_conf.group_name(PEER))
        answer = self.forged()
        self.assertNotIn(answer["result"], ("updated", "unchanged"), answer)
        self.assertEqual([], self.glance.updates)
        # This cloud's administrator opens the failback of the policy.
        failover.Failover(self.p).failback(test_sync.admin(),
                                           self.policy_row["id"])
        self.assertEqual("updated", self.forged()["result"])
        image = self.glance.images[self.image["id"]]
        self.assertEqual(("evil", "from b", "scsi", "good"), (
            image["name"], image["x_note"], image["hw_disk_bus"],
            image["img_signature"]))
        self.assertNotIn("hw_machine_type", image)
        self.assertNotIn("os_secure_boot", image)


class HandleTestCase(test_sync.ProtectionTestCase):
    """A, asked by its peer B during B's failback."""

    def setUp(self):
        super().setUp()
        self.glance = self.migrations.res.images = FakeGlance()
        self.p.metadata.res = self.migrations.res
        self.policy_row = self.policy()
        self.image = dict(self.glance.add(x_keep="1", hw_disk_bus="scsi"))
        self.copy_id = str(uuid.uuid4())
        self.replicated(self.copy_id, policy_id=self.policy_row["id"])
        self.accept(True)
        self.open()

    def replicated(self, copy_id, project="p1", policy_id=None):
        replicated(self.db, self.image, copy_id, project, policy_id)

    def accept(self, value, peer=PEER):
        peer_conf.section(self.conf, peer)      # registers the group
        self.conf.set_override("accept_metadata_updates", value,
                               group=peer_conf.group_name(peer))

    def open(self):
        """This cloud's administrator opens the policy's failback."""
        return self.p.metadata.open(self.db.policy_get(
            self.policy_row["id"]))

    def ask(self, peer=PEER, **changes):
        request = {"action": "update_metadata",
                   "policy_id": self.policy_row["id"],
                   "source_image_id": self.image["id"],
                   "replica_image_id": self.copy_id,
                   "hash_value": self.image["os_hash_value"],
                   "metadata": wanted(properties={"x_keep": "1",
                                                  "hw_disk_bus": "scsi"})}
        request.update(changes)
        return self.p.peer_request(peer, request)

    def test_updated_then_unchanged(self):
        answer = self.ask(metadata=wanted(
            name="renamed", tags=["gold", "tier1"],
            properties={"x_new": "2", "hw_disk_bus": "scsi"}))
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
                            properties={"x_new": "2",
                                        "hw_disk_bus": "scsi"})))
        self.assertEqual(1, len(self.glance.updates))

    def test_what_a_peer_may_never_change(self):
        # Signatures, Glance's and the engine's own, boot properties:
        # neither set nor removed, even by an open failback; the answer
        # names them.
        self.conf.set_override("failback_properties", ["*"], "protection")
        answer = self.ask(metadata=wanted(properties={
            "x_keep": "1", "img_signature": "forged",
            "img_signature_certificate_uuid": "c",
            "hw_machine_type": "q35", "os_secure_boot": "disabled",
            "kernel_id": "k", "os_distro": "evil", "note": "ok"}))
        self.assertEqual("updated", answer["result"])
        self.assertEqual(["note"], answer["changed"])
        self.assertEqual(["hw_disk_bus", "hw_machine_type",
                          "img_signature", "img_signature_certificate_uuid",
                          "kernel_id", "os_distro", "os_secure_boot"],
                         answer["kept"])
        image = self.glance.images[self.image["id"]]
        self.assertEqual("scsi", image["hw_disk_bus"])
        for key in ("img_signature", "hw_machine_type", "kernel_id",
                    "os_distro", "os_secure_boot"):
            self.assertNotIn(key, image)
        # By default only description and x_* are a peer's to change.
        self.conf.clear_override("failback_properties", "protection")
        answer = self.ask(metadata=wanted(properties={
            "x_keep": "2", "hw_disk_bus": "scsi", "description": "d",
            "custom": "c"}))
        self.assertEqual((["description", "x_keep"], ["custom", "note"]),
                         (answer["changed"], answer["kept"]))

    def assertRefused(self, fragment, peer=PEER, result="refused",
                      **changes):
        answer = self.ask(peer=peer, metadata=wanted(name="evil"),
                          **changes)
        self.assertEqual(result, answer["result"], answer)
        self.assertIn(fragment, answer["reason"])
        self.assertEqual([], self.glance.updates)
        self.assertEqual("web", self.glance.images[self.image["id"]][
            "name"])

    def test_refused_by_default(self):
        self.conf.clear_override("accept_metadata_updates",
                                 group=peer_conf.group_name(PEER))
        self.assertRefused("accept_metadata_updates")
        exc = self.assertRaises(exception.ProtectionPolicyConflict,
                                self.open)
        self.assertIn("accept_metadata_updates", str(exc))

    def test_only_while_a_failback_is_open_here(self):
        # Never opened: closed.
        other = self.policy(name="silver")
        self.replicated(self.copy_id, policy_id=other["id"])
        self.assertRefused("no failback of policy %s is open" % other["id"],
                           result="closed", policy_id=other["id"])
        # Open: applied, until the window's end.
        self.later(1 + 239)
        self.assertEqual("updated", self.ask(
            metadata=wanted(name="first"))["result"])
        self.glance.updates.clear()
        self.glance.images[self.image["id"]]["name"] = "web"
        self.later(1 + 240)
        self.assertRefused("no failback", result="closed")
        # Opened again, then the peer says its failback is complete.
        self.open()
        self.assertEqual({"result": "closed"}, self.p.peer_request(
            PEER, {"action": "close_failback",
                   "policy_id": self.policy_row["id"]}))
        self.assertRefused("no failback", result="closed")
        # Another peer closes nothing of it.
        self.open()
        self.assertEqual("refused", self.p.peer_request(
            "dtn-c", {"action": "close_failback",
                      "policy_id": self.policy_row["id"]})["result"])
        self.assertEqual("updated", self.ask(
            metadata=wanted(name="second"))["result"])

    def test_window_of_the_configuration(self):
        self.conf.set_override("failback_window", 60, "protection")
        self.open()
        self.later(2)
        self.assertRefused("no failback", result="closed")

    def test_refusals(self):
        self.accept(True, "dtn-c")
        self.assertRefused("replicates no such policy to dtn-c",
                           peer="dtn-c")
        self.assertRefused("did not replicate",
                           source_image_id=str(uuid.uuid4()))
        self.assertRefused("did not replicate",
                           replica_image_id=str(uuid.uuid4()))
        self.assertRefused("no such policy", policy_id=str(uuid.uuid4()))
        self.assertRefused("not what this cloud sent", hash_value="0" * 128)
        self.assertRefused("not what this cloud sent", hash_value=None)

    def test_another_projects_replica_of_the_image(self):
        # Another project migrated the same image to the peer (no
        # policy): its copy's metadata never lands here for the policy.
        theirs = str(uuid.uuid4())
        self.replicated(theirs, project="p2")
        self.assertRefused("did not replicate", replica_image_id=theirs)
        self.assertEqual("updated", self.ask(
            metadata=wanted(name="renamed"))["result"])

    def test_refused_when_the_data_changed_here_or_is_gone(self):
        self.glance.images[self.image["id"]]["os_hash_value"] = "other"
        answer = self.ask(metadata=wanted(name="evil"))
        self.assertIn("data changed", answer["reason"])
        del self.glance.images[self.image["id"]]
        answer = self.ask(metadata=wanted(name="evil"))
        self.assertIn("not in this cloud's Glance", answer["reason"])
        self.assertEqual([], self.glance.updates)

    def test_refused_when_updates_are_not_accepted(self):
        self.accept(False)
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
        self.assertRaises(exception.InvalidInput, self.p.peer_request, PEER,
                          {"action": "close_failback", "policy_id": 7})
        self.assertEqual([], self.glance.updates)
