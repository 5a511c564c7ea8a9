"""The migration tasks one by one, against fakes."""

import hashlib
import io
import json
import logging
import os
import shutil
import tempfile
import threading
import time
import types
from unittest import mock

import fixtures
import oslo_messaging as messaging
from taskflow import retry
from taskflow.types import failure

from dtn_migrate.engine import events
from dtn_migrate.engine.flows import incoming as incoming_flow
from dtn_migrate.engine import resources
from dtn_migrate.engine.tasks import incoming
from dtn_migrate.engine.tasks import outgoing
from dtn_migrate import exception
from dtn_migrate.image import marker
from dtn_migrate.staging import backend as staging_backend
from dtn_migrate.staging import copy
from dtn_migrate.staging import copycommon
from dtn_migrate.staging import localfs
from dtn_migrate.staging import watermark
from dtn_migrate.common import polling
from tests.unit.engine import fakes
from tests.unit import testcase

MID = "1" * 32
TID = "2" * 32
HASH = "ab" * 64


def make_res(agent=None, images=None, backend=None, **engine):
    """Resources on a plain namespace configuration."""
    opts = dict(agent_host="dtn-a", poll_interval=0.01,
                event_fallback_interval=0.5, progress_interval=0.05,
                stall_timeout=0.3, rpc_timeout=1)
    opts.update(engine)
    conf = types.SimpleNamespace(
        engine=types.SimpleNamespace(**opts),
        staging=types.SimpleNamespace(watermark_suffix=".wm",
                                      free_space_margin="10%",
                                      export_sha512="auto"))
    return resources.Resources(conf, images, agent or mock.Mock(), backend)


def incoming_payload(**image):
    desc = {"id": "src", "size": 3, "os_hash_value": HASH}
    desc.update(image)
    return {"transfer_id": TID, "attempt": 1, "image": desc,
            "options": {"verify": True}}


class TestImportRetry(testcase.TestCase):
    def decide(self, exc):
        history = retry.History([(1, {"upload-image":
                                      failure.Failure.from_exception(exc)})])
        r = incoming_flow.ImportRetry(3, name="r")
        return r.on_failure(history)

    def test_final_failures_are_not_retried(self):
        for exc in (exception.ImageHashMismatch(),
                    exception.MetadataMismatch(image_id="i", differences="x"),
                    exception.InvalidInput(reason="bad"),
                    staging_backend.ChecksumMismatch("bad sha512"),
                    exception.MigrationCancelled(migration_id=MID)):
            self.assertEqual(retry.REVERT, self.decide(exc), exc)

    def test_transient_failures_are_retried(self):
        for exc in (IOError("reset"),
                    exception.ImageServiceUnavailable(cloud="b", reason="x"),
                    exception.MigrationFailed(migration_id=MID, reason="x")):
            self.assertEqual(retry.RETRY, self.decide(exc), exc)

    def test_retry_waits_longer_each_time(self):
        slept = []
        # Its own sleep: a patched time.sleep would count other threads'.
        r = incoming_flow.ImportRetry(3, 0.5, sleep=slept.append, name="r")
        for n in (1, 2, 3):
            history = retry.History([(i, {"upload-image": failure.Failure.
                                          from_exception(IOError("reset"))})
                                     for i in range(n)])
            decision = r.on_failure(history)
            self.assertEqual(retry.RETRY if n < 3 else retry.REVERT,
                             decision)
        self.assertEqual([0.5, 1.0], slept)

    def test_each_failed_attempt_is_logged_with_its_cause(self):
        log = self.useFixture(fixtures.FakeLogger(level=logging.WARNING))
        r = incoming_flow.ImportRetry(3, 0.5, sleep=mock.Mock(), name="r")
        cause = exception.ImageServiceUnavailable(cloud="b", reason="HTTP 500")
        for n in (1, 3):
            history = retry.History([(i, {"create-image": failure.Failure.
                                          from_exception(cause)})
                                     for i in range(n)])
            r.on_failure(history, migration_id=MID)
        self.assertEqual(
            ["import %s: attempt 1 of 3 failed: create-image: %s; again "
             "in 0.5 s" % (MID, cause),
             "import %s: attempt 3 of 3 failed: create-image: %s; no "
             "attempt left" % (MID, cause)], log.output.splitlines())
        self.assertEqual(retry.REVERT, self.decide(exception.InvalidInput(
            reason="bad")))
        self.assertIn("attempt 1 failed for good: upload-image: "
                      "Invalid input: bad", log.output)


