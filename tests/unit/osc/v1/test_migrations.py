"""openstack dtn migrate and dtn migration ..., against the fake API."""

import json
import os
import signal
import time
from unittest import mock

from osc_lib import exceptions

from dtn_migrate.osc.v1 import common
from dtn_migrate.osc.v1 import migrations
from tests.unit.client import fakeapi
from tests.unit.osc import base

GiB = 1 << 30
IMAGE = "6a3c1e0e-5f3a-4b5e-9b8a-1c2d3e4f5a6b"


class TestMigrate(base.CommandTestCase):

    def test_by_id_and_name(self):
        status, out = self.run_command(migrations.Migrate, [
            IMAGE, "cirros", IMAGE, "--peer", "cloud-b", "--keep-id",
            "--visibility", "private", "--target-project", "p9",
            "--mode", "serial", "--no-verify",
            "--request-id", "0" * 32, "-f", "json"])
        self.assertEqual(0, status)
        self.assertEqual([{"peer": "cloud-b", "images": [IMAGE, "1" * 32],
                           "request_id": "0" * 32,
                           "options": {"keep_id": True,
                                       "visibility": "private",
                                       "target_project": "p9",
                                       "mode": "serial",
                                       "verify": False}}], self.posted())
        # Only the name was looked up in the image service.
        self.assertEqual(["cirros"], self.images.asked)
        rows = json.loads(out)
        self.assertEqual([IMAGE, "1" * 32], [r["Image ID"] for r in rows])
        self.assertEqual({"queued"}, {r["State"] for r in rows})
        self.assertEqual({"0" * 32}, {r["Request ID"] for r in rows})

    def test_by_tag_and_properties(self):
        self.run_command(migrations.Migrate, [
            "--peer", "cloud-b", "--tag", "dr", "--property", "os=linux",
            "--property", "tier=gold", "--force"])
        body = self.posted()[0]
        self.assertEqual(("dr", {"os": "linux", "tier": "gold"},
                          {"force": True}),
                         (body["tag"], body["properties"], body["options"]))
        self.assertNotIn("images", body)
        self.assertEqual(36, len(body["request_id"]))

    def test_images_and_selector_refused(self):
        exc = self.assertRaises(exceptions.CommandError, self.run_command,
                                migrations.Migrate,
                                [IMAGE, "--peer", "cloud-b", "--tag", "x"])
        self.assertIn("not both", str(exc))
        exc = self.assertRaises(exceptions.CommandError, self.run_command,
                                migrations.Migrate, ["--peer", "cloud-b"])
        self.assertIn("Give the images", str(exc))
        self.assertEqual([], self.posted())

    def test_unknown_image_name(self):
        exc = self.assertRaises(exceptions.CommandError, self.run_command,
                                migrations.Migrate,
                                ["nope", "--peer", "cloud-b"])
        self.assertEqual("Cannot find image: No Image found for nope",
                         str(exc))
        self.assertEqual([], self.posted())

    def test_a_long_image_name_is_quoted_once_and_short(self):
        long = "n" * 5000
        for cls, argv in ((migrations.Migrate, [long, "--peer", "cloud-b"]),
                          (migrations.ListMigration, ["--image", long])):
            exc = self.assertRaises(exceptions.CommandError,
                                    self.run_command, cls, argv)
            self.assertEqual("Cannot find image: No Image found for %s…"
                             "(5000 characters)" % long[:64], str(exc))
        self.assertEqual([], self.api.requests)

    def test_request_id_must_be_a_uuid(self):
        for cls, argv in ((migrations.Migrate, [IMAGE, "--peer", "cloud-b",
                                                "--request-id", "r"]),
                          (migrations.ListMigration, ["--request-id", "r"])):
            exc = self.assertRaises(exceptions.CommandError,
                                    self.run_command, cls, argv)
            self.assertEqual("--request-id must be a UUID, such as %s, not "
                             "'r'" % common.EXAMPLE_UUID, str(exc))
        self.assertEqual([], self.api.requests)

    def test_api_error_message(self):
        exc = self.assertRaises(exceptions.CommandError, self.run_command,
                                migrations.Migrate, [IMAGE, "--peer", "x"])
        self.assertEqual("Unknown peer DTN x (HTTP 404)", str(exc))

    def test_bad_visibility_is_a_usage_error(self):
        err = self.usage_error(migrations.Migrate, [
            IMAGE, "--peer", "cloud-b", "--visibility", "x"])
        self.assertIn("--visibility: invalid choice: 'x'", err)
        self.assertEqual([], self.posted())

    def test_wait_success(self):
        def script(records):
            for rec in records:
                self.api.script[rec["id"]] = [
                    {"state": "running", "stage": "export", "size": GiB,
                     "progress": 0.1, "rate": 1e8, "eta": 9,
                     "bytes": {"export": GiB // 4, "transfer": 0,
                               "import": 0}},
                    {"state": "complete", "stage": None, "progress": 1.0,
                     "peer_image_id": "p-" + rec["image_id"],
                     "bytes": {"export": GiB, "transfer": GiB,
                               "import": GiB}}]
        self.api.on_create = script
        status, out = self.run_command(migrations.Migrate, [
            IMAGE, "--peer", "cloud-b", "--wait", "--interval", "0.01",
            "-f", "json"])
        self.assertEqual(0, status)
        rows = json.loads(out)
        self.assertEqual([("complete", "p-" + IMAGE)],
                         [(r["State"], r["Peer Image ID"]) for r in rows])
        progress = self.app.stderr.getvalue().splitlines()
        self.assertIn("export 25% 95.4 MiB/s", progress[0])
        self.assertIn("ETA 00:09 (export 256.0 MiB of 1.0 GiB)", progress[0])
        self.assertIn("[####################] 100.0%", progress[-1])
        self.assertIn("complete", progress[-1])

    def test_a_reused_migration_is_said(self):
        # Before: a reused migration looked like a new one (exit 0, no
        # word of it).
        def reuse(records):
            for rec in records:
                self.api.migrations[rec["id"]].update(
                    state="complete", progress=1.0,
                    finished_at="2026-11-24T10:00:42Z")
                rec.update(self.api.migrations[rec["id"]], reused=True)
        self.api.on_create = reuse
        status, out = self.run_command(migrations.Migrate, [
            IMAGE, "--peer", "cloud-b", "--wait", "--interval", "0.01",
            "-f", "json"])
        self.assertEqual(0, status)
        [row] = json.loads(out)
        self.assertIs(True, row["Reused"])
        err = self.app.stderr.getvalue()
        self.assertIn("Image img-%s: reused migration %s, complete since "
                      "2026-11-24T10:00:42Z (the peer holds its copy; "
                      "--force makes another)" % (IMAGE, row["ID"]), err)
        self.assertIn("(reused)", err.splitlines()[-1])
        # A new one says nothing of it.
        self.api.on_create = None
        self.app.stderr.truncate(0)
        self.app.stderr.seek(0)
        status, out = self.run_command(migrations.Migrate, [
            IMAGE, "--peer", "cloud-b", "-f", "json"])
        self.assertIs(False, json.loads(out)[0]["Reused"])
        self.assertNotIn("reused", self.app.stderr.getvalue())


