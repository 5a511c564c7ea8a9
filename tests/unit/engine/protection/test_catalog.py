"""dtn_migrate.engine.protection.catalog: the replica catalog."""

import datetime

import fixtures
from oslo_utils import timeutils

from dtn_migrate.db import protection as db_protection
from dtn_migrate.engine.protection import catalog

from tests.unit import testcase

NOW = datetime.datetime(2026, 1, 1, 12, 0)
SRC = "11111111-1111-1111-1111-111111111111"
DST = "22222222-2222-2222-2222-222222222222"
MID = "3" * 32


POLICY = {"id": "pol", "peer": "dtn-b"}


def owned(policy_id=None, project_id=None):
    return db_protection.owner_key(policy_id, project_id)


class FakeDB:
    """The replica methods of the database, in a dict keyed as its rows
    (direction, peer, source image, owner).
    """

    def __init__(self):
        self.replicas = {}
        self.upserts = []

    def replica_get(self, direction, peer, source_image_id, policy_id=None,
                    project_id=None):
        row = self.replicas.get((direction, peer, source_image_id,
                                 owned(policy_id, project_id)))
        return dict(row) if row else None

    def replica_get_all(self, filters=None):
        return [dict(row) for row in self.replicas.values()
                if all(row.get(k) == v for k, v in (filters or {}).items())]

    def replica_upsert(self, direction, peer, source_image_id, values):
        self.upserts.append((direction, peer, source_image_id,
                             dict(values)))
        key = (direction, peer, source_image_id,
               owned(values.get("policy_id"), values.get("project_id")))
        row = self.replicas.setdefault(key, {
            "direction": direction, "peer": peer,
            "source_image_id": source_image_id, "state": "current"})
        row.update(values)
        return dict(row)


def outgoing(**fields):
    out = {"migration_id": MID, "direction": "outgoing", "peer": "dtn-b",
           "state": "complete", "image_id": SRC, "image_name": "web",
           "size": 42, "os_hash_value": "h1", "project_id": "p1",
           "peer_image": {"image_id": DST, "os_hash_value": "h1"}}
    out.update(fields)
    return out


def incoming(**fields):
    out = {"migration_id": "in-" + MID, "direction": "incoming",
           "peer": "dtn-a", "state": "complete", "image_id": DST,
           "source_image_id": SRC, "image_name": "web", "size": 42,
           "os_hash_value": "h1", "peer_image": None}
    out.update(fields)
    return out


class TestRecord(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.MockPatchObject(timeutils, "utcnow",
                                                 return_value=NOW))
        self.db = FakeDB()

    def test_outgoing(self):
        row = catalog.record(self.db, outgoing(), policy_id="pol")
        self.assertEqual(
            {"direction": "outgoing", "peer": "dtn-b",
             "source_image_id": SRC, "replica_image_id": DST,
             "hash_algo": "sha512", "hash_value": "h1", "state": "current",
             "verified_at": NOW, "image_name": "web", "size": 42,
             "migration_id": MID, "project_id": "p1", "policy_id": "pol"},
            row)

    def test_outgoing_without_policy_is_its_projects(self):
        catalog.record(self.db, outgoing(), policy_id="pol")
        catalog.record(self.db, outgoing(migration_id="4" * 32,
                                         project_id="p2",
                                         peer_image={"image_id": "mine",
                                                     "os_hash_value": "h1"}))
        values = self.db.upserts[-1][3]
        self.assertEqual((None, "p2"), (values["policy_id"],
                                        values["project_id"]))
        # The policy's row is as it was.
        row = self.db.replica_get("outgoing", "dtn-b", SRC,
                                  policy_id="pol")
        self.assertEqual(("p1", DST, MID), (
            row["project_id"], row["replica_image_id"],
            row["migration_id"]))
        self.assertEqual("mine", self.db.replica_get(
            "outgoing", "dtn-b", SRC, project_id="p2")["replica_image_id"])

    def test_incoming(self):
        row = catalog.record(self.db, incoming(), owner="p7")
        self.assertEqual(("incoming", "dtn-a", SRC),
                         self.db.upserts[0][:3])
        self.assertEqual(DST, row["replica_image_id"])
        self.assertEqual("h1", row["hash_value"])
        self.assertEqual("p7", row["project_id"])
        self.assertEqual(NOW, row["verified_at"])
        self.assertEqual("in-" + MID, row["migration_id"])
        self.assertIsNone(row["policy_id"])

    def test_incoming_without_images(self):
        self.assertIsNone(catalog.record(self.db,
                                         incoming(source_image_id=None)))
        self.assertIsNone(catalog.record(self.db, incoming(image_id=None)))
        self.assertEqual([], self.db.upserts)

    def test_unverified(self):
        # The peer's hash is not the source's, or the peer said nothing.
        for peer_image in ({"image_id": DST, "os_hash_value": "other"},
                           {"image_id": DST}, {"image_id": None,
                                               "os_hash_value": "h1"},
                           None):
            self.assertIsNone(catalog.record(
                self.db, outgoing(peer_image=peer_image)))
        self.assertEqual([], self.db.upserts)

    def test_not_complete(self):
        for state in ("failed", "cancelled", "running"):
            self.assertIsNone(catalog.record(self.db, outgoing(state=state)))
            self.assertIsNone(catalog.record(self.db, incoming(state=state)))
        self.assertEqual([], self.db.upserts)