class TestCreateImageRevert(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.images = fakes.FakeImages("b")
        self.task = incoming.CreateImage(make_res(images=self.images))
        self.incoming = incoming_payload()

    def add(self, **fields):
        fields.setdefault("status", "active")
        fields.setdefault("os_hash_value", HASH)
        return fakes.add_imported(self.images, self.task.res.seal_key(),
                                  TID, "west", **fields)["id"]

    def revert(self, failed_at):
        fail = failure.Failure.from_exception(RuntimeError("boom"))
        self.task.revert(MID, TID, self.incoming, result=None,
                         flow_failures={failed_at: fail}, peer="west")

    def test_failure_after_verification_keeps_the_image(self):
        verified = self.add()
        broken = self.add(status="saving", os_hash_value=None)
        self.revert("report-import")
        self.assertEqual([verified], list(self.images.images))
        self.assertNotIn(broken, self.images.images)

    def test_failed_import_deletes_every_image(self):
        self.add()
        self.add(status="saving", os_hash_value=None)
        self.revert("verify-image")
        self.assertEqual({}, self.images.images)

    def test_wrong_data_is_deleted_even_late(self):
        self.add(os_hash_value="cd" * 64)
        self.revert("report-import")
        self.assertEqual({}, self.images.images)


class TestPlantedMarkers(testcase.TestCase):
    """Images that a Glance user marked with an import's transfer id:
    in another project, or in the import's own, the import never
    reuses, deletes nor unprotects them, and warns of each.
    """

    def setUp(self):
        super().setUp()
        self.log = self.useFixture(fixtures.FakeLogger(level=logging.INFO))
        self.images = fakes.FakeImages("b")
        self.res = make_res(images=self.images)
        self.incoming = incoming_payload()
        self.incoming["target"] = {"owner": "p1", "visibility": "private"}
        self.planted = [self.plant(owner="p2"),
                        self.plant(owner="p1"),
                        self.plant(owner="p1", status="queued"),
                        self.plant(owner="p1", status="killed")]

    def plant(self, **fields):
        fields.setdefault("protected", True)
        fields.setdefault("status", "active")
        fields["os_hash_value"] = HASH
        fields[marker.MARKER] = TID
        return self.images.add(b"abc", **fields)

    def assertUntouched(self):
        for image in self.planted:
            self.assertEqual(image, self.images.images.get(image["id"]))

    def test_create_makes_a_new_image(self):
        task = incoming.CreateImage(self.res)
        image_id = task.execute(MID, TID, self.incoming, "west")
        self.assertNotIn(image_id, [i["id"] for i in self.planted])
        self.assertEqual("p1", self.images.get(image_id)["owner"])
        self.assertUntouched()
        for image in self.planted[1:]:
            self.assertIn("image %s carries the marker of transfer %s"
                          % (image["id"], TID), self.log.output)

    def test_a_copied_seal_is_no_proof(self):
        """Both properties copied from a genuine image (which the
        project's members see) onto another: that one is not reused;
        the genuine one is.  Another peer's import of the same transfer
        id is not this one's either.
        """
        key = self.res.seal_key()
        real = fakes.add_imported(self.images, key, TID, "west", "p1",
                                  status="queued")
        copied = {k: real[k] for k in marker.PROPERTIES}
        self.planted.append(self.images.add(b"abc", owner="p1",
                                            status="queued", **copied))
        self.planted.append(fakes.add_imported(self.images, key, TID,
                                               "east", "p1"))
        task = incoming.CreateImage(self.res)
        self.assertEqual(real["id"],
                         task.execute(MID, TID, self.incoming, "west"))
        self.assertUntouched()

    def test_revert_deletes_none_of_them(self):
        task = incoming.CreateImage(self.res)
        image_id = task.execute(MID, TID, self.incoming, "west")
        fail = failure.Failure.from_exception(RuntimeError("boom"))
        task.revert(MID, TID, self.incoming, result=image_id,
                    flow_failures={"upload-image": fail}, peer="west")
        self.assertNotIn(image_id, self.images.images)
        self.assertUntouched()


class TestCreateImageTwice(testcase.TestCase):
    """A create that Glance's retries sent twice: the second gets 409
    for the id the import chose, and the first one's image is its own.
    """

    def setUp(self):
        super().setUp()
        self.images = fakes.FakeImages("b")
        self.task = incoming.CreateImage(make_res(images=self.images))
        self.incoming = incoming_payload()
        self.incoming["target"] = {"owner": "p1", "visibility": "private"}

    def test_the_first_create_is_taken(self):
        create = self.images.create

        def twice(kwargs):
            create(kwargs)
            return create(kwargs)

        with mock.patch.object(self.images, "create", side_effect=twice):
            image_id = self.task.execute(MID, TID, self.incoming, "west")
        self.assertEqual([image_id], list(self.images.images))

    def test_tags_the_first_create_lost_are_set(self):
        # Glance's first answer was a 500 after the image's row and before
        # its tags; the retried create gets 409 for that id.
        self.incoming["image"]["tags"] = ["dr-set", "gold"]
        create = self.images.create

        def lost_tags(kwargs):
            create(dict(kwargs, tags=[]))
            return create(kwargs)

        with mock.patch.object(self.images, "create", side_effect=lost_tags):
            image_id = self.task.execute(MID, TID, self.incoming, "west")
        self.assertEqual(["dr-set", "gold"],
                         self.images.images[image_id]["tags"])

    def test_a_kept_id_that_another_image_holds(self):
        self.incoming["options"]["keep_id"] = True
        squatter = self.images.add(b"abc", id="src", owner="p1",
                                   status="queued",
                                   **{marker.MARKER: TID})
        self.assertRaises(exception.Conflict, self.task.execute, MID, TID,
                          self.incoming, "west")
        self.assertEqual(squatter, self.images.images["src"])


class TestVerifyImage(testcase.TestCase):
    def test_duplicates_are_deleted(self):
        images = fakes.FakeImages("b")
        task = incoming.VerifyImage(make_res(images=images))
        key = task.res.seal_key()
        data = b"abc"
        keep = fakes.add_imported(images, key, TID, "west", data)
        fakes.add_imported(images, key, TID, "west", b"", status="queued",
                           size=None)
        other = fakes.add_imported(images, key, "3" * 32, "west", data)
        # Another peer's transfer of the same id: not this import's.
        elsewhere = fakes.add_imported(images, key, TID, "east", data)
        payload = incoming_payload(os_hash_value=keep["os_hash_value"])
        payload["options"]["verify"] = False
        result = task.execute(TID, payload, keep["id"], "west")
        self.assertEqual(keep["id"], result["image_id"])
        self.assertEqual({keep["id"], other["id"], elsewhere["id"]},
                         set(images.images))

    def test_metadata_difference_is_its_own_failure(self):
        images = fakes.FakeImages("b")
        image = images.add(b"abc", min_ram=1)
        payload = incoming_payload(os_hash_value=image["os_hash_value"],
                                   min_ram=2, disk_format="raw",
                                   container_format="bare")
        task = incoming.VerifyImage(make_res(images=images))
        self.assertRaises(exception.MetadataMismatch, task.execute, TID,
                          payload, image["id"], "west")


class TestReportImport(testcase.TestCase):
    def test_retried_until_the_agent_answers(self):
        agent = mock.Mock()
        agent.set_import_report.side_effect = [
            messaging.MessagingTimeout("t"), RuntimeError("down"), None]
        task = incoming.ReportImport(make_res(agent=agent,
                                              stall_timeout=5))
        task.execute(MID, TID, incoming_payload(),
                     {"image_id": "i", "os_hash_value": HASH})
        self.assertEqual(3, agent.set_import_report.call_count)
        report = agent.set_import_report.call_args[0][3]
        self.assertEqual(("active", 1), (report["state"],
                                         report["attempt"]))

    def test_gives_up_after_the_stall_timeout(self):
        agent = mock.Mock()
        agent.set_import_report.side_effect = RuntimeError("down")
        task = incoming.ReportImport(make_res(agent=agent))
        t0 = time.monotonic()
        self.assertRaises(RuntimeError, task.execute, MID, TID,
                          incoming_payload(), {"image_id": "i"})
        self.assertLess(time.monotonic() - t0, 2)
        self.assertGreater(agent.set_import_report.call_count, 1)


class TestReporter(testcase.TestCase):
    def test_posting_never_waits_for_the_agent(self):
        release = threading.Event()
        sent = []

        def slow(ctxt, host, tid, report):
            sent.append(report)
            release.wait(5)

        agent = mock.Mock()
        agent.set_import_report.side_effect = slow
        reporter = incoming.Reporter(make_res(agent=agent), MID, TID, 4)
        self.addCleanup(release.set)
        reporter.post("uploading", 0)
        for _ in range(100):
            if sent:
                break
            time.sleep(0.01)
        # The agent does not answer: posting goes on regardless.
        t0 = time.monotonic()
        for done in range(1, 100):
            reporter.post("uploading", done)
        self.assertLess(time.monotonic() - t0, 0.5)
        release.set()
        for _ in range(100):
            if len(sent) >= 2:
                break
            time.sleep(0.02)
        # The first report, then only the latest of the rest (and the
        # beats that repeat it).
        beat = sent[1].pop("beat")
        self.assertIsInstance(beat, float)
        self.assertEqual({"state": "uploading", "bytes": 99, "attempt": 4},
                         sent[1])
        reporter.close()
        time.sleep(0.1)
        count = len(sent)
        reporter.post("uploading", 100)
        time.sleep(0.2)
        self.assertEqual(count, len(sent))

    def test_a_new_state_is_sent_at_once(self):
        sent = []
        agent = mock.Mock()
        agent.set_import_report.side_effect = \
            lambda ctxt, host, tid, report: sent.append(report)
        # An interval far longer than the test: only a state change
        # may send the second report.
        reporter = incoming.Reporter(
            make_res(agent=agent, progress_interval=60), MID, TID, 1)
        self.addCleanup(reporter.close)
        reporter.post("waiting", 0)
        self.assertTrue(polling.poll(lambda: sent, 5))
        reporter.post("uploading", 5)
        self.assertTrue(polling.poll(lambda: len(sent) == 2, 5))
        self.assertEqual(["waiting", "uploading"],
                         [r["state"] for r in sent])
        self.assertEqual(5, sent[-1]["bytes"])


class TestWriteDescriptor(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.root = tempfile.mkdtemp(prefix="dtnm-tasks-")
        self.addCleanup(shutil.rmtree, self.root, True)
        self.backend = localfs.LocalBackend(self.root)
        self.task = outgoing.WriteDescriptor(make_res(backend=self.backend))
        self.path = os.path.join(self.root, TID, "image.json")

    def write(self, attempt, **image):
        desc = dict({"id": "img", "size": 3, "os_hash_value": HASH}, **image)
        self.task.execute(TID, desc, {"mode": "serial"}, attempt)
        with open(self.path) as f:
            return json.load(f), os.stat(self.path).st_ino

    def test_an_earlier_attempts_descriptor_stays(self):
        first, inode = self.write(1)
        self.assertEqual(1, first["attempt"])
        # A later attempt of the same request: the very same file, which
        # a transfer that attempt 1 defined can still be sent with.
        again, same = self.write(2)
        self.assertEqual((first, inode), (again, same))

    def test_a_changed_request_is_written(self):
        self.write(2)
        changed, _inode = self.write(2, size=4)
        self.assertEqual(4, changed["image"]["size"])
        # A later attempt's descriptor is not replaced by an earlier one.
        self.write(3, size=5)
        later, _inode = self.write(3, size=5)
        self.assertEqual(3, later["attempt"])
        self.assertFalse(outgoing._earlier_attempt(
            json.dumps(dict(later, attempt=4)), json.dumps(later)))
        self.assertFalse(outgoing._earlier_attempt(None, json.dumps(later)))
        self.assertFalse(outgoing._earlier_attempt(b"{x", json.dumps(later)))


class TestDescriptorPayload(testcase.TestCase):
    DESC = {"id": "img", "size": 3, "os_hash_value": HASH}
    OPTIONS = {"keep_id": True, "visibility": "private",
               "target_project": "p9", "verify": True, "mode": "serial",
               "force": True, "transfer_options": {"streams": 4},
               "protection": None}

    def test_without_protection(self):
        payload = outgoing.descriptor_payload(TID, self.DESC, self.OPTIONS,
                                              2)
        self.assertEqual(
            {"version": outgoing.DESCRIPTOR_VERSION, "transfer_id": TID,
             "attempt": 2, "image": self.DESC,
             "options": {"keep_id": True, "visibility": "private",
                         "target_project": "p9", "verify": True,
                         "mode": "serial"}}, payload)
        # An older request's options, without the key at all.
        self.assertNotIn("protection", outgoing.descriptor_payload(
            TID, self.DESC, {"mode": "serial"}, 1))

    def test_with_protection(self):
        served = {"policy_id": MID, "name": "gold", "rpo_minutes": 15,
                  "selector": {"tags": ["gold"]}}
        payload = outgoing.descriptor_payload(
            TID, self.DESC, dict(self.OPTIONS, protection=served), 1)
        self.assertEqual(served, payload["protection"])
        # Beside the options the peer applies, not among them.
        self.assertNotIn("protection", payload["options"])
        # The peer reads it back as it was sent.
        self.assertEqual(served, incoming._validate(
            json.loads(json.dumps(payload)), TID)["protection"])

    def test_the_source_project(self):
        payload = outgoing.descriptor_payload(TID, self.DESC, self.OPTIONS,
                                              1, "p-src")
        self.assertEqual("p-src", payload["source_project"])
        self.assertEqual("p-src", incoming._validate(
            json.loads(json.dumps(payload)), TID)["source_project"])
        # A migration of no project (the bus-only tools') names none.
        self.assertNotIn("source_project", outgoing.descriptor_payload(
            TID, self.DESC, self.OPTIONS, 1, None))

    def test_written_with_the_migrations_project(self):
        root = tempfile.mkdtemp(prefix="dtnm-tasks-")
        self.addCleanup(shutil.rmtree, root, True)
        task = outgoing.WriteDescriptor(make_res(
            backend=localfs.LocalBackend(root)))
        self.assertIn("project_id", task.optional)
        task.execute(TID, dict(self.DESC), {"mode": "serial"}, 1,
                     project_id="p-src")
        path = os.path.join(root, TID, "image.json")
        with open(path) as f:
            self.assertEqual("p-src", json.load(f)["source_project"])
        # The descriptor an older release staged for an earlier attempt
        # stays (its transfer was defined with that very file).
        old = outgoing.descriptor_payload(TID, dict(self.DESC),
                                          {"mode": "serial"}, 1)
        with open(path, "w") as f:
            json.dump(old, f, sort_keys=True)
        task.execute(TID, dict(self.DESC), {"mode": "serial"}, 2,
                     project_id="p-src")
        with open(path) as f:
            self.assertEqual(old, json.load(f))

    def test_written(self):
        root = tempfile.mkdtemp(prefix="dtnm-tasks-")
        self.addCleanup(shutil.rmtree, root, True)
        task = outgoing.WriteDescriptor(make_res(
            backend=localfs.LocalBackend(root)))
        served = {"policy_id": MID, "name": "gold", "rpo_minutes": None,
                  "selector": None}
        task.execute(TID, dict(self.DESC), {"mode": "serial",
                                            "protection": served}, 1)
        with open(os.path.join(root, TID, "image.json")) as f:
            self.assertEqual(served, json.load(f)["protection"])


class TestTransferImage(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.root = tempfile.mkdtemp(prefix="dtnm-tasks-")
        self.addCleanup(shutil.rmtree, self.root, True)
        self.backend = localfs.LocalBackend(self.root)
        self.agent = mock.Mock()
        self.res = make_res(agent=self.agent, backend=self.backend,
                            stall_timeout=5)
        self.task = outgoing.TransferImage(self.res)
        self.data = resources.staged_name(TID, resources.DATA)

    def execute(self):
        return self.task.execute(MID, TID, "b", {"size": 3,
                                                 "os_hash_value": HASH},
                                 {"mode": "pipelined"})

    def test_staging_failed_before_the_file_exists(self):
        def fail_staging():
            time.sleep(0.2)
            watermark.publish(self.backend, self.data, 0, True, ".wm")
        threading.Thread(target=fail_staging, daemon=True).start()
        t0 = time.monotonic()
        err = self.assertRaises(exception.StageFailed, self.execute)
        self.assertLess(time.monotonic() - t0, 2)
        self.assertIn("staging failed", str(err))
        self.agent.start_transfer.assert_not_called()

    def test_export_stage_failed_in_this_engine(self):
        # A failure left by an earlier attempt does not count by itself.
        watermark.publish(self.backend, self.data, 0, True, ".wm")
        self.res.live_for(MID).stage("export", state="running")

        def fail_staging():
            time.sleep(0.2)
            self.res.live_for(MID).stage("export", state="failed")
        threading.Thread(target=fail_staging, daemon=True).start()
        self.assertRaises(exception.StageFailed, self.execute)

    def test_nothing_happens(self):
        self.res.conf.engine.stall_timeout = 0.3
        err = self.assertRaises(exception.StageStalled, self.execute)
        self.assertIn("staging", str(err))

    def test_transient_rpc_errors_are_polled_through(self):
        self.backend.write_small(self.data, b"abc")
        self.agent.start_transfer.side_effect = [
            messaging.MessagingTimeout("t"),
            {"state": "running", "bytes_done": 0}]
        self.agent.get_transfer.side_effect = [
            messaging.MessagingTimeout("t"),
            messaging.MessageDeliveryFailure("broker restarts"),
            {"state": "running", "bytes_done": 1},
            {"state": "complete", "bytes_done": 3}]
        self.execute()
        self.assertEqual(4, self.agent.get_transfer.call_count)
        self.agent.cancel_transfer.assert_not_called()


class TestExportHash(testcase.TestCase):
    """The export hashes the image only when no sink checks the whole
    file against its sha512 further on; a mismatch the sink found makes
    the source engine check (and invalidate) its staged copy.
    """

    DATA = os.urandom(3 * 65536 + 5)

    def setUp(self):
        super().setUp()
        self.root = tempfile.mkdtemp(prefix="dtnm-tasks-")
        self.addCleanup(shutil.rmtree, self.root, True)
        self.backend = localfs.LocalBackend(self.root)
        self.images = mock.Mock()
        self.images.open_download.side_effect = \
            lambda image_id, offset, stop=None: io.BytesIO(
                self.DATA[offset:])
        self.agent = mock.Mock()
        self.res = make_res(agent=self.agent, images=self.images,
                            backend=self.backend, stall_timeout=5)
        self.res.copy_options = lambda: copycommon.CopyOptions(
            block_size=65536, watermark_suffix=".wm")
        self.data = resources.staged_name(TID, resources.DATA)
        self.desc = {"id": "src", "size": len(self.DATA),
                     "os_hash_value": hashlib.sha512(self.DATA).hexdigest()}

    def stage(self, options=None, mid=MID, **desc):
        task = outgoing.StageImage(self.res)
        with mock.patch.object(copy, "stage", wraps=copy.stage) as stage:
            task.execute(mid, TID, "src", dict(self.desc, **desc),
                         options or {"mode": "pipelined"})
        return stage.call_args[1]

    def test_not_hashed_when_the_sink_verifies(self):
        kwargs = self.stage(os_hash_value="0" * 128)
        self.assertEqual((False, None), (kwargs["digest"],
                                         kwargs["expected_sha512"]))
        with open(os.path.join(self.root, self.data), "rb") as f:
            self.assertEqual(self.DATA, f.read())

    def test_hashed_when_told_to(self):
        self.res.conf.staging.export_sha512 = "always"
        kwargs = self.stage()
        self.assertEqual((True, self.desc["os_hash_value"]),
                         (kwargs["digest"], kwargs["expected_sha512"]))
        err = self.assertRaises(exception.ImageHashMismatch, self.stage,
                                os_hash_value="0" * 128)
        self.assertIn("the exported data", str(err))

    def test_hashed_when_the_sink_does_not_verify(self):
        options = {"mode": "pipelined",
                   "transfer_options": {"verify_sha512": False}}
        self.assertTrue(self.stage(options)["digest"])
        self.assertRaises(exception.ImageHashMismatch, self.stage, options,
                          os_hash_value="0" * 128)

    def transfer_fails(self, staged, options=None):
        """The sink reports the data's sha512 wrong; ``staged`` is what
        the export holds.
        """
        self.backend.write_small(self.data, staged)
        watermark.publish(self.backend, self.data, len(staged), False,
                          ".wm")
        failed = {"state": "failed", "error": "1 of 2 files failed",
                  "files": [{"name": self.data, "state": "failed",
                             "code": "hash_mismatch"}]}
        self.agent.start_transfer.return_value = failed
        self.agent.resume_transfer.return_value = failed
        self.agent.get_transfer.return_value = failed
        task = outgoing.TransferImage(self.res)
        return self.assertRaises(
            exception.DtnMigrateException, task.execute, MID, TID, "b",
            self.desc, options or {"mode": "pipelined"})

    def test_a_wrong_staged_copy_is_invalidated(self):
        bad = bytearray(self.DATA)
        bad[70000] ^= 1
        err = self.transfer_fails(bytes(bad))
        self.assertIsInstance(err, exception.ImageHashMismatch)
        self.assertIn("the staged copy (invalidated", str(err))
        self.assertIn(hashlib.sha512(bad).hexdigest(), str(err))
        self.assertEqual((0, True), copy.status(self.backend, self.data,
                                                ".wm"))
        # The next attempt's export copies it again, whole, into the same
        # file.
        ino = os.stat(os.path.join(self.root, self.data)).st_ino
        self.stage(mid="3" * 32)
        path = os.path.join(self.root, self.data)
        self.assertEqual(ino, os.stat(path).st_ino)
        with open(path, "rb") as f:
            self.assertEqual(self.DATA, f.read())
        self.assertEqual((len(self.DATA), False),
                         copy.status(self.backend, self.data, ".wm"))

    def test_a_right_staged_copy_is_kept(self):
        err = self.transfer_fails(self.DATA)
        self.assertIsInstance(err, exception.MigrationFailed)
        self.assertIn("1 of 2 files failed", str(err))
        self.assertEqual((len(self.DATA), False),
                         copy.status(self.backend, self.data, ".wm"))

    def test_a_hashed_export_is_not_checked_again(self):
        self.res.conf.staging.export_sha512 = "always"
        with mock.patch.object(copy, "staged_sha512") as check:
            err = self.transfer_fails(b"x" * len(self.DATA))
        self.assertIsInstance(err, exception.MigrationFailed)
        check.assert_not_called()


class TestThisAttempt(testcase.TestCase):
    """An import attempt does not take the failure the sink kept from
    the transfer's last run of the file for its own.
    """

    def test_an_earlier_failure_reads_as_nothing_until_it_changes(self):
        left = {"state": "mismatch", "durable": 48, "error": "sha512"}
        answers = iter([left, dict(left), {"state": "receiving",
                                           "durable": 0},
                        {"state": "receiving", "durable": 8},
                        {"state": "mismatch", "durable": 48,
                         "error": "sha512"}])
        info = incoming._this_attempt(lambda: next(answers))
        self.assertIsNone(info())
        self.assertEqual("receiving", info()["state"])
        self.assertEqual(8, info()["durable"])
        # The same failure again, now this attempt's own.
        self.assertEqual("mismatch", info()["state"])

    def test_a_failure_that_comes_later_is_this_attempt_s(self):
        answers = iter([None, {"state": "failed", "durable": 0}])
        info = incoming._this_attempt(lambda: next(answers))
        self.assertEqual("failed", info()["state"])

    def test_nothing_stale(self):
        answers = iter([{"state": "receiving", "durable": 1},
                        {"state": "receiving", "durable": 2}])
        info = incoming._this_attempt(lambda: next(answers))
        self.assertEqual(2, info()["durable"])


class TestAwaitPeerImport(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.agent = mock.Mock()
        self.res = make_res(agent=self.agent)
        self.task = outgoing.AwaitPeerImport(self.res)

    def execute(self, attempt=2):
        return self.task.execute(MID, TID, "b", {"size": 3,
                                                 "os_hash_value": HASH},
                                 attempt)

    def test_an_unchanging_report_stalls(self):
        self.agent.get_peer_report.return_value = {
            "state": "uploading", "bytes": 1, "attempt": 2}
        t0 = time.monotonic()
        self.assertRaises(exception.StageStalled, self.execute)
        self.assertLess(time.monotonic() - t0, 3)

    def test_asks_for_its_attempt_and_ignores_older_ones(self):
        self.agent.get_peer_report.side_effect = [
            messaging.MessagingTimeout("t"),
            {"state": "failed", "attempt": 1, "error": "old"},
            {"state": "active", "attempt": 2, "os_hash_value": HASH,
             "image_id": "i"}]
        result = self.execute()
        self.assertEqual("i", result["image_id"])
        for call in self.agent.get_peer_report.call_args_list:
            self.assertEqual(2, call[1]["attempt"])

    def test_a_retry_shows_none_of_the_last_attempt_s_bytes(self):
        # The peer's agent lets attempt 1's progress stand for attempt 2
        # (of_attempt 1): before, the retry's import showed its bytes.
        live = self.res.live_for(MID)
        seen = []
        reports = iter([
            {"state": "uploading", "bytes": 2, "attempt": 2,
             "of_attempt": 1},
            {"state": "uploading", "bytes": 1, "attempt": 2},
            {"state": "active", "attempt": 2, "of_attempt": 1,
             "os_hash_value": HASH, "image_id": "i"}])

        def report(*args, **kwargs):
            seen.append(dict(live.snapshot().get("import") or {}))
            return next(reports)

        self.agent.get_peer_report.side_effect = report
        self.assertEqual("i", self.execute()["image_id"])
        self.assertEqual([None, None, 1],
                         [st.get("done") for st in seen])
        self.assertEqual(3, live.snapshot()["import"]["done"])

    def test_a_failed_transfer_ends_the_wait(self):
        self.agent.get_peer_report.return_value = None
        self.res.live_for(MID).stage("transfer", state="failed")
        self.assertRaises(exception.StageFailed, self.execute)

    def failed_import(self, transfer):
        """The peer reports its import failed; this side's export is
        complete and its transfer ``transfer``.
        """
        self.agent.get_peer_report.return_value = {
            "state": "failed", "attempt": 2,
            "error": "the received data has the wrong sha512"}
        self.res.conf.engine.stall_timeout = 30
        live = self.res.live_for(MID)
        live.stage("export", state="complete")
        live.stage("transfer", state=transfer)
        return live

    def test_a_failed_import_leaves_a_running_transfer_to_explain(self):
        # Bad bytes fail the peer's import and the transfer at once; the
        # import's report came first.  The transfer's failure (which
        # checks the staged copy) is the one to report: the import
        # stage ends as StageFailed, not with the import's error.
        live = self.failed_import("running")
        threading.Timer(0.5, live.stage, ("transfer",),
                        {"state": "failed"}).start()
        t0 = time.monotonic()
        self.assertRaises(exception.StageFailed, self.execute)
        self.assertLess(time.monotonic() - t0,
                        outgoing.IMPORT_FAILURE_GRACE)
        self.assertFalse(live.stop.is_set())

    def test_a_failed_import_fails_at_once_after_the_transfer(self):
        self.failed_import("complete")
        t0 = time.monotonic()
        err = self.assertRaises(exception.MigrationFailed, self.execute)
        self.assertLess(time.monotonic() - t0, 1)
        self.assertIn("import at b failed: the received data", str(err))

    def test_a_failed_import_waits_for_a_transfer_only_so_long(self):
        self.failed_import("running")
        with mock.patch.object(outgoing, "IMPORT_FAILURE_GRACE", 0.3):
            t0 = time.monotonic()
            err = self.assertRaises(exception.MigrationFailed, self.execute)
        self.assertGreaterEqual(time.monotonic() - t0, 0.3)
        self.assertIn("import at b failed", str(err))


class TestPeerSilence(testcase.TestCase):
    """While the peer's engine is down its reports stop beating: the
    migration says since when the peer does not answer, and when it
    answers again (before: running, frozen numbers, no word).
    """

    def test_a_peer_that_stops_beating_is_not_answering(self):
        agent = mock.Mock()
        res = make_res(agent=agent, progress_interval=0.05,
                       event_fallback_interval=0.5, stall_timeout=30)
        self.assertEqual(0.65, round(outgoing.silence_limit(res.conf), 2))
        t0 = time.monotonic()

        def report(*args, **kwargs):
            t = time.monotonic() - t0
            if t > 2.2:
                return {"state": "active", "attempt": 2,
                        "os_hash_value": HASH, "image_id": "i"}
            # Its engine is down from 0.3 s to 1.6 s: the last report
            # stays.
            beat = t if t < 0.3 or t > 1.6 else 0.3
            return {"state": "uploading", "bytes": 1, "attempt": 2,
                    "beat": round(beat, 2)}

        agent.get_peer_report.side_effect = report
        live = res.live_for(MID)
        seen = []
        live.on_peer = lambda since: seen.append(
            (since, time.monotonic() - t0))
        before = time.time()
        result = outgoing.AwaitPeerImport(res).execute(
            MID, TID, "b", {"size": 3, "os_hash_value": HASH}, 2)
        self.assertEqual("i", result["image_id"])
        self.assertEqual(2, len(seen), seen)
        (since, lost), (back, found) = seen
        # Lost once the last beat is older than the limit; since then.
        # That beat is the last report before 0.3 s: one poll (0.05 s)
        # earlier at most (a CI run saw 0.948 s against 0.95).
        self.assertGreater(lost, 0.3 - 0.06 + 0.65)
        self.assertLess(lost, 1.6)
        self.assertGreater(since, before + 0.2)
        self.assertLess(since, before + 0.5)
        self.assertIsNone(back)
        self.assertGreater(found, 1.6)
        self.assertIsNone(live.peer_silent_since)

    def test_a_peer_without_beats_is_not_watched(self):
        live = resources.Live()
        seen = []
        live.on_peer = seen.append
        clock = [0.0]
        silence = outgoing.PeerSilence(live, 1.0, clock=lambda: clock[0])
        for t in range(5):
            clock[0] = float(t)
            silence.see({"state": "uploading", "bytes": 1, "attempt": 1})
        self.assertEqual([], seen)


class TestPushedEvents(testcase.TestCase):
    """Stages wait on what the agent pushes, and ask the agent only when
    nothing came for event_fallback_interval (or always, every poll
    interval, when the agent pushes nothing).
    """

    def setUp(self):
        super().setUp()
        self.agent = mock.Mock()
        self.agent.ping.return_value = {"pushes": ["watermark", "transfer",
                                                   "report"]}
        self.res = make_res(agent=self.agent, stall_timeout=30,
                            poll_interval=0.05, event_fallback_interval=60)
        self.board = self.res.events

    def push_later(self, seconds, key, value):
        t = threading.Timer(seconds, self.board.post, (key, value))
        t.start()
        self.addCleanup(t.cancel)

    def test_peer_import_follows_pushed_reports(self):
        self.agent.get_peer_report.return_value = None
        key = events.key(events.REPORT, TID)
        self.push_later(0.3, key, {"state": "uploading", "bytes": 1,
                                   "attempt": 2})
        self.push_later(0.6, key, {"state": "active", "attempt": 2,
                                   "os_hash_value": HASH, "image_id": "i"})
        task = outgoing.AwaitPeerImport(self.res)
        result = task.execute(MID, TID, "b", {"size": 3,
                                              "os_hash_value": HASH}, 2)
        self.assertEqual("i", result["image_id"])
        # Asked once (which opens the agent's channel), then pushed.
        self.assertEqual(1, self.agent.get_peer_report.call_count)

    def test_transfer_follows_pushed_status(self):
        key = events.key(events.TRANSFER, TID)
        self.agent.start_transfer.return_value = {"state": "running",
                                                  "bytes_done": 0}
        done = threading.Event()

        def get_transfer(*args):
            state = "complete" if done.is_set() else "running"
            return {"state": state, "bytes_done": 3 if done.is_set() else 0}

        def complete():
            done.set()
            self.board.post(key, {"state": "complete", "bytes_done": 3})

        self.agent.get_transfer.side_effect = get_transfer
        self.push_later(0.3, key, {"state": "running", "bytes_done": 2})
        t = threading.Timer(0.5, complete)
        t.start()
        self.addCleanup(t.cancel)
        task = outgoing.TransferImage(self.res)
        t0 = time.monotonic()
        task.execute(MID, TID, "b", {"size": 3, "os_hash_value": HASH},
                     {"mode": "serial"})
        # Woken by the push (the fallback is 60 s); the agent asked at
        # most for a first value and to confirm the end.
        self.assertLess(time.monotonic() - t0, 5)
        self.assertLessEqual(self.agent.get_transfer.call_count, 2)

    def test_a_stale_pushed_end_is_checked_with_the_agent(self):
        key = events.key(events.TRANSFER, TID)
        # An earlier run's failure, still on the board.
        self.board.post(key, {"state": "failed", "error": "old"})
        self.agent.start_transfer.return_value = {"state": "running",
                                                  "bytes_done": 0}
        done = threading.Event()

        def get_transfer(*args):
            if done.is_set():
                return {"state": "complete", "bytes_done": 3}
            return {"state": "running", "bytes_done": 1}

        def complete():
            done.set()
            self.board.post(key, {"state": "complete", "bytes_done": 3})

        self.agent.get_transfer.side_effect = get_transfer
        t = threading.Timer(0.5, complete)
        t.start()
        self.addCleanup(t.cancel)
        task = outgoing.TransferImage(self.res)
        task.execute(MID, TID, "b", {"size": 3, "os_hash_value": HASH},
                     {"mode": "serial"})
        # Asked once about the stale end (not again each poll: the
        # answer replaced it), once to confirm the real one.
        self.assertEqual(2, self.agent.get_transfer.call_count)

    def test_watermark_is_asked_again_when_no_event_comes(self):
        res = make_res(agent=self.agent, event_fallback_interval=0.2,
                       poll_interval=0.05)
        name = "x/image.data"
        self.agent.get_watermark.side_effect = [
            {"durable": 1, "state": "receiving"},
            {"durable": 3, "state": "done"}]
        self.assertEqual(1, incoming.incoming_file(res, TID, name, 3)
                         ["durable"])
        # Fresh: not asked again.
        self.assertEqual(1, incoming.incoming_file(res, TID, name, 3)
                         ["durable"])
        self.assertEqual(1, self.agent.get_watermark.call_count)
        time.sleep(0.25)
        self.assertEqual("done", incoming.incoming_file(res, TID, name, 3)
                         ["state"])
        self.assertEqual(2, self.agent.get_watermark.call_count)

    def test_a_pushed_failure_is_checked_with_the_agent(self):
        name = "x/image.data"
        self.res.events.post(events.key(events.WATERMARK, TID, name),
                             {"state": "failed", "durable": 0})
        self.agent.get_watermark.return_value = {"state": "open",
                                                 "durable": 2}
        self.assertEqual("open", incoming.incoming_file(self.res, TID, name,
                                                        3)["state"])
        # The answer replaced it: not asked again while it is fresh.
        incoming.incoming_file(self.res, TID, name, 3)
        self.assertEqual(1, self.agent.get_watermark.call_count)

    def test_an_agent_that_pushes_nothing_is_polled(self):
        self.agent.ping.return_value = {"staging_root": "/s"}   # old agent
        res = make_res(agent=self.agent, poll_interval=0.05,
                       event_fallback_interval=60)
        self.assertEqual(0.05, res.fresh_for(events.WATERMARK))
        res.events.post(events.key(events.WATERMARK, TID, "f"), {})
        self.assertEqual(60, res.fresh_for(events.WATERMARK))
        self.assertEqual(0.05, res.fresh_for(events.REPORT))

    def test_a_cancel_wakes_a_waiting_stage(self):
        self.agent.get_peer_report.return_value = None
        task = outgoing.AwaitPeerImport(self.res)
        threading.Timer(0.3, self.res.live_for(MID).cancel.set).start()
        t0 = time.monotonic()
        self.assertRaises(exception.MigrationCancelled, task.execute, MID, TID,
                          "b", {"size": 3, "os_hash_value": HASH}, 2)
        self.assertLess(time.monotonic() - t0, 3)


class TestResources(testcase.TestCase):
    def test_margin_of_the_export_size(self):
        backend = mock.Mock()
        backend.total_bytes.return_value = 1000
        backend.free_bytes.return_value = 100
        res = make_res(backend=backend)
        res.conf.staging = types.SimpleNamespace(
            free_space_margin="10%", block_size=4096, queue_depth=1,
            writers=1, readers=1, commit_interval_bytes=4096,
            sync_writes=False, watermark_suffix=".wm", skip_zeros=True,
            hash_checkpoint_bytes=0)
        self.assertEqual(100, res.copy_options().free_margin)
        backend.total_bytes.return_value = None
        self.assertEqual(10, res.copy_options().free_margin)

    def test_remove_staged_removes_the_directory_it_empties(self):
        root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, root)
        res = make_res(backend=localfs.LocalBackend(root))
        for tid in (TID, MID):
            os.mkdir(os.path.join(root, tid))
            for leaf in (resources.DATA, resources.DESCRIPTOR,
                         resources.DATA + ".wm"):
                open(os.path.join(root, tid, leaf), "wb").close()
        # Someone else's file in MID's directory: kept, with the directory.
        open(os.path.join(root, MID, "notes.txt"), "wb").close()
        res.remove_staged(TID)
        res.remove_staged(TID)      # nothing left: not an error
        with self.assertLogs(resources.LOG.logger, "INFO") as logs:
            res.remove_staged(MID)
        self.assertEqual([MID], os.listdir(root))
        self.assertEqual(["notes.txt"], os.listdir(os.path.join(root, MID)))
        self.assertIn("kept the staging directory of transfer %s" % MID,
                      "\n".join(logs.output))

    def test_check_peer(self):
        agent = mock.Mock()
        agent.ping.return_value = {"peers": ["b"]}
        res = make_res(agent=agent)
        res.check_peer("b")
        err = self.assertRaises(exception.PeerNotFound, res.check_peer, "c")
        self.assertIn("b", str(err))