def ctrl_c_dropped_at_second_call(real):
    """(wrapper of ``real``, its calls): the second call sends this
    process SIGINT and drops the KeyboardInterrupt, as a finalizer
    running at that moment would.
    """
    calls = []

    def call(arg):
        calls.append(arg)
        if len(calls) == 2:
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.5)     # the handler runs in here
            except KeyboardInterrupt:
                pass                # dropped
        return real(arg)
    return call, calls


class TestWait(base.CommandTestCase):

    def running(self, **values):
        return self.api.add(state="running", stage="transfer", size=GiB,
                            progress=0.5, rate=2e8, eta=4,
                            bytes={"export": GiB, "transfer": GiB // 2,
                                   "import": 0}, **values)

    def test_failure_exits_nonzero_with_error(self):
        a = self.running(image_name="a")
        b = self.running(image_name="b")
        self.api.script[a["id"]] = [{}, {"state": "complete",
                                         "progress": 1.0}]
        self.api.script[b["id"]] = [{}, {
            "state": "failed", "stage": "import",
            "error": "ImportNotAllowed: visibility public is not "
                     "allowed for peer cloud-a\nTraceback..."}]
        exc = self.assertRaises(exceptions.CommandError, self.run_command,
                                migrations.WaitMigration,
                                [a["id"], b["id"], "--interval", "0.01"])
        self.assertEqual(
            "Migration %s of image b failed: ImportNotAllowed: visibility "
            "public is not allowed for peer cloud-a" % b["id"], str(exc))
        # The final table was printed before the error.
        out = self.app.stdout.getvalue()
        self.assertIn("complete", out)
        self.assertIn("failed", out)

    def test_cancelled_exits_nonzero(self):
        a = self.running()
        self.api.script[a["id"]] = [{"state": "cancelled",
                                     "error": "cancelled by request"}]
        exc = self.assertRaises(exceptions.CommandError, self.run_command,
                                migrations.WaitMigration,
                                [a["id"], "--interval", "0.01"])
        self.assertIn("cancelled: cancelled by request", str(exc))

    def test_plain_lines_when_not_a_tty(self):
        a = self.running(image_name="plain")
        self.api.script[a["id"]] = [
            {}, {}, {"progress": 0.7, "bytes": {
                "export": GiB, "transfer": GiB * 7 // 10, "import": 0}},
            {"state": "complete", "progress": 1.0}]
        self.run_command(migrations.WaitMigration,
                         [a["id"], "--interval", "0.01"])
        err = self.app.stderr.getvalue()
        self.assertNotIn("\x1b", err)
        lines = err.splitlines()
        # One line per change of state or tenth, not per poll.
        self.assertEqual(3, len(lines), lines)
        self.assertIn("transfer 50% 190.7 MiB/s", lines[0])
        self.assertIn("ETA 00:04 (transfer 512.0 MiB of 1.0 GiB)",
                      lines[0])
        self.assertIn("]  70.0% of 1.0 GiB", lines[1])
        self.assertIn("complete", lines[2])
        self.assertNotIn("(transfer", lines[2])

    def test_redrawn_in_place_on_a_tty(self):
        a = self.running(image_name="one")
        b = self.running(image_name="two")
        self.api.script[a["id"]] = [{}, {}, {"state": "complete"}]
        self.api.script[b["id"]] = [{}, {}, {"state": "complete"}]
        self.app.stderr.tty = True
        self.run_command(migrations.WaitMigration,
                         [a["id"], b["id"], "--interval", "0.01"])
        err = self.app.stderr.getvalue()
        # Each redraw goes back up over the two lines drawn before.
        self.assertEqual(2, err.count("\x1b[2A"))
        frames = err.split("\x1b[2A")
        self.assertEqual(3, len(frames))
        for frame in frames:
            self.assertEqual(2, frame.count("\r\x1b[K"))
        self.assertIn("one", frames[-1])
        self.assertIn("two", frames[-1])

    def test_ctrl_c_stops_waiting_without_cancelling(self):
        a = self.running()

        class Interrupting(base.Stream):
            def write(self, text):
                if "ETA" in text:
                    raise KeyboardInterrupt()
                return super().write(text)

        self.app.stderr = Interrupting()
        self.assertRaises(KeyboardInterrupt, self.run_command,
                          migrations.WaitMigration,
                          [a["id"], "--interval", "0.01"])
        self.assertIn("Stopped waiting; the migrations go on",
                      self.app.stderr.getvalue())
        self.assertIn(a["id"], self.app.stderr.getvalue())
        self.assertEqual([], self.posted())
        self.assertEqual("running", self.api.migrations[a["id"]]["state"])

    def test_ctrl_c_lost_inside_a_request_still_stops_waiting(self):
        """A Ctrl-C raised where a library drops it (a finalizer running
        then prints it and goes on) ends the wait all the same.  Before,
        the wait went on until its timeout (CI once saw ``openstack dtn
        migration wait`` go on for 120 s after a SIGINT).
        """
        a = self.running()
        dtn = self.app.client_manager.dtn
        real_get = dtn.migrations.get
        self.default_ctrl_c()
        get, gets = ctrl_c_dropped_at_second_call(real_get)

        with mock.patch.object(dtn.migrations, "get", side_effect=get):
            self.assertRaises(KeyboardInterrupt, self.run_command,
                              migrations.WaitMigration,
                              [a["id"], "--interval", "0.05",
                               "--timeout", "5"])
        self.assertEqual(2, len(gets))
        self.assertIn("Stopped waiting; the migrations go on",
                      self.app.stderr.getvalue())
        # Outside the wait, Ctrl-C is handled as before it.
        self.assertIs(signal.default_int_handler,
                      signal.getsignal(signal.SIGINT))

    def default_ctrl_c(self):
        """SIGINT raises KeyboardInterrupt, as in a shell (test runners
        may ignore it in their workers).
        """
        old = signal.signal(signal.SIGINT, signal.default_int_handler)
        self.addCleanup(signal.signal, signal.SIGINT, old)

    def test_ignored_ctrl_c_stays_ignored(self):
        a = self.api.add(state="complete", stage="import", size=GiB,
                         progress=1.0)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        self.addCleanup(signal.signal, signal.SIGINT,
                        signal.default_int_handler)
        self.run_command(migrations.WaitMigration, [a["id"]])
        self.assertIs(signal.SIG_IGN, signal.getsignal(signal.SIGINT))

    def test_second_ctrl_c_stops_a_hung_request(self):
        a = self.running()
        dtn = self.app.client_manager.dtn
        self.default_ctrl_c()

        def hung(mid):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.2)             # the first only sets the flag
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)               # the second raises in here
            self.fail("the second Ctrl-C did not stop the request")

        with mock.patch.object(dtn.migrations, "get", side_effect=hung):
            self.assertRaises(KeyboardInterrupt, self.run_command,
                              migrations.WaitMigration, [a["id"]])

    def test_timeout(self):
        a = self.running()
        exc = self.assertRaises(exceptions.CommandError, self.run_command,
                                migrations.WaitMigration,
                                [a["id"], "--interval", "0.05",
                                 "--timeout", "0.2"])
        self.assertIn("not finished after", str(exc))

    def test_bad_interval(self):
        exc = self.assertRaises(exceptions.CommandError, self.run_command,
                                migrations.WaitMigration,
                                ["x", "--interval", "0"])
        self.assertIn("--interval", str(exc))

    def test_unknown_migration(self):
        exc = self.assertRaises(exceptions.CommandError, self.run_command,
                                migrations.WaitMigration,
                                ["f" * 32, "--interval", "0.01"])
        self.assertIn("could not be found. (HTTP 404)", str(exc))