class TestCurrent(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.db = FakeDB()
        catalog.record(self.db, outgoing(), policy_id="pol")

    def test_same_hash(self):
        image = {"id": SRC, "os_hash_value": "h1"}
        self.assertEqual(DST, catalog.current(self.db, POLICY, image)
                         ["replica_image_id"])

    def test_changed_image(self):
        self.assertIsNone(catalog.current(
            self.db, POLICY, {"id": SRC, "os_hash_value": "h2"}))

    def test_image_without_hash(self):
        self.assertIsNone(catalog.current(
            self.db, POLICY, {"id": SRC, "os_hash_value": None}))
        self.assertIsNone(catalog.current(self.db, POLICY, {"id": SRC}))

    def test_other_peer_or_image(self):
        self.assertIsNone(catalog.current(
            self.db, dict(POLICY, peer="dtn-c"),
            {"id": SRC, "os_hash_value": "h1"}))
        self.assertIsNone(catalog.current(
            self.db, POLICY, {"id": DST, "os_hash_value": "h1"}))

    def test_other_policy_or_project(self):
        # Another policy's replica, or a project's migration: not this
        # policy's.
        image = {"id": SRC, "os_hash_value": "h1"}
        self.assertIsNone(catalog.current(
            self.db, dict(POLICY, id="other"), image))
        db = FakeDB()
        catalog.record(db, outgoing())
        self.assertIsNone(catalog.current(db, POLICY, image))

    def test_deleted_replica(self):
        self.db.replicas[("outgoing", "dtn-b", SRC, owned("pol"))][
            "state"] = "deleted"
        self.assertIsNone(catalog.current(
            self.db, POLICY, {"id": SRC, "os_hash_value": "h1"}))

    def test_incoming_replica_is_not_outgoing(self):
        db = FakeDB()
        catalog.record(db, incoming(peer="dtn-b"), owner="p1",
                       policy_id="pol")
        self.assertIsNone(catalog.current(
            db, POLICY, {"id": SRC, "os_hash_value": "h1"}))

    def test_a_replica_is_never_sent_back(self):
        # DST here is the replica of dtn-b's SRC: dtn-b holds its bytes.
        db = FakeDB()
        catalog.record(db, incoming(peer="dtn-b"), owner="p1")
        self.assertEqual(SRC, catalog.current(
            db, POLICY, {"id": DST, "os_hash_value": "h1"})
            ["source_image_id"])
        # Changed since, or to another peer: it is sent.
        self.assertIsNone(catalog.current(
            db, POLICY, {"id": DST, "os_hash_value": "h2"}))
        self.assertIsNone(catalog.current(
            db, dict(POLICY, peer="dtn-c"),
            {"id": DST, "os_hash_value": "h1"}))
