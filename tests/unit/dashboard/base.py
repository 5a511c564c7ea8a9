"""Test base and data of the dashboard unit tests."""

import copy

from openstack_dashboard.test import helpers

from dtn_migrate.dashboard import api

ENDPOINT = "http://dtn.example.com:8779"
SERVICE = {
    "type": "dtn-migration",
    "name": "dtn-migrate",
    "endpoints_links": [],
    "endpoints": [
        {"region": "RegionOne", "interface": interface, "url": ENDPOINT}
        for interface in ("admin", "internal", "public")],
}

MIGRATIONS = [
    {"id": "m-run", "request_id": "r1", "image_id": "img-1",
     "image_name": "cirros", "peer": "cloud-b", "direction": "outgoing",
     "state": "running", "stage": "transfer", "mode": "pipelined",
     "attempt": 1, "size": 10 * 1024 * 1024, "progress": 0.4237,
     "rate": 8 * 1024 * 1024, "eta": 75.0, "error": None,
     "peer_image_id": None, "peer_image_hash": None,
     "os_hash_value": "abc", "project_id": "1", "user_id": "1",
     "bytes": {"export": 10485760, "transfer": 4443000, "import": 0},
     "created_at": "2026-11-25T06:00:00.000000Z",
     "updated_at": "2026-11-25T06:00:05.000000Z",
     "started_at": "2026-11-25T06:00:01.000000Z", "finished_at": None},
    {"id": "m-done", "request_id": "r2", "image_id": "img-2",
     "image_name": "fedora", "peer": "cloud-b", "direction": "outgoing",
     "state": "complete", "stage": "import", "mode": "serial",
     "attempt": 1, "size": 2048, "progress": 1.0, "rate": None,
     "eta": None, "error": None, "peer_image_id": "peer-2",
     "peer_image_hash": "deadbeef", "os_hash_value": "deadbeef",
     "project_id": "1", "user_id": "1",
     "bytes": {"export": 2048, "transfer": 2048, "import": 2048},
     "created_at": "2026-11-25T05:00:00.000000Z",
     "updated_at": "2026-11-25T05:01:00.000000Z",
     "started_at": "2026-11-25T05:00:01.000000Z",
     "finished_at": "2026-11-25T05:01:00.000000Z"},
    {"id": "m-fail", "request_id": "r3", "image_id": "img-3",
     "image_name": None, "peer": "cloud-c", "direction": "outgoing",
     "state": "failed", "stage": "transfer", "mode": "pipelined",
     "attempt": 2, "size": None, "progress": 0.1, "rate": None,
     "eta": None, "error": "peer unreachable", "peer_image_id": None,
     "peer_image_hash": None, "os_hash_value": None,
     "project_id": "1", "user_id": "1",
     "bytes": {"export": 0, "transfer": 0, "import": 0},
     "created_at": "2026-11-25T04:00:00.000000Z",
     "updated_at": "2026-11-25T04:01:00.000000Z",
     "started_at": None, "finished_at": "2026-11-25T04:01:00.000000Z"},
]

EVENTS = [
    {"stage": None, "event": "queued", "message": None, "bytes": None,
     "created_at": "2026-11-25T05:00:00.000000Z"},
    {"stage": "export", "event": "started", "message": None, "bytes": 0,
     "created_at": "2026-11-25T05:00:01.000000Z"},
    {"stage": "export", "event": "finished", "message": None,
     "bytes": 2048, "created_at": "2026-11-25T05:00:11.000000Z"},
    {"stage": "transfer", "event": "started", "message": None,
     "bytes": 0, "created_at": "2026-11-25T05:00:02.000000Z"},
    {"stage": "transfer", "event": "finished", "message": None,
     "bytes": 2048, "created_at": "2026-11-25T05:00:30.000000Z"},
    {"stage": None, "event": "finished", "message": "verified",
     "bytes": None, "created_at": "2026-11-25T05:01:00.000000Z"},
]

PEERS = [
    {"name": "cloud-b", "address": "192.0.2.2", "port": 9000,
     "reachable": True, "rtt_ms": 1.25, "last_throughput": 8388608.0,
     "last_transfer_at": "2026-11-25T05:01:00.000000Z",
     "checked_at": "2026-11-25T06:00:00.000000Z", "error": None},
    {"name": "cloud-c", "address": "192.0.2.3", "port": 9000,
     "reachable": False, "rtt_ms": None, "last_throughput": None,
     "last_transfer_at": None, "checked_at": None,
     "error": "connection refused"},
]

SELECTOR = {"tags": ["dr-gold"], "properties": {}, "visibility": [],
            "name_pattern": None, "projects": []}
OPTIONS = {"keep_id": False, "target_project": None, "deletion": "keep",
           "deletion_grace_minutes": 60}
