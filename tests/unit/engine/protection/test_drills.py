"""dtn_migrate.engine.protection.drills: the replicas of a policy
checked where they are, on a real SQLite database with a fake Glance.
"""

import hashlib
import json
import os
import shutil
import subprocess
import threading
import time
import types
import uuid

import fixtures
from oslo_concurrency import processutils
from oslo_utils import timeutils
import testtools

from dtn_migrate.db import api
from dtn_migrate.engine.protection import drills
from dtn_migrate.engine.protection import replicas
from dtn_migrate import exception
from tests.unit.engine import fakes
from tests.unit.engine.protection import test_sync as base
from tests.unit import utils as test_utils
from tests.unit import testcase

QEMU_IMG = shutil.which("qemu-img")
PEER = "dtn-a"          # the protected cloud, seen from the replicas'


class FakeImages(fakes.FakeImages):
    """The replicas' Glance: upload answers the image like
    ImageService.upload; deletes and created fields are recorded.
    """

    def __init__(self):
        super().__init__("b")
        self.created = []
        self.deleted = []
        self.upload_error = None
        self.upload_changes = {}
        self.delete_error = None
        self.download_error = None

    def create(self, kwargs):
        self.created.append(dict(kwargs))
        return super().create(kwargs)

    def upload(self, image_id, open_stream, size):
        if self.upload_error is not None:
            raise self.upload_error
        super().upload(image_id, open_stream, size)
        self.images[image_id].update(self.upload_changes)
        return self.get(image_id)

    def download(self, image_id, offset=0, stop=None):
        for i, chunk in enumerate(super().download(image_id, offset, stop)):
            if self.download_error is not None and i == 1:
                raise self.download_error
            yield chunk

    def delete(self, image_id, unprotect=False):
        self.deleted.append(image_id)
        if self.delete_error is not None:
            raise self.delete_error
        super().delete(image_id, unprotect)


class FakeResources:
    def __init__(self):
        self.images = FakeImages()


class SyncThread:
    """threading.Thread whose start() only records the thread: the test
    runs it when it wants to.
    """
    started = []

    def __init__(self, target, args=(), name=None, daemon=None):
        self.target, self.args, self.name = target, args, name
        self.daemon = daemon

    def start(self):
        SyncThread.started.append(self)

    def run(self):
        self.target(*self.args)


#: drills.threading with threads that run when the test says so.
SYNC_THREADING = types.SimpleNamespace(Thread=SyncThread,
                                       Lock=threading.Lock)


class DrillTestCase(testcase.TestCase):
    def setUp(self):
        super().setUp()
        tmp = self.useFixture(fixtures.TempDir()).path
        shutil.copy(base.template(), "%s/db.sqlite" % tmp)
        self.conf = base.make_conf("sqlite:///%s/db.sqlite" % tmp)
        self.drill_dir = "%s/drills" % tmp
        self.conf.set_override("drill_dir", self.drill_dir, "protection")
        self.db = api.Database(self.conf)
        self.addCleanup(self.db.dispose)
        self.now = base.T0
        self.useFixture(fixtures.MockPatchObject(
            timeutils, "utcnow", side_effect=lambda *a, **k: self.now))
        self.res = FakeResources()
        self.glance = self.res.images
        self.notifier = base.FakeNotifier()
        self.drills = drills.Drills(self.conf, self.db, self.res,
                                    self.notifier)
        SyncThread.started = []
        self.useFixture(fixtures.MockPatchObject(
            drills, "threading", SYNC_THREADING))

    def left_in_drill_dir(self):
        """What a drill left in [protection] drill_dir (made only when
        a replica needs a file: qcow2 or a clone).
        """
        if not os.path.isdir(self.drill_dir):
            return []
        return os.listdir(self.drill_dir)

    def policy(self, project="p1", name="gold", role=replicas.ROLE,
               **values):
        row = dict(id=uuid.uuid4().hex, name=name, project_id=project,
                   peer=PEER, mode="manual", rpo_minutes=60,
                   selector={"tags": ["gold"]}, options={}, enabled=False,
                   role=role)
        row.update(values)
        return self.db.policy_create(row)

    def replica(self, policy, data=b"x" * 100000, direction="incoming",
                state="current", catalog=None, **fields):
        """A replica image in Glance and its catalog row."""
        image = self.glance.add(data, owner=policy["project_id"], **fields)
        values = {"replica_image_id": image["id"],
                  "project_id": policy["project_id"],
                  "image_name": image["name"], "size": len(data),
                  "hash_algo": "sha512",
                  "hash_value": hashlib.sha512(data).hexdigest(),
                  "migration_id": uuid.uuid4().hex,
                  "policy_id": policy["id"], "state": state,
                  "verified_at": base.T0}
        values.update(catalog or {})
        row = self.db.replica_upsert(direction, PEER, str(uuid.uuid4()),
                                     values)
        return image, row

    def drill_row(self, clone=False):
        return {"id": uuid.uuid4().hex, "clone": clone, "project_id": "p1"}

    def run_started(self):
        """Run the drill threads started so far."""
        threads, SyncThread.started = SyncThread.started, []
        for thread in threads:
            thread.run()
        return threads

    def qemu_img(self, result):
        """Patch qemu_img_verify: answers ``result``, records the data of
        the files it verifies.
        """
        seen = []

        def verify(path, limits):
            self.assertEqual(
                (1024 << 20, 60), (limits.address_space, limits.cpu_time))
            with open(path, "rb") as f:
                seen.append(f.read())
            return result
        self.useFixture(fixtures.MockPatchObject(
            drills, "qemu_img_verify", side_effect=verify))
        return seen