class TestList(base.CommandTestCase):

    def setUp(self):
        super().setUp()
        self.recs = [self.api.add(
            id="%032x" % i, image_name="img%d" % i,
            created_at="2026-11-24T10:00:%02dZ" % i,
            state="failed" if i % 2 else "complete", size=GiB,
            progress=1.0 if i % 2 == 0 else 0.5, rate=None,
            bytes={"export": GiB, "transfer": GiB // 2, "import": 0})
            for i in range(12)]

    def test_table(self):
        status, out = self.run_command(migrations.ListMigration, [])
        self.assertEqual(0, status)
        header = out.splitlines()[1]
        for heading in ("ID", "Image Name", "Peer", "Direction", "State",
                        "Stage", "Progress", "Updated At"):
            self.assertIn(heading, header)
        self.assertNotIn("Bytes", header)
        self.assertIn("| 50.0%", out)
        self.assertEqual(12 + 4, len(out.splitlines()))

    def test_long_json(self):
        _, out = self.run_command(migrations.ListMigration,
                                  ["--long", "-f", "json", "--limit", "2"])
        rows = json.loads(out)
        self.assertEqual(["%032x" % 11, "%032x" % 10],
                         [r["ID"] for r in rows])
        self.assertEqual({"export": GiB, "transfer": GiB // 2, "import": 0},
                         rows[0]["Bytes"])
        self.assertEqual((GiB, 0.5), (rows[0]["Size"], rows[0]["Progress"]))

    def test_long_table_formats(self):
        _, out = self.run_command(migrations.ListMigration,
                                  ["--long", "--limit", "1"])
        self.assertIn("export=1.0 GiB, transfer=512.0 MiB, import=0 B",
                      out)

    def test_filters_reach_the_api(self):
        _, out = self.run_command(migrations.ListMigration, [
            "--state", "failed", "--peer", "cloud-b", "--direction",
            "outgoing", "--request-id", "1" * 32, "--image", "cirros",
            "--changes-since", "2026-11-24T09:00:00Z", "--sort-key",
            "image_name", "--sort-dir", "asc", "--all-projects",
            "--marker", "%032x" % 3, "-f", "value", "-c", "ID"])
        query = self.api.requests[-1]["query"]
        self.assertEqual({"state": ["failed"], "peer": ["cloud-b"],
                          "direction": ["outgoing"], "request_id": ["1" * 32],
                          "image_id": ["1" * 32],
                          "changes-since": ["2026-11-24T09:00:00Z"],
                          "sort_key": ["image_name"], "sort_dir": ["asc"],
                          "all_projects": ["true"],
                          "marker": ["%032x" % 3], "limit": ["1000"]},
                         query)
        self.assertEqual("", out)

    def test_every_page_is_read(self):
        for i in range(12, 1100):
            self.api.add(id="%032x" % i,
                         created_at="2026-11-24T11:%02d:%02dZ"
                         % (i // 60 % 60, i % 60))
        _, out = self.run_command(migrations.ListMigration,
                                  ["-f", "value", "-c", "ID"])
        self.assertEqual(1100, len(out.split()))
        self.assertEqual(2, len(self.api.requests))

    def test_state_filter(self):
        _, out = self.run_command(migrations.ListMigration,
                                  ["--state", "failed", "-f", "csv",
                                   "-c", "State"])
        self.assertEqual(['"State"'] + ['"failed"'] * 6, out.splitlines())
        self.api.add(state="cancelled")
        _, out = self.run_command(migrations.ListMigration,
                                  ["--state", "failed", "--state",
                                   "cancelled", "-f", "value",
                                   "-c", "State"])
        self.assertEqual(["cancelled"] + ["failed"] * 6,
                         sorted(out.split()))
        self.assertEqual(["failed", "cancelled"],
                         self.api.requests[-1]["query"]["state"])

    def test_bad_input(self):
        for argv, text in ((["--limit", "0"], "--limit must be"),
                           (["--limit", "x"], "--limit must be"),
                           (["--changes-since", "yesterday"],
                            "--changes-since must be an ISO 8601")):
            exc = self.assertRaises(exceptions.CommandError,
                                    self.run_command,
                                    migrations.ListMigration, argv)
            self.assertIn(text, str(exc))
        self.assertEqual([], self.api.requests)
        err = self.usage_error(migrations.ListMigration,
                               ["--state", "bogus"])
        self.assertIn("--state: invalid choice: 'bogus'", err)

    def test_api_rejects_marker(self):
        exc = self.assertRaises(exceptions.CommandError, self.run_command,
                                migrations.ListMigration,
                                ["--marker", "nope"])
        self.assertEqual("Marker nope not found (HTTP 400)", str(exc))


class TestShowCancelRetry(base.CommandTestCase):

    def test_show(self):
        rec = self.api.add(state="running", stage="transfer", size=GiB,
                           progress=0.25, rate=1048576.0, eta=65,
                           bytes={"export": GiB, "transfer": GiB // 4,
                                  "import": 0})
        _, out = self.run_command(migrations.ShowMigration, [rec["id"]])
        rows = dict((cells[1].strip(), cells[2].strip())
                    for cells in (line.split("|") for line in
                                  out.splitlines() if line.startswith("|")))
        self.assertEqual(("running", "transfer", "1.0 GiB", "25.0%",
                          "1.0 MiB/s", "01:05"),
                         (rows["state"], rows["stage"], rows["size"],
                          rows["progress"], rows["rate"], rows["eta"]))
        self.assertEqual("export=1.0 GiB, transfer=256.0 MiB, import=0 B",
                         rows["bytes"])
        self.assertEqual("2026-11-24T10:00:00Z - queued", rows["events"])

    def test_show_json(self):
        rec = self.api.add()
        _, out = self.run_command(migrations.ShowMigration,
                                  [rec["id"], "-f", "json"])
        shown = json.loads(out)
        self.assertEqual(set(fakeapi.migration()) | {"events"}, set(shown))
        self.assertEqual("queued", shown["events"][0]["event"])
        self.assertEqual({"export": 0, "transfer": 0, "import": 0},
                         shown["bytes"])

    def test_show_missing(self):
        exc = self.assertRaises(exceptions.CommandError, self.run_command,
                                migrations.ShowMigration, ["f" * 32])
        self.assertIn("could not be found. (HTTP 404)", str(exc))

    def test_cancel_then_retry(self):
        rec = self.api.add(state="running")
        _, out = self.run_command(migrations.CancelMigration,
                                  [rec["id"], "-f", "value", "-c",
                                   "state"])
        self.assertEqual("cancelled", out.strip())
        exc = self.assertRaises(exceptions.CommandError, self.run_command,
                                migrations.CancelMigration, [rec["id"]])
        self.assertEqual("Migration %s is already cancelled: cannot cancel "
                         "it. (HTTP 409)" % rec["id"], str(exc))
        _, out = self.run_command(migrations.RetryMigration,
                                  [rec["id"], "-f", "yaml"])
        self.assertIn("state: queued", out.splitlines())
        self.assertIn("attempt: 2", out.splitlines())
        self.assertEqual([{"cancel": None}, {"cancel": None},
                          {"retry": None}], self.posted())


class TestProgressRecord(base.CommandTestCase):

    def test_stages_begun_and_rate_on_current(self):
        rec = common.progress_record(fakeapi.migration(
            state="running", stage="transfer", size=GiB, rate=5.0, eta=3,
            bytes={"export": GiB, "transfer": 10, "import": 0}))
        self.assertEqual({"export": {"done": GiB},
                          "transfer": {"done": 10, "rate": 5.0}},
                         rec["stages"])
        self.assertEqual("transfer", rec["current_stage"])
        # The engine's ETA, over the work left in every stage.
        self.assertEqual(3, rec["eta"])

    def test_peer_not_answering(self):
        since = "2026-11-24T10:00:31.000000Z"
        rec = common.progress_record(fakeapi.migration(
            state="running", stage="import", size=GiB,
            peer_silent_since=since))
        self.assertEqual(since, rec["peer_silent_since"])
        self.assertIn("- peer not answering since 10:00:31 UTC",
                      common._Progress(base.Stream()).line(rec))

    def test_queued_has_no_stage(self):
        rec = common.progress_record(fakeapi.migration())
        self.assertEqual({}, rec["stages"])


class TestWaiterLines(base.CommandTestCase):

    def test_periodic_plain_lines(self):
        now = [1000.0]
        stream = base.Stream()
        waiter = common.Waiter(self.app.client_manager.dtn, stream,
                               period=30.0, clock=lambda: now[0])
        rec = fakeapi.migration(state="running", stage="transfer",
                                size=GiB, progress=0.33, rate=1e6, eta=600,
                                bytes={"export": GiB, "transfer": GiB // 3,
                                       "import": 0})
        for step in (0, 10, 29.9):        # unchanged: one line
            now[0] = 1000.0 + step
            waiter.draw([rec])
        self.assertEqual(1, len(stream.getvalue().splitlines()))
        now[0] = 1030.0                   # 30 s on: the line again
        waiter.draw([rec])
        now[0] = 1031.0
        waiter.draw([rec])
        lines = stream.getvalue().splitlines()
        self.assertEqual(2, len(lines))
        self.assertEqual(lines[0], lines[1])
        self.assertIn("ETA 10:00", lines[1])
        # A final migration is not repeated.
        done = dict(rec, state="complete", progress=1.0)
        waiter.draw([done])
        now[0] = 1100.0
        waiter.draw([done])
        lines = stream.getvalue().splitlines()
        self.assertEqual(3, len(lines))
        self.assertIn("complete", lines[2])