POLICIES = [
    {"id": "p-ok", "name": "gold", "description": "the gold images",
     "project_id": "1", "user_id": "1", "peer": "cloud-b",
     "mode": "manual", "schedule": None, "enabled": True,
     "role": "primary", "selector": SELECTOR, "options": OPTIONS,
     "rpo": {"target_minutes": 30, "state": "ok", "seconds": 0.0,
             "checked_at": "2026-11-25T06:00:00.000000Z"},
     "images": {"pending": 0, "syncing": 0, "replicated": 2, "failed": 0,
                "removed": 0},
     "last_sync_at": "2026-11-25T05:59:00.000000Z", "last_error": None,
     "created_at": "2026-11-25T05:00:00.000000Z",
     "updated_at": "2026-11-25T06:00:00.000000Z"},
    {"id": "p-bad", "name": "silver", "description": None,
     "project_id": "1", "user_id": "1", "peer": "cloud-c",
     "mode": "continuous", "schedule": None, "enabled": True,
     "role": "primary",
     "selector": dict(SELECTOR, tags=[], properties={"tier": "silver"}),
     "options": OPTIONS,
     "rpo": {"target_minutes": 60, "state": "breached", "seconds": 5400.0,
             "checked_at": "2026-11-25T06:00:00.000000Z"},
     "images": {"pending": 1, "syncing": 0, "replicated": 0, "failed": 1,
                "removed": 0},
     "last_sync_at": None, "last_error": "peer unreachable",
     "created_at": "2026-11-25T04:00:00.000000Z",
     "updated_at": "2026-11-25T06:00:00.000000Z"},
    {"id": "p-rep", "name": "gold", "description": None,
     "project_id": "1", "user_id": None, "peer": "cloud-a",
     "mode": "manual", "schedule": None, "enabled": False,
     "role": "replica", "selector": SELECTOR, "options": OPTIONS,
     "rpo": {"target_minutes": 60, "state": None, "seconds": None,
             "checked_at": None},
     "images": {"pending": 0, "syncing": 0, "replicated": 0, "failed": 0,
                "removed": 0},
     "last_sync_at": None, "last_error": None,
     "created_at": "2026-11-25T03:00:00.000000Z",
     "updated_at": "2026-11-25T03:00:00.000000Z"},
]

POLICY_IMAGES = [
    {"image_id": "img-1", "image_name": "cirros", "project_id": "1",
     "state": "replicated", "os_hash_value": "abc", "size": 2048,
     "changed_at": None, "replicated_at": "2026-11-25T05:59:30.000000Z",
     "migration_id": "m-done", "error": None,
     "updated_at": "2026-11-25T05:59:30.000000Z"},
    {"image_id": "img-3", "image_name": None, "project_id": "1",
     "state": "failed", "os_hash_value": None, "size": None,
     "changed_at": "2026-11-25T04:30:00.000000Z", "replicated_at": None,
     "migration_id": None, "error": "peer unreachable",
     "updated_at": "2026-11-25T05:00:00.000000Z"},
]

DRILLS = [
    {"id": "d-run", "policy_id": "p-rep", "policy_name": "gold",
     "project_id": "1", "state": "running", "clone": False,
     "images_total": None, "images_intact": None, "images_bad": None,
     "rto_seconds": None, "error": None,
     "started_at": "2026-11-25T06:10:00.000000Z", "finished_at": None,
     "created_at": "2026-11-25T06:10:00.000000Z",
     "updated_at": "2026-11-25T06:10:00.000000Z"},
    {"id": "d-pass", "policy_id": "p-rep", "policy_name": "gold",
     "project_id": "1", "state": "passed", "clone": True,
     "images_total": 2, "images_intact": 2, "images_bad": 0,
     "rto_seconds": 75.0, "error": None,
     "started_at": "2026-11-25T06:00:00.000000Z",
     "finished_at": "2026-11-25T06:01:15.000000Z",
     "created_at": "2026-11-25T06:00:00.000000Z",
     "updated_at": "2026-11-25T06:01:15.000000Z"},
]


def migrations(*ids):
    """Migration wrappers of the test data (all, or those ``ids``)."""
    found = [m for m in MIGRATIONS if not ids or m["id"] in ids]
    return [api.Migration(copy.deepcopy(m)) for m in found]


def migration(mid, **changes):
    data = copy.deepcopy(next(m for m in MIGRATIONS if m["id"] == mid))
    data.update(changes)
    if mid == "m-done":
        data.setdefault("events", copy.deepcopy(EVENTS))
    data.setdefault("events", [])
    return api.Migration(data)


def peers():
    return [api.Peer(copy.deepcopy(p)) for p in PEERS]


def policies(*ids):
    """Policy wrappers of the test data (all, or those ``ids``)."""
    found = [p for p in POLICIES if not ids or p["id"] in ids]
    return [api.Policy(copy.deepcopy(p)) for p in found]


def policy(pid, **changes):
    data = copy.deepcopy(next(p for p in POLICIES if p["id"] == pid))
    data.update(changes)
    return api.Policy(data)


def policy_images():
    return [api.PolicyImage(copy.deepcopy(i)) for i in POLICY_IMAGES]


def drills(*ids):
    found = [d for d in DRILLS if not ids or d["id"] in ids]
    return [api.Drill(copy.deepcopy(d)) for d in found]


class DashboardMixin(object):
    """The test user's catalog has the dtn-migration service."""

    with_service = True

    def _setup_test_data(self):
        super()._setup_test_data()
        if self.with_service:
            self.service_catalog.append(copy.deepcopy(SERVICE))


class TestCase(DashboardMixin, helpers.TestCase):
    pass


class AdminTestCase(DashboardMixin, helpers.BaseAdminViewTests):
    pass