class TestStart(DrillTestCase):
    def test_running_record(self):
        policy = self.policy()
        self.replica(policy)
        self.replica(policy)
        record = self.drills.start(base.member(), policy["id"])
        self.assertEqual("running", record["state"])
        self.assertEqual(policy["id"], record["policy_id"])
        self.assertEqual("gold", record["policy_name"])
        self.assertEqual("p1", record["project_id"])
        self.assertFalse(record["clone"])
        self.assertEqual(2, record["images_total"])
        self.assertIsNone(record["images_intact"])
        self.assertIsNone(record["finished_at"])
        self.assertEqual(32, len(record["id"]))
        # Times as ISO 8601 strings, like every engine record.
        self.assertEqual(self.now.isoformat(timespec="microseconds"),
                         record["started_at"])
        self.assertIsInstance(record["created_at"], str)
        self.assertEqual("running",
                         self.db.drill_get(record["id"])["state"])
        # The checks run in a thread of their own.
        [thread] = SyncThread.started
        self.assertTrue(thread.daemon)
        self.assertEqual("drill-%s" % record["id"][:8], thread.name)
        self.assertEqual([], self.notifier.sent)

    def test_clone(self):
        policy = self.policy()
        self.replica(policy)
        record = self.drills.start(base.member(), policy["id"], clone=True)
        self.assertTrue(record["clone"])
        self.assertTrue(self.db.drill_get(record["id"])["clone"])

    def test_clone_must_be_a_bool(self):
        policy = self.policy()
        self.replica(policy)
        for bad in ("yes", 1, None, "true"):
            exc = self.assertRaises(exception.InvalidInput,
                                    self.drills.start, base.member(),
                                    policy["id"], bad)
            self.assertIn("clone", str(exc))
        self.assertEqual([], self.db.drill_get_all())
        self.assertEqual([], SyncThread.started)

    def test_unknown_or_another_projects_policy(self):
        policy = self.policy()
        self.replica(policy)
        for ctx, policy_id in ((base.member("p2"), policy["id"]),
                               (base.member(), uuid.uuid4().hex),
                               (base.member(), "x" * 65),
                               (base.member(), None),
                               (base.member(), 5)):
            exc = self.assertRaises(exception.ProtectionPolicyNotFound,
                                    self.drills.start, ctx, policy_id)
            self.assertEqual(404, exc.code)
        self.assertEqual([], self.db.drill_get_all())
        # An admin drills any project's policy; the drill is the
        # policy's project's.
        record = self.drills.start(base.admin(), policy["id"])
        self.assertEqual("p1", record["project_id"])

    def test_policy_without_incoming_replicas(self):
        # A primary policy: its replicas are on the peer, in the
        # outgoing catalog here.
        policy = self.policy(role="primary", mode="continuous",
                             enabled=True)
        self.replica(policy, direction="outgoing")
        exc = self.assertRaises(exception.ProtectionPolicyConflict,
                                self.drills.start, base.member(),
                                policy["id"])
        self.assertEqual(409, exc.code)
        self.assertIn("without replicas", str(exc))
        self.assertIn("drill", str(exc))
        # Replicas deleted, or none at all: nothing to drill either.
        other = self.policy(name="silver")
        self.replica(other, state="deleted")
        self.assertRaises(exception.ProtectionPolicyConflict,
                          self.drills.start, base.member(), other["id"])
        self.assertEqual([], self.db.drill_get_all())

    def test_one_running_drill_per_policy(self):
        policy, other = self.policy(), self.policy(name="silver")
        for p in (policy, other):
            self.replica(p)
        first = self.drills.start(base.member(), policy["id"])
        for clone in (False, True):
            exc = self.assertRaises(exception.Conflict,
                                    self.drills.start, base.admin(),
                                    policy["id"], clone)
            self.assertEqual(409, exc.code)
            # It says which drill runs.
            self.assertIn("its drill %s runs (started at %s)" % (
                first["id"], first["started_at"]), str(exc))
        self.assertEqual([first["id"]],
                         [d["id"] for d in self.db.drill_get_all()])
        self.assertEqual(1, len(SyncThread.started))
        # Another policy's drill runs meanwhile; once the first drill
        # ended, the policy is drilled again.
        self.drills.start(base.member(), other["id"])
        self.run_started()
        self.drills.start(base.member(), policy["id"])

    def test_running_drills_are_capped(self):
        self.conf.set_override("max_running_drills", 2, "protection")
        policies = [self.policy(name="p%d" % i) for i in range(3)]
        for p in policies:
            self.replica(p)
        for p in policies[:2]:
            self.drills.start(base.member(), p["id"])
        exc = self.assertRaises(exception.Conflict, self.drills.start,
                                base.admin(), policies[2]["id"])
        self.assertEqual(409, exc.code)
        self.assertIn("2 drills run on this cloud, the most [protection] "
                      "max_running_drills allows", str(exc))
        self.assertEqual(2, len(self.db.drill_get_all()))
        self.run_started()
        self.drills.start(base.member(), policies[2]["id"])

    def test_concurrent_starts_of_one_policy(self):
        # Two requests at the same time: one drill.
        policy = self.policy()
        self.replica(policy)
        real = self.db.drill_create

        def slow_create(values):
            time.sleep(0.2)         # both have counted the running ones
            return real(values)
        self.useFixture(fixtures.MockPatchObject(
            self.db, "drill_create", side_effect=slow_create))
        outcomes = []

        def start():
            try:
                outcomes.append(self.drills.start(base.member(),
                                                  policy["id"])["id"])
            except exception.Conflict as exc:
                outcomes.append(exc)
        threads = [threading.Thread(target=start) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(1, len(self.db.drill_get_all()))
        self.assertEqual(1, len([o for o in outcomes
                                 if isinstance(o, exception.Conflict)]))

    def test_only_the_policys_current_incoming_replicas(self):
        policy = self.policy()
        other = self.policy(name="silver")
        mine, _row = self.replica(policy)
        self.replica(policy, state="deleted")
        self.replica(policy, direction="outgoing")
        self.replica(other)
        record = self.drills.start(base.member(), policy["id"])
        self.assertEqual(1, record["images_total"])
        self.run_started()
        report = self.db.drill_get(record["id"])["report"]
        self.assertEqual([mine["id"]],
                         [i["replica_image_id"] for i in report["images"]])


class TestRun(DrillTestCase):
    def start(self, policy, clone=False):
        record = self.drills.start(base.member(), policy["id"], clone)
        self.run_started()
        return self.db.drill_get(record["id"])

    def test_passed(self):
        policy = self.policy()
        first, row = self.replica(policy, name="web")
        self.replica(policy, name="db")
        drill = self.start(policy)
        self.assertEqual("passed", drill["state"])
        self.assertEqual((2, 2, 0), (drill["images_total"],
                                     drill["images_intact"],
                                     drill["images_bad"]))
        self.assertIsInstance(drill["rto_seconds"], float)
        self.assertGreaterEqual(drill["rto_seconds"], 0)
        self.assertEqual(self.now, drill["finished_at"])
        self.assertIsNone(drill["error"])
        images = {i["image_name"]: i for i in drill["report"]["images"]}
        self.assertEqual({"web", "db"}, set(images))
        web = images["web"]
        self.assertEqual(row["source_image_id"], web["source_image_id"])
        self.assertEqual(first["id"], web["replica_image_id"])
        self.assertEqual("intact", web["status"])
        self.assertIsNone(web["error"])
        self.assertEqual({"present": True, "size": True, "hash": True,
                          "qemu_img": None, "clone": None}, web["checks"])
        # The report is JSON (it went through the database).
        self.assertEqual(drill["report"],
                         json.loads(json.dumps(drill["report"])))

    def test_notification(self):
        policy = self.policy()
        self.replica(policy)
        drill = self.start(policy)
        [(priority, event, payload)] = self.notifier.sent
        self.assertEqual(("info", "dtn_migrate.drill.end"),
                         (priority, event))
        self.assertEqual(drill["id"], payload["id"])
        self.assertEqual(policy["id"], payload["policy_id"])
        self.assertEqual("passed", payload["state"])
        self.assertEqual(1, payload["images_intact"])
        self.assertNotIn("report", payload)
        # Times as ISO strings: a notification payload is JSON.
        self.assertEqual(self.now.isoformat(timespec="microseconds"),
                         payload["finished_at"])
        json.dumps(payload)

    def test_rto_seconds(self):
        policy = self.policy()
        self.replica(policy)
        ticks = iter(range(100))
        self.useFixture(fixtures.MockPatchObject(
            drills, "time", types.SimpleNamespace(
                monotonic=lambda: float(next(ticks)) * 1.5)))
        drill = self.start(policy)
        # The run began at 0, its replica took 1.5 s (1.5 to 3.0) and
        # the run ended at 4.5.
        self.assertEqual(4.5, drill["rto_seconds"])
        self.assertEqual(1.5, drill["report"]["images"][0]["seconds"])

    def test_failed(self):
        policy = self.policy()
        self.replica(policy, name="ok")
        gone, _row = self.replica(policy, name="gone")
        del self.glance.images[gone["id"]]
        drill = self.start(policy)
        self.assertEqual("failed", drill["state"])
        self.assertEqual((2, 1, 1), (drill["images_total"],
                                     drill["images_intact"],
                                     drill["images_bad"]))
        self.assertIsNotNone(drill["rto_seconds"])
        self.assertEqual({"ok": "intact", "gone": "missing"},
                         {i["image_name"]: i["status"]
                          for i in drill["report"]["images"]})
        self.assertEqual("failed", self.notifier.sent[-1][2]["state"])

    def test_unexpected_error_of_one_image_is_its_outcome(self):
        policy = self.policy()
        self.replica(policy)
        self.useFixture(fixtures.MockPatchObject(
            self.glance, "get", side_effect=RuntimeError("glance client "
                                                         "broke")))
        drill = self.start(policy)
        self.assertEqual(("failed", 0, 1), (
            drill["state"], drill["images_intact"], drill["images_bad"]))
        [image] = drill["report"]["images"]
        self.assertEqual("invalid", image["status"])
        self.assertIn("glance client broke", image["error"])

    def test_error_when_the_drill_cannot_run(self):
        policy = self.policy()
        self.replica(policy)
        self.useFixture(fixtures.MockPatchObject(
            self.drills, "check", side_effect=RuntimeError("glance client "
                                                           "broke")))
        drill = self.start(policy)
        self.assertEqual("error", drill["state"])
        self.assertIn("glance client broke", drill["error"])
        self.assertEqual(self.now, drill["finished_at"])
        self.assertIsNone(drill["images_intact"])
        self.assertEqual({}, drill["report"])
        [(_p, event, payload)] = self.notifier.sent
        self.assertEqual("dtn_migrate.drill.end", event)
        self.assertEqual("error", payload["state"])

    def test_outcome_not_saved(self):
        policy = self.policy()
        self.replica(policy)
        record = self.drills.start(base.member(), policy["id"])
        self.useFixture(fixtures.MockPatchObject(
            self.db, "drill_update",
            side_effect=exception.DatabaseUnavailable(reason="away")))
        self.run_started()          # logged, not raised
        self.assertEqual([], self.notifier.sent)
        self.assertEqual("running", self.db.drill_get(record["id"])["state"])

    def test_notifier_failure_or_none(self):
        policy = self.policy()
        self.replica(policy)

        def broken(*args):
            raise RuntimeError("bus away")
        self.notifier.info = broken
        self.assertEqual("passed", self.start(policy)["state"])
        self.drills = drills.Drills(self.conf, self.db, self.res)
        self.assertEqual("passed", self.start(policy)["state"])

    def test_in_a_real_thread(self):
        self.useFixture(fixtures.MockPatchObject(drills, "threading",
                                                 threading))
        policy = self.policy()
        self.replica(policy)
        record = self.drills.start(base.member(), policy["id"])
        for _ in range(500):
            drill = self.db.drill_get(record["id"])
            if drill["state"] != "running":
                break
            time.sleep(0.01)
        self.assertEqual("passed", drill["state"])


class TestRecover(DrillTestCase):
    def test_drills_left_running_end_in_error(self):
        # An engine that stopped during a drill left it running: its
        # waiters (drill start --wait) would wait for ever.
        policy = self.policy()
        self.replica(policy)
        left = self.drills.start(base.member(), policy["id"])
        SyncThread.started = []         # the engine stopped: never run
        done = self.db.drill_create({
            "id": uuid.uuid4().hex, "policy_id": policy["id"],
            "project_id": "p1", "state": "passed"})
        self.drills.recover()
        row = self.db.drill_get(left["id"])
        self.assertEqual("error", row["state"])
        self.assertIn("engine stopped", row["error"])
        self.assertEqual(self.now, row["finished_at"])
        self.assertEqual("passed", self.db.drill_get(done["id"])["state"])


class FakeJobs:
    """The shared jobboard's part a drill uses (engine.jobs.Jobs)."""

    def __init__(self, answers=True):
        self.answers = answers
        self.posted = []

    def post_drill(self, drill_id):
        if not self.answers:
            return None
        self.posted.append(drill_id)
        return object()


class TestAsJobs(DrillTestCase):
    """With engines that share a jobboard, a drill is a job (issue 39):
    before, it ran in a thread of the engine asked, and a drill whose
    engine died was never run again (nor recovered: another engine may
    run it).
    """

    def test_a_drill_is_posted_not_run_here(self):
        self.drills.jobs = FakeJobs()
        policy = self.policy()
        self.replica(policy)
        record = self.drills.start(base.member(), policy["id"])
        self.assertEqual([record["id"]], self.drills.jobs.posted)
        self.assertEqual([], SyncThread.started)
        self.assertEqual([record["id"]], self.drills.running())

    def test_a_board_that_does_not_answer_runs_it_here(self):
        self.drills.jobs = FakeJobs(answers=False)
        policy = self.policy()
        self.replica(policy)
        self.drills.start(base.member(), policy["id"])
        self.assertEqual(1, len(SyncThread.started))

    def test_the_engine_that_claims_it_runs_it_from_its_start(self):
        self.drills.jobs = FakeJobs()
        policy = self.policy()
        self.replica(policy)
        self.replica(policy)
        record = self.drills.start(base.member(), policy["id"])
        # Claimed twice (its first engine died during it): each runs it.
        for _ in range(2):
            self.db.drill_update(record["id"], {"state": "running"})
            self.drills.run_claimed(record["id"])
            row = self.db.drill_get(record["id"])
            self.assertEqual(("passed", 2), (row["state"],
                                             row["images_intact"]))
        # An ended drill's job runs nothing.
        self.notifier.sent.clear()
        self.drills.run_claimed(record["id"])
        self.assertEqual([], self.notifier.sent)
        # Nor one that is gone.
        self.drills.run_claimed(uuid.uuid4().hex)

    def test_a_drill_whose_policy_is_gone_ends_in_error(self):
        self.drills.jobs = FakeJobs()
        policy = self.policy()
        self.replica(policy)
        record = self.drills.start(base.member(), policy["id"])
        self.db.drill_update(record["id"], {"policy_id": "gone"})
        self.drills.run_claimed(record["id"])
        row = self.db.drill_get(record["id"])
        self.assertEqual("error", row["state"])
        self.assertIn("gone", row["error"])


class TestCheck(DrillTestCase):
    def check(self, image, row, clone=False, drill=None):
        drill = drill or self.drill_row(clone)
        return self.drills.check(row, drill)

    def test_intact(self):
        policy = self.policy()
        image, row = self.replica(policy, name="web")
        out = self.check(image, row)
        self.assertEqual("intact", out["status"])
        self.assertEqual({"present": True, "size": True, "hash": True,
                          "qemu_img": None, "clone": None}, out["checks"])
        self.assertEqual((row["source_image_id"], image["id"], "web"),
                         (out["source_image_id"], out["replica_image_id"],
                          out["image_name"]))
        self.assertIsNone(out["error"])
        self.assertIsInstance(out["seconds"], float)
        # The downloaded copy does not outlive the check.
        self.assertEqual([], self.left_in_drill_dir())

    def test_missing(self):
        policy = self.policy()
        image, row = self.replica(policy)
        del self.glance.images[image["id"]]
        out = self.check(image, row)
        self.assertEqual("missing", out["status"])
        self.assertFalse(out["checks"]["present"])
        self.assertIsNone(out["checks"]["size"])
        self.assertIn("not in Glance", out["error"])

    def test_not_active(self):
        policy = self.policy()
        for status in ("deactivated", "queued", "killed"):
            image, row = self.replica(policy, status=status)
            out = self.check(image, row)
            self.assertEqual("invalid", out["status"])
            self.assertFalse(out["checks"]["present"])
            self.assertIsNone(out["checks"]["hash"])
            self.assertIn(status, out["error"])
        self.assertEqual(0, self.glance.downloaded)

    def test_size_mismatch(self):
        policy = self.policy()
        image, row = self.replica(policy, catalog={"size": 99})
        out = self.check(image, row)
        self.assertEqual("corrupt", out["status"])
        self.assertEqual({"present": True, "size": False, "hash": None,
                          "qemu_img": None, "clone": None}, out["checks"])
        self.assertIn("99", out["error"])
        self.assertEqual(0, self.glance.downloaded)

    def test_hash_mismatch(self):
        policy = self.policy()
        image, row = self.replica(policy)
        # The bytes Glance serves changed under the same size.
        self.glance.data[image["id"]] = b"y" * 100000
        out = self.check(image, row)
        self.assertEqual("corrupt", out["status"])
        self.assertFalse(out["checks"]["hash"])
        self.assertTrue(out["checks"]["size"])
        self.assertIn("sha512", out["error"])
        self.assertEqual([], self.left_in_drill_dir())

    def test_short_data(self):
        # Glance says the right size but serves fewer bytes.
        policy = self.policy()
        image, row = self.replica(policy)
        self.glance.data[image["id"]] = b"x" * 10
        out = self.check(image, row)
        self.assertEqual("corrupt", out["status"])
        self.assertFalse(out["checks"]["hash"])
        self.assertIn("10 bytes", out["error"])

    def test_download_fails(self):
        policy = self.policy()
        image, row = self.replica(policy, data=os.urandom(200000))
        self.glance.download_error = exception.ImageServiceUnavailable(
            cloud="b", reason="HTTP 503")
        out = self.check(image, row)
        self.assertEqual("invalid", out["status"])
        self.assertIn("HTTP 503", out["error"])
        self.assertTrue(out["checks"]["present"])
        self.assertIsNone(out["checks"]["hash"])
        self.assertEqual([], self.left_in_drill_dir())

    def test_qcow2_check_fails(self):
        policy = self.policy()
        data = os.urandom(1000)
        image, row = self.replica(policy, data=data, disk_format="qcow2")
        seen = self.qemu_img(("corrupt", "qemu-img check failed (exit 2): "
                                         "3 corruptions, 0 check errors"))
        out = self.check(image, row)
        self.assertEqual("corrupt", out["status"])
        self.assertFalse(out["checks"]["qemu_img"])
        self.assertTrue(out["checks"]["hash"])
        self.assertIn("3 corruptions", out["error"])
        # It checked the whole downloaded copy.
        self.assertEqual([data], seen)

    def test_qcow2_check_passes(self):
        policy = self.policy()
        image, row = self.replica(policy, disk_format="qcow2")
        seen = self.qemu_img(("intact", None))
        out = self.check(image, row)
        self.assertEqual("intact", out["status"])
        self.assertTrue(out["checks"]["qemu_img"])
        self.assertEqual(1, len(seen))

    def test_qcow2_without_qemu_img(self):
        policy = self.policy()
        image, row = self.replica(policy, disk_format="qcow2")
        self.qemu_img((None, "qemu-img is not installed"))
        out = self.check(image, row)
        self.assertEqual("intact", out["status"])
        self.assertIsNone(out["checks"]["qemu_img"])

    def test_raw_is_not_checked_with_qemu_img(self):
        policy = self.policy()
        image, row = self.replica(policy, disk_format="raw")
        seen = self.qemu_img(("corrupt", "never"))
        self.assertEqual("intact", self.check(image, row)["status"])
        self.assertEqual([], seen)

    def test_default_directory(self):
        self.conf.clear_override("drill_dir", "protection")
        policy = self.policy()
        image, row = self.replica(policy)
        self.assertEqual("intact", self.check(image, row)["status"])


class TestClone(DrillTestCase):
    def test_clone_ok(self):
        policy = self.policy()
        data = os.urandom(70000)
        image, row = self.replica(policy, data=data, name="web",
                                  disk_format="qcow2",
                                  container_format="bare")
        self.qemu_img(("intact", None))
        drill = self.drill_row(clone=True)
        out = self.drills.check(row, drill)
        self.assertEqual("intact", out["status"], out["error"])
        self.assertTrue(out["checks"]["clone"])
        [fields] = self.glance.created
        self.assertEqual(
            {"name": "drill-%s-web" % drill["id"][:8],
             "disk_format": "qcow2", "container_format": "bare",
             "visibility": "private", "os_hidden": True, "owner": "p1"},
            fields)
        # The clone is removed; the replica stays.
        self.assertEqual(1, len(self.glance.deleted))
        self.assertNotIn(self.glance.deleted[0], self.glance.images)
        self.assertNotEqual(image["id"], self.glance.deleted[0])
        self.assertEqual({image["id"]}, set(self.glance.images))
        self.assertEqual(data, self.glance.data[image["id"]])

    def test_clone_in_the_drill_project(self):
        self.conf.set_override("drill_project", "drills", "protection")
        policy = self.policy()
        image, row = self.replica(policy)
        out = self.drills.check(row, self.drill_row(clone=True))
        self.assertTrue(out["checks"]["clone"])
        self.assertEqual("drills", self.glance.created[0]["owner"])

    def test_clone_removed_when_the_upload_fails(self):
        policy = self.policy()
        image, row = self.replica(policy)
        self.glance.upload_error = exception.ImageServiceUnavailable(
            cloud="b", reason="no space in the store")
        out = self.drills.check(row, self.drill_row(clone=True))
        self.assertEqual("invalid", out["status"])
        self.assertIn("no space", out["error"])
        self.assertEqual(1, len(self.glance.deleted))
        self.assertEqual({image["id"]}, set(self.glance.images))

    def test_clone_removed_when_the_upload_breaks_unexpectedly(self):
        policy = self.policy()
        image, row = self.replica(policy)
        self.glance.upload_error = IOError("connection reset")
        out = self.drills.check(row, self.drill_row(clone=True))
        self.assertEqual("invalid", out["status"])
        self.assertIn("connection reset", out["error"])
        self.assertEqual(1, len(self.glance.deleted))
        self.assertEqual({image["id"]}, set(self.glance.images))

    def test_clone_not_usable(self):
        policy = self.policy()
        image, row = self.replica(policy)
        for changes in ({"status": "killed"},
                        {"os_hash_value": "other"}):
            self.glance.upload_changes = changes
            out = self.drills.check(row, self.drill_row(clone=True))
            self.assertEqual("invalid", out["status"])
            self.assertFalse(out["checks"]["clone"])
            self.assertIn("the clone is", out["error"])
        self.assertEqual(2, len(self.glance.deleted))
        self.assertEqual({image["id"]}, set(self.glance.images))

    def test_clone_not_removed_is_logged(self):
        policy = self.policy()
        image, row = self.replica(policy)
        self.glance.delete_error = exception.ImageServiceUnavailable(
            cloud="b", reason="down")
        log = self.useFixture(fixtures.FakeLogger())
        out = self.drills.check(row, self.drill_row(clone=True))
        self.assertEqual("intact", out["status"])
        self.assertIn("not removed", log.output)

    def test_clone_refused(self):
        policy = self.policy()
        image, row = self.replica(policy)
        self.useFixture(fixtures.MockPatchObject(
            self.glance, "create",
            side_effect=exception.ImageServiceUnavailable(
                cloud="b", reason="over quota")))
        out = self.drills.check(row, self.drill_row(clone=True))
        self.assertEqual("invalid", out["status"])
        self.assertIsNone(out["checks"]["clone"])
        self.assertIn("over quota", out["error"])
        self.assertEqual([], self.glance.deleted)

    def test_no_clone_for_a_bad_replica(self):
        policy = self.policy()
        image, row = self.replica(policy)
        self.glance.data[image["id"]] = b"y" * 100000
        out = self.drills.check(row, self.drill_row(clone=True))
        self.assertEqual("corrupt", out["status"])
        self.assertIsNone(out["checks"]["clone"])
        self.assertEqual([], self.glance.created)

    def test_drill_with_clone(self):
        policy = self.policy()
        self.replica(policy)
        self.replica(policy)
        record = self.drills.start(base.member(), policy["id"], True)
        self.run_started()
        drill = self.db.drill_get(record["id"])
        self.assertEqual("passed", drill["state"])
        self.assertEqual([True, True], [i["checks"]["clone"]
                                        for i in drill["report"]["images"]])
        self.assertEqual(2, len(self.glance.deleted))
        self.assertEqual(2, len(self.glance.images))


@testtools.skipUnless(QEMU_IMG, "qemu-img is not installed")
class TestQemuImg(DrillTestCase):
    """The real qemu-img on real qcow2 files, as a peer could craft
    them.
    """

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path

    @property
    def limits(self):
        return drills.qemu_img_limits(self.conf)

    def qemu_img(self, *args):
        subprocess.run([QEMU_IMG] + list(args), check=True,
                       capture_output=True, cwd=self.dir)

    def make_qcow2(self, name="disk.qcow2", *options):
        path = os.path.join(self.dir, name)
        self.qemu_img("create", "-q", "-f", "qcow2", *options, path, "16M")
        return path

    def with_backing_file(self):
        self.qemu_img("create", "-q", "-f", "raw", "base.raw", "1M")
        return self.make_qcow2("back.qcow2", "-b", "base.raw", "-F", "raw")

    def with_data_file(self, name="ext.qcow2", data="data.raw"):
        return self.make_qcow2(name, "-o", "data_file=%s" % data)

    def test_real_qcow2(self):
        self.assertEqual(("intact", None),
                         drills.qemu_img_verify(self.make_qcow2(),
                                                self.limits))

    def test_random_bytes_claimed_as_qcow2(self):
        path = os.path.join(self.dir, "noise")
        with open(path, "wb") as f:
            f.write(os.urandom(65536))
        status, detail = drills.qemu_img_verify(path, self.limits)
        self.assertEqual("corrupt", status)
        self.assertIn("qemu-img info failed", detail)

    def test_backing_file_is_refused(self):
        status, detail = drills.qemu_img_verify(self.with_backing_file(),
                                                self.limits)
        self.assertEqual("invalid", status)
        self.assertIn("refused: it names a backing file (base.raw)", detail)

    def test_external_data_file_is_refused(self):
        status, detail = drills.qemu_img_verify(self.with_data_file(),
                                                self.limits)
        self.assertEqual("invalid", status)
        self.assertIn("refused: it names an external data file (data.raw)",
                      detail)
        # One it names that is not there (or is a host file): refused
        # all the same, and qemu-img never opens it.
        path = self.with_data_file("gone.qcow2", "gone.raw")
        os.unlink(os.path.join(self.dir, "gone.raw"))
        self.assertEqual("invalid", drills.qemu_img_verify(
            path, self.limits)[0])

    def test_check_never_runs_on_a_refused_image(self):
        paths = [self.with_backing_file(), self.with_data_file()]
        run = self.useFixture(fixtures.MockPatchObject(
            drills.subprocess, "run", wraps=subprocess.run)).mock
        for path in paths:
            drills.qemu_img_verify(path, self.limits)
        commands = [c.args[0] for c in run.call_args_list]
        self.assertEqual(["info", "info"],
                         [c[c.index("--") + 2] for c in commands])

    def test_under_limits_and_force_share(self):
        # Too little address space for qemu-img to start: stopped, and
        # said so.
        limits = processutils.ProcessLimits(address_space=16 << 20,
                                            cpu_time=5)
        status, detail = drills.qemu_img_verify(self.make_qcow2(), limits)
        self.assertEqual("corrupt", status)
        self.assertIn("qemu-img info", detail)
        # Another process writing the image holds its write lock, on
        # which qemu-img without --force-share fails: the drill reads
        # it all the same (preallocated, its metadata does not move).
        path = self.make_qcow2("held.qcow2", "-o", "preallocation=metadata")
        holder = subprocess.Popen(
            [QEMU_IMG, "bench", "-w", "-q", "-c", "100000000", "-f",
             "qcow2", path], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        self.addCleanup(holder.wait)
        self.addCleanup(holder.kill)
        # (No probe before the writer holds the image: a probe's own
        # shared lock would make the writer fail to start.)
        test_utils.wait_until(lambda: holder.poll() is not None or path in [
            os.path.realpath("/proc/%d/fd/%s" % (holder.pid, fd))
            for fd in os.listdir("/proc/%d/fd" % holder.pid)],
            timeout=60)
        time.sleep(0.5)
        self.assertIsNone(holder.poll())
        locked = subprocess.run([QEMU_IMG, "info", "-f", "qcow2", path],
                                capture_output=True, text=True)
        self.assertIn('Failed to get shared "write" lock', locked.stderr)
        self.assertEqual(("intact", None),
                         drills.qemu_img_verify(path, self.limits))

    def test_drill_of_real_images(self):
        images = {}
        for name, path in (("good", self.make_qcow2()),
                           ("backed", self.with_backing_file()),
                           ("external", self.with_data_file())):
            with open(path, "rb") as f:
                images[name] = f.read()
        policy = self.policy()
        for name, data in images.items():
            self.replica(policy, data=data, name=name, disk_format="qcow2")
        self.replica(policy, data=os.urandom(65536), name="noise",
                     disk_format="qcow2")
        record = self.drills.start(base.member(), policy["id"])
        self.run_started()
        drill = self.db.drill_get(record["id"])
        self.assertEqual("failed", drill["state"])
        images = {i["image_name"]: i for i in drill["report"]["images"]}
        self.assertEqual("intact", images["good"]["status"])
        self.assertTrue(images["good"]["checks"]["qemu_img"])
        # Its catalog hash matches (the bytes are what arrived), but
        # they are no qcow2 disk.
        self.assertEqual("corrupt", images["noise"]["status"])
        self.assertTrue(images["noise"]["checks"]["hash"])
        self.assertFalse(images["noise"]["checks"]["qemu_img"])
        self.assertIn("qemu-img info failed", images["noise"]["error"])
        for name, what in (("backed", "a backing file"),
                           ("external", "an external data file")):
            self.assertEqual("invalid", images[name]["status"])
            self.assertFalse(images[name]["checks"]["qemu_img"])
            self.assertIn("names %s" % what, images[name]["error"])
        self.assertEqual([], self.left_in_drill_dir())


class TestQemuImgCommands(testcase.TestCase):
    """The commands qemu_img_verify runs, and its answers for their
    outcomes.
    """

    LIMITS = processutils.ProcessLimits(address_space=1 << 30, cpu_time=60)

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.MockPatchObject(
            drills.shutil, "which", return_value="/usr/bin/qemu-img"))

    def run_gives(self, *results, **kwargs):
        kwargs.setdefault("side_effect", list(results))
        return self.useFixture(fixtures.MockPatchObject(
            drills.subprocess, "run", **kwargs)).mock

    def done(self, code=0, out="{}", err=""):
        return subprocess.CompletedProcess([], code, out, err)

    def test_commands(self):
        run = self.run_gives(self.done(), self.done())
        self.assertEqual(("intact", None),
                         drills.qemu_img_verify("/x", self.LIMITS))
        prlimit = [drills.sys.executable, "-m", "oslo_concurrency.prlimit",
                   "--as=%d" % (1 << 30), "--cpu=60", "--",
                   "/usr/bin/qemu-img"]
        self.assertEqual(
            [prlimit + ["info", "--output=json", "-f", "qcow2",
                        "--force-share", "/x"],
             prlimit + ["check", "-f", "qcow2", "--output", "json",
                        "--force-share", "/x"]],
            [c.args[0] for c in run.call_args_list])
        self.assertEqual(drills.QEMU_IMG_TIMEOUT,
                         run.call_args.kwargs["timeout"])

    def test_limits_from_the_configuration(self):
        conf = base.make_conf("sqlite://")
        conf.set_override("qemu_img_address_space", 512, "protection")
        conf.set_override("qemu_img_cpu_time", 7, "protection")
        limits = drills.qemu_img_limits(conf)
        self.assertEqual(["--as=%d" % (512 << 20), "--cpu=7"],
                         limits.prlimit_args())

    def test_backing_or_data_file_is_never_checked(self):
        for info, what in (
                ({"backing-filename": "base"}, "a backing file (base)"),
                ({"full-backing-filename": "/etc/x"},
                 "a backing file (/etc/x)"),
                ({"data-file": "/dev/sda"}, "an external data file"),
                ({"format-specific": {"type": "qcow2", "data": {
                    "data-file": "json:{}"}}}, "an external data file")):
            run = self.run_gives(self.done(out=json.dumps(info)))
            status, detail = drills.qemu_img_verify("/x", self.LIMITS)
            self.assertEqual("invalid", status)
            self.assertIn(what, detail)
            self.assertEqual(1, run.call_count)

    def test_leaked_clusters_are_usable(self):
        self.run_gives(self.done(), self.done(3, json.dumps({"leaks": 4})))
        self.assertEqual(("intact", None),
                         drills.qemu_img_verify("/x", self.LIMITS))

    def test_corruptions(self):
        self.run_gives(self.done(), self.done(2, json.dumps(
            {"corruptions": 3, "check-errors": 1})))
        status, detail = drills.qemu_img_verify("/x", self.LIMITS)
        self.assertEqual("corrupt", status)
        self.assertIn("exit 2", detail)
        self.assertIn("3 corruptions, 1 check errors", detail)

    def test_not_readable(self):
        self.run_gives(self.done(1, "", "qemu-img: Could not open '/x': "
                                        "Image is not in qcow2 format\n" +
                                 "x" * 1000))
        status, detail = drills.qemu_img_verify("/x", self.LIMITS)
        self.assertEqual("corrupt", status)
        self.assertIn("not in qcow2 format", detail)
        self.assertLess(len(detail), 600)
        for out in ("[]", "nonsense"):
            self.run_gives(self.done(out=out))
            self.assertEqual(("corrupt", "qemu-img info answered no JSON "
                              "mapping"),
                             drills.qemu_img_verify("/x", self.LIMITS))

    def test_stopped_by_its_limits(self):
        self.run_gives(self.done(), self.done(-9, "", ""))
        status, detail = drills.qemu_img_verify("/x", self.LIMITS)
        self.assertEqual("corrupt", status)
        self.assertIn("qemu-img check was stopped by signal 9", detail)
        self.assertIn("qemu_img_cpu_time", detail)

    def test_not_installed(self):
        drills.shutil.which.return_value = None
        run = self.run_gives()
        self.assertEqual((None, "qemu-img is not installed"),
                         drills.qemu_img_verify("/x", self.LIMITS))
        self.assertFalse(run.called)

    def test_timeout(self):
        for results in ([subprocess.TimeoutExpired("qemu-img", 600)],
                        [self.done(),
                         subprocess.TimeoutExpired("qemu-img", 600)]):
            self.run_gives(*results)
            status, detail = drills.qemu_img_verify("/x", self.LIMITS)
            self.assertEqual("corrupt", status)
            self.assertIn("did not finish", detail)


class TestLearnedPolicy(base.ProtectionTestCase):
    """From an incoming migration of a policy to a drill of it: the
    replica policy the migration taught this cloud.
    """

    def test_drill_of_a_learnt_policy(self):
        glance = FakeImages()
        self.migrations.res.images = glance
        data = os.urandom(5000)
        local = glance.add(data, owner="p7", name="web")
        policy_id = uuid.uuid4().hex
        self.migrations.records["in"] = {
            "migration_id": "in", "direction": "incoming", "peer": PEER,
            "image_id": local["id"], "source_image_id": "src",
            "image_name": "web", "size": len(data),
            "os_hash_value": local["os_hash_value"], "state": "running",
            "protection": {"policy_id": policy_id, "name": "gold",
                           "rpo_minutes": 15,
                           "selector": {"tags": ["gold"]}}}
        self.migrations.finish("in", peer_image=None)
        res = FakeResources()
        res.images = glance
        self.useFixture(fixtures.MockPatchObject(
            drills, "threading", SYNC_THREADING))
        SyncThread.started = []
        runner = drills.Drills(self.conf, self.db, res, self.notifier)
        # The replicas' project drills it by the source's policy id.
        record = runner.start(base.member("p7"), policy_id)
        self.assertEqual("gold", record["policy_name"])
        self.assertEqual("p7", record["project_id"])
        for thread in SyncThread.started:
            thread.run()
        drill = self.db.drill_get(record["id"])
        self.assertEqual("passed", drill["state"])
        self.assertEqual(["src"], [i["source_image_id"]
                                   for i in drill["report"]["images"]])
        self.assertRaises(exception.ProtectionPolicyNotFound, runner.start,
                          base.member("p1"), policy_id)
