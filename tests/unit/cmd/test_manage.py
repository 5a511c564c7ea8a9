"""dtn-migrate-manage: the nfs commands (no bus), bus set-up and the
migration commands.
"""

import io
import json
import os
import subprocess
import sys
import tempfile
import time
from unittest import mock

import fixtures
import oslo_messaging as messaging
from oslo_messaging._drivers import common as rpc_common

from dtn_migrate.cmd import manage
from dtn_migrate import config
from dtn_migrate.engine import rpcapi as engine_rpcapi
from dtn_migrate import exception
from tests.unit import utils as test_utils
from tests.unit import testcase

MiB = 1 << 20

GOOD = ("rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,hard,"
        "proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=10.20.0.5,"
        "local_lock=none,addr=10.20.0.9")
MOUNTINFO = (
    "22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n"
    "40 22 0:52 / /mnt/dtn-staging rw,relatime shared:30 - nfs4 "
    "dtn1:/export/staging " + GOOD + "\n"
    "41 22 0:53 / /mnt/small rw,relatime shared:31 - nfs dtn2:/export/v3 "
    "rw,sync,vers=3,rsize=1048576,wsize=262144,namlen=255,hard,proto=tcp,"
    "timeo=600,retrans=2,sec=sys,mountaddr=10.20.0.10,mountvers=3,"
    "mountport=20048,mountproto=udp,local_lock=none,addr=10.20.0.10\n")


class ManageTestCase(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.addCleanup(config.CONF.reset)
        self.mountinfo = self.write(MOUNTINFO)

    def write(self, text):
        f = tempfile.NamedTemporaryFile("w", delete=False)
        f.write(text)
        f.close()
        self.addCleanup(os.unlink, f.name)
        return f.name

    def run_main(self, *args, conf=""):
        argv = ["dtn-migrate-manage", "--config-file", self.write(conf)]
        out, err = io.StringIO(), io.StringIO()
        with mock.patch.object(sys, "argv", argv + list(args)), \
                mock.patch.object(sys, "stdout", out), \
                mock.patch.object(sys, "stderr", err), \
                mock.patch.object(manage.rpc, "init") as init:
            e = self.assertRaises(SystemExit, manage.main)
        config.CONF.reset()
        self.rpc_init = init
        return e.code, out.getvalue(), err.getvalue()


class TestNfsAdvise(ManageTestCase):
    def test_text(self):
        rc, out, _ = self.run_main(
            "nfs", "advise", "--link", "10gbit", "--server", "dtn1",
            "--export", "/export/staging", "--client", "controller1",
            "--mount-point", "/mnt/dtn-staging")
        self.assertEqual(0, rc)
        self.assertIn(
            "mount -t nfs -o vers=4.2,proto=tcp,rsize=1048576,"
            "wsize=1048576,async,hard,timeo=600,retrans=2,nconnect=2 "
            "dtn1:/export/staging /mnt/dtn-staging\n", out)
        self.assertIn("/export/staging controller1(rw,async,"
                      "no_subtree_check,root_squash,sec=sys)\n", out)
        self.assertIn("MaxWrite = 1048576;", out)
        self.assertIn("NFS_Commit = false;", out)
        self.assertIn("net.ipv4.tcp_wmem", out)
        self.assertFalse(self.rpc_init.called)

    def test_json_and_options(self):
        rc, out, _ = self.run_main(
            "nfs", "advise", "--link", "1gbit", "--rtt", "40",
            "--nfs-version", "3", "--server-sync", "--client", "c1",
            "--json")
        self.assertEqual(0, rc)
        d = json.loads(out)
        self.assertEqual(10 ** 9, d["link_rate"])
        self.assertEqual(5000000, d["bdp_bytes"])
        self.assertEqual(16 * MiB, d["tcp_buffer_bytes"])
        self.assertIn("vers=3", d["mount_options"])
        self.assertEqual("/export/staging c1(rw,sync,no_subtree_check,"
                         "root_squash,sec=sys)", d["exports_line"])

    def test_defaults_from_the_configuration(self):
        rc, out, _ = self.run_main(
            "nfs", "advise", "--link", "25gbit", "--json",
            conf="[staging]\npath = /srv/staging\n"
                 "url = nfs://dtn7.example.org/export/images"
                 "?nfsport=2049&mountport=20048\n")
        self.assertEqual(0, rc)
        d = json.loads(out)
        self.assertEqual(("dtn7.example.org", "/export/images",
                          "/srv/staging"),
                         (d["server"], d["export"], d["mount_point"]))
        self.assertTrue(d["mount_command"].endswith(
            " dtn7.example.org:/export/images /srv/staging"))
        self.assertEqual(5, d["nconnect"])

    def test_builtin_defaults(self):
        rc, out, _ = self.run_main("nfs", "advise", "--link", "1e9",
                                   "--json")
        d = json.loads(out)
        self.assertEqual(("dtn", "/export/staging", "/mnt/dtn-staging"),
                         (d["server"], d["export"], d["mount_point"]))

    def test_bad_link(self):
        for link in ("10GB", "fast", "0"):
            rc, out, err = self.run_main("nfs", "advise", "--link", link)
            self.assertEqual(2, rc, link)
            self.assertIn("link rate", err)
            self.assertEqual("", out)

    def test_bad_rtt(self):
        rc, _, err = self.run_main("nfs", "advise", "--link", "1gbit",
                                   "--rtt", "-1")
        self.assertEqual(2, rc)
        self.assertIn("round-trip", err)

    def test_link_is_required(self):
        rc, _, _ = self.run_main("nfs", "advise")
        self.assertEqual(2, rc)


class TestNfsCheck(ManageTestCase):
    def check(self, *args, conf=""):
        rc, out, err = self.run_main("nfs", "check", "--mountinfo",
                                     self.mountinfo, *args, conf=conf)
        self.assertFalse(self.rpc_init.called)
        return rc, json.loads(out)

    def test_on_profile(self):
        rc, d = self.check("/mnt/dtn-staging/images")
        self.assertEqual(0, rc)
        self.assertEqual("ok", d["status"])
        self.assertEqual([], d["deviations"])
        self.assertEqual("dtn1:/export/staging", d["mount"]["source"])
        self.assertEqual(MiB, d["mount"]["wsize"])
        self.assertEqual(MiB, d["profile"]["min_wsize"])
        self.assertTrue(any("not visible" in n for n in d["notes"]))

    def test_default_path_is_the_staging_path(self):
        rc, d = self.check()
        self.assertEqual(("/mnt/dtn-staging", 0), (d["path"], rc))
        rc, d = self.check(conf="[staging]\npath = /mnt/small/x\n")
        self.assertEqual(("/mnt/small/x", 1), (d["path"], rc))

    def test_deviations(self):
        rc, d = self.check("/mnt/small")
        self.assertEqual(1, rc)
        self.assertEqual("deviations", d["status"])
        self.assertEqual(2, len(d["deviations"]))
        self.assertTrue(d["mount"]["sync"])
        self.assertTrue(any("mount_check=warn" in n for n in d["notes"]))

    def test_profile_from_the_configuration(self):
        rc, d = self.check("/mnt/small", conf="[staging]\nmin_wsize = 0\n"
                                              "require_async = false\n"
                                              "mount_check = refuse\n")
        self.assertEqual((0, []), (rc, d["deviations"]))
        self.assertEqual(0, d["profile"]["min_wsize"])

    def test_not_nfs(self):
        rc, d = self.check("/var/tmp/x")
        self.assertEqual(3, rc)
        self.assertEqual("not_nfs", d["status"])
        self.assertIsNone(d["mount"])
        self.assertIn("is not on NFS", d["error"])
        self.assertEqual([], d["notes"])
        rc, d = self.check("/var/tmp/x",
                           conf="[staging]\nallow_local = true\n")
        self.assertEqual(3, rc)
        self.assertIn("allow_local", d["notes"][0])

    def test_this_machine(self):
        rc, out, _ = self.run_main("nfs", "check", tempfile.gettempdir())
        self.assertEqual(3, rc)
        self.assertEqual("not_nfs", json.loads(out)["status"])


class TestBus(ManageTestCase):
    def test_transfer_commands_still_use_the_bus(self):
        api = mock.Mock()
        api.list_transfers.return_value = [{"transfer_id": "t1"}]
        with mock.patch.object(manage, "_api", return_value=api), \
                mock.patch.object(manage.rpc, "cleanup") as cleanup:
            rc, out, _ = self.run_main("transfer", "list", "--host", "dtn1")
        self.assertEqual(0, rc)
        self.assertTrue(self.rpc_init.called)
        self.assertTrue(cleanup.called)
        api.list_transfers.assert_called_once_with({}, "dtn1")
        self.assertEqual([{"transfer_id": "t1"}], json.loads(out))


class TestSubprocess(testcase.TestCase):
    def test_entry_point_without_a_bus(self):
        # An unreachable bus: the nfs commands must not touch it.
        conf = tempfile.NamedTemporaryFile("w", delete=False)
        conf.write("[DEFAULT]\ntransport_url = rabbit://u:p@192.0.2.1:1/\n")
        conf.close()
        self.addCleanup(os.unlink, conf.name)
        code = ("import sys; from dtn_migrate.cmd import manage; "
                "sys.argv[0] = 'dtn-migrate-manage'; manage.main()")
        proc = subprocess.run(
            [sys.executable, "-c", code, "--config-file", conf.name, "nfs",
             "advise", "--link", "10gbit", "--json"],
            capture_output=True, text=True, timeout=60)
        self.assertEqual(0, proc.returncode, proc.stderr)
        self.assertEqual(2, json.loads(proc.stdout)["nconnect"])


# The migration commands, against an EngineAPI double.

RID = "5f0c8f5e6a3b4f1c9d2e7a8b1c0d3e4f"


class _ServiceContext:
    """Equal to the context dtn-migrate-manage sends the engine: an
    administrator's naming the tool, with a request id (the engine
    refuses an empty one).
    """

    def __eq__(self, other):
        return isinstance(other, dict) and other.get("is_admin") is True \
            and other.get("user_name") == "dtn-migrate-manage" and \
            bool(other.get("request_id")) and not other.get("project_id")

    def __repr__(self):
        return "<the service context of dtn-migrate-manage>"


SERVICE = _ServiceContext()
ENGINE_API = engine_rpcapi.EngineAPI
GiB = 1 << 30


def rec(mid, state, progress=0.0, stages=None, request_id=RID, **fields):
    record = {"migration_id": mid, "request_id": request_id,
              "direction": "outgoing", "image_id": "img-" + mid,
              "image_name": "name-" + mid, "peer": "west", "state": state,
              "error": None, "size": 2 * GiB, "progress": progress,
              "stages": stages or {}, "mode": "pipelined",
              "peer_image": None}
    record.update(fields)
    return record


def walk(mid, last="complete"):
    """queued -> running -> ``last``."""
    ok = last == "complete"
    return [rec(mid, "queued"),
            rec(mid, "running", 0.5, {
                "export": {"done": 2 * GiB, "size": 2 * GiB},
                "transfer": {"done": GiB, "size": 2 * GiB,
                             "rate": 100 * MiB, "eta": 10.0}}, eta=10.0),
            rec(mid, last, 1.0 if ok else 0.5,
                error=None if ok else "%s: the reason\ntraceback" % last)]


class FakeEngine:
    """Each migration steps through its scripted records, one per poll."""

    def __init__(self, *scripts, reused=()):
        self.scripts = {s[0]["migration_id"]: list(s) for s in scripts}
        self.reused = set(reused)

    def _step(self, mid):
        script = self.scripts[mid]
        return dict(script.pop(0) if len(script) > 1 else script[0])

    def migrate(self, ctxt, peer, images=None, selector=None, options=None,
                request_id=None):
        out = []
        for mid, script in self.scripts.items():
            if mid in self.reused:
                out.append(dict(self._step(mid), reused=True))
                continue
            for record in script:
                record["request_id"] = request_id
            out.append(self._step(mid))
        return {"request_id": request_id, "peer": peer,
                "migrations": out}

    def list_migrations(self, ctxt, request_id=None, direction=None,
                        filters=None):
        states = (filters or {}).get("state")
        return [self._step(mid) for mid, script in self.scripts.items()
                if request_id in (None, script[0]["request_id"]) and
                (not states or script[0]["state"] in states)]

    def get_migration(self, ctxt, migration_id):
        if migration_id not in self.scripts:
            raise exception.MigrationNotFound(migration_id=migration_id)
        return self._step(migration_id)

    def cancel_migration(self, ctxt, migration_id):
        return rec(migration_id, "cancelled")

    def retry_migration(self, ctxt, migration_id):
        if migration_id not in self.scripts:
            raise exception.MigrationNotFound(migration_id=migration_id)
        return dict(rec(migration_id, "queued"), attempt=2)


def remote(exc):
    """``exc`` as the RPC client re-raises it (str() ends with the
    engine's traceback).
    """
    try:
        raise exc
    except Exception:
        data = rpc_common.serialize_remote_exception(sys.exc_info())
    return rpc_common.deserialize_remote_exception(
        data, manage.rpc.ALLOWED_EXMODS)


def documents(text):
    decoder, out, i = json.JSONDecoder(), [], 0
    text = text.strip()
    while i < len(text):
        doc, i = decoder.raw_decode(text, i)
        out.append(doc)
        while i < len(text) and text[i].isspace():
            i += 1
    return out


class MigrationTestCase(ManageTestCase):
    def setUp(self):
        super().setUp()
        self.time = test_utils.FakeTime()
        self.useFixture(fixtures.MockPatchObject(manage, "time", self.time))
        self.engine_cls = self.useFixture(fixtures.MockPatch(
            "dtn_migrate.engine.rpcapi.EngineAPI")).mock
        self.engine(FakeEngine(walk("m1")))

    def engine(self, fake):
        self.api = mock.Mock(wraps=fake)
        self.engine_cls.return_value = self.api
        return self.api


class TestMigrateArguments(MigrationTestCase):
    def migrate(self, *args):
        rc, out, err = self.run_main("migrate", "--peer", "west",
                                     "--no-wait", *args)
        self.assertEqual(0, rc, err)
        self.assertTrue(self.rpc_init.called)
        self.engine_cls.assert_called_with(timeout=60, retry=3)
        self.assertEqual("m1", json.loads(out)["migrations"][0][
            "migration_id"])
        (ctxt, peer), kwargs = self.api.migrate.call_args
        self.assertEqual(SERVICE, ctxt)
        self.assertEqual("west", peer)
        return kwargs

    def test_images(self):
        kw = self.migrate("--image", "a", "--image", "b", "c")
        self.assertEqual(["a", "b", "c"], kw["images"])
        self.assertIsNone(kw["selector"])
        self.assertIsNone(kw["options"])
        # A new request id, chosen by the CLI.
        self.assertRegex(kw["request_id"], "^[0-9a-f]{32}$")
        self.assertFalse(self.api.list_migrations.called)

    def test_tag(self):
        kw = self.migrate("--tag", "gold")
        self.assertEqual((None, {"tag": "gold"}),
                         (kw["images"], kw["selector"]))

    def test_properties(self):
        kw = self.migrate("--property", "os_distro=ubuntu", "--property",
                          "note=a=b")
        self.assertEqual({"properties": {"os_distro": "ubuntu",
                                         "note": "a=b"}}, kw["selector"])
        kw = self.migrate("--tag", "gold", "--property", "k=v")
        self.assertEqual({"tag": "gold", "properties": {"k": "v"}},
                         kw["selector"])

    def test_options_only_when_given(self):
        kw = self.migrate("--image", "a", "--keep-id", "--no-verify",
                          "--visibility", "shared", "--target-project",
                          "p2", "--mode", "serial", "--force",
                          "--transfer-option", "streams=8",
                          "--transfer-option", "log_method=fsync",
                          "--transfer-option", "rate_limit=1e9")
        self.assertEqual({"keep_id": True, "verify": False,
                          "visibility": "shared", "target_project": "p2",
                          "mode": "serial", "force": True,
                          "transfer_options": {"streams": 8,
                                               "log_method": "fsync",
                                               "rate_limit": 1e9}},
                         kw["options"])
        kw = self.migrate("--image", "a", "--mode", "pipelined")
        self.assertEqual({"mode": "pipelined"}, kw["options"])

    def test_request_id(self):
        kw = self.migrate("--image", "a", "--request-id",
                          "5F0C8F5E-6A3B-4F1C-9D2E-7A8B1C0D3E4F")
        self.assertEqual(RID, kw["request_id"])

    def test_refused(self):
        for args in (["--property", "novalue"], ["--property", "=x"],
                     ["--property", "k="], ["--property", "k=1",
                                            "--property", "k=2"],
                     ["--transfer-option", "streams"],
                     ["--image", "a", "--tag", "t"],
                     ["--image", "a", "--property", "k=v"], [],
                     ["--image", "a", "--request-id", "nope"],
                     ["--image", "a", "--visibility", "secret"],
                     ["--image", "a", "--mode", "fast"],
                     ["--image", "a", "--timeout", "0"]):
            rc, out, err = self.run_main("migrate", "--peer", "west", *args)
            self.assertEqual(2, rc, args)
            self.assertEqual("", out, args)
            self.assertIn("error", err, args)
        self.assertFalse(self.api.migrate.called)
        rc, _, err = self.run_main("migrate", "--image", "a")
        self.assertEqual(2, rc)
        self.assertIn("--peer", err)


class TestMigrateFollow(MigrationTestCase):
    def migrate(self, *args):
        rc, out, err = self.run_main("migrate", "--peer", "west", "--image",
                                     "a", "--request-id", RID, *args)
        return rc, documents(out), err

    def test_complete(self):
        self.engine(FakeEngine(walk("m1"), walk("m2")))
        rc, docs, err = self.migrate()
        self.assertEqual(0, rc, err)
        request, final = docs
        self.assertEqual(["queued", "queued"],
                         [m["state"] for m in request["migrations"]])
        self.assertEqual(["complete", "complete"],
                         [m["state"] for m in final])
        self.assertEqual(["m1", "m2"], [m["migration_id"] for m in final])
        self.api.list_migrations.assert_called_with(SERVICE, request_id=RID)
        self.assertFalse(self.api.get_migration.called)
        lines = err.splitlines()
        self.assertEqual(6, len(lines), err)
        self.assertTrue(lines[0].startswith("name-m1"))
        self.assertIn(" running ", lines[2])
        self.assertIn(" 50.0% of 2.0 GiB export 100% transfer 50% "
                      "100.0 MiB/s ETA 00:10", lines[2])
        self.assertIn("100.0%", lines[4])
        self.assertEqual([manage.POLL_INTERVAL] * 2, self.time.sleeps)

    def test_failed(self):
        self.engine(FakeEngine(walk("m1", "failed"),
                               walk("m2", "cancelled")))
        rc, (_, final), err = self.migrate()
        self.assertEqual(1, rc)
        self.assertEqual(["failed", "cancelled"],
                         [m["state"] for m in final])
        self.assertIn("- failed: the reason\n", err)

    def test_cancelled(self):
        self.engine(FakeEngine(walk("m1", "cancelled"), walk("m2")))
        rc, _, err = self.migrate()
        self.assertEqual(3, rc)
        self.assertIn("- cancelled: the reason", err)

    def test_reused_from_an_earlier_request(self):
        old = [rec("m0", "running", 0.5, request_id="0" * 32),
               rec("m0", "complete", 1.0, request_id="0" * 32)]
        self.engine(FakeEngine(old, walk("m1"), reused=["m0"]))
        rc, (request, final), _ = self.migrate()
        self.assertEqual(0, rc)
        self.assertEqual([True, True], [m.get("reused") for m in
                                        (request["migrations"][0],
                                         final[0])])
        self.api.get_migration.assert_called_with(SERVICE, "m0")
        self.assertEqual(["complete", "complete"],
                         [m["state"] for m in final])

    def test_timeout(self):
        self.engine(FakeEngine([rec("m1", "running", 0.25)]))
        rc, (_, final), err = self.migrate("--timeout", "2.5")
        self.assertEqual(4, rc)
        self.assertEqual("running", final[0]["state"])
        self.assertEqual(2.5, self.time.now)
        self.assertIn("timeout: 1 of 1 migrations unfinished after 2.5 s",
                      err)
        self.assertIn("migration wait --request-id %s" % RID, err)

    def test_no_wait(self):
        rc, docs, err = self.migrate("--no-wait")
        self.assertEqual((0, ""), (rc, err))
        self.assertEqual(1, len(docs))
        self.assertEqual(RID, docs[0]["request_id"])
        self.assertFalse(self.api.list_migrations.called)
        self.assertFalse(self.time.sleeps)


class TestEngineErrors(MigrationTestCase):
    def refused(self, exc, *args):
        self.api.migrate.side_effect = exc
        self.api.list_migrations.side_effect = exc
        rc, out, err = self.run_main(*(args or ("migrate", "--peer", "west",
                                                "--tag", "gold")))
        self.assertEqual(2, rc)
        self.assertEqual("", out)
        self.assertEqual(1, len(err.splitlines()), err)
        return err

    def test_remote_exceptions(self):
        for exc, text in (
                (exception.PeerNotFound(peer="west", known="north"),
                 "Unknown peer DTN west (configured peers: north)."),
                (exception.ImageNotFound(image_id="a", cloud="east"),
                 "Image a could not be found in east."),
                (exception.InvalidInput(reason="no active image matches"),
                 "Invalid input: no active image matches")):
            exc = remote(exc)
            self.assertIn("Traceback", str(exc))
            self.assertEqual("error: %s\n" % text, self.refused(exc))

    def test_engine_not_answering(self):
        err = self.refused(messaging.MessagingTimeout())
        self.assertIn("did not answer within 60 s", err)
        self.assertIn("dtn-migrate-engine running", err)
        (_, _), kwargs = self.api.migrate.call_args
        self.assertIn("--request-id %s" % kwargs["request_id"], err)
        err = self.refused(messaging.MessagingTimeout(), "migration",
                           "list", "--rpc-timeout", "5")
        self.assertEqual("error: " + manage.NO_ANSWER % 5 + "\n", err)

    def test_unreachable_bus_while_migrating(self):
        # The request may have gone out: its id is what the operator
        # needs to find it, or to send it again safely.
        err = self.refused(manage.BusTimeout(), "migrate", "--peer",
                           "west", "--tag", "gold", "--request-id", RID,
                           "--rpc-timeout", "5")
        self.assertEqual(
            "error: " + manage.NO_BUS % 15 + "; if the engine got the "
            "request, 'dtn-migrate-manage migration list --request-id %s' "
            "shows it, and rerunning with --request-id %s is safe\n"
            % (RID, RID), err)

    def test_engine_bug(self):
        err = self.refused(messaging.RemoteError("ValueError", "boom\nmore"))
        self.assertEqual("error: the migration engine failed: ValueError: "
                         "boom\n", err)

    def test_error_while_following(self):
        self.engine(FakeEngine([rec("m1", "running")], reused=["m1"]))
        self.api.get_migration.side_effect = remote(
            exception.MigrationNotFound(migration_id="m1"))
        rc, out, err = self.run_main("migrate", "--peer", "west", "--image",
                                     "a")
        self.assertEqual(2, rc)
        self.assertEqual(1, len(documents(out)))
        self.assertTrue(err.endswith(
            "error: Migration m1 could not be found.\n"), err)

    def test_unreachable_bus(self):
        err = self.refused(manage.BusTimeout(), "migration", "list",
                           "--rpc-timeout", "5")
        self.assertEqual("error: cannot reach the message bus within 15 s "
                         "(is the broker of transport_url running and "
                         "reachable?)\n", err)
        self.assertEqual(2, self.run_main("migration", "list",
                                          "--rpc-timeout", "0")[0])

    def test_without_an_engine(self):
        # A real (in-memory) bus where no engine listens.
        self.useFixture(fixtures.MockPatch(
            "dtn_migrate.engine.rpcapi.EngineAPI",
            new=ENGINE_API))
        argv = ["dtn-migrate-manage", "--config-file",
                self.write("[DEFAULT]\ntransport_url = fake://\n"),
                "migration", "show", "m1", "--rpc-timeout", "1"]
        err = io.StringIO()
        with mock.patch.object(sys, "argv", argv), \
                mock.patch.object(sys, "stderr", err):
            e = self.assertRaises(SystemExit, manage.main)
        self.assertEqual(2, e.code)
        self.assertEqual("error: " + manage.NO_ANSWER % 1 + "\n",
                         err.getvalue())


class TestMigrationCommands(MigrationTestCase):
    def test_list(self):
        rc, out, _ = self.run_main(
            "migration", "list", "--direction", "incoming", "--request-id",
            "5f0c8f5e-6a3b-4f1c-9d2e-7a8b1c0d3e4f")
        self.assertEqual(0, rc)
        self.api.list_migrations.assert_called_once_with(
            SERVICE, request_id=RID, direction="incoming")
        self.assertEqual("m1", json.loads(out)[0]["migration_id"])
        rc, _, _ = self.run_main("migration", "list", "--direction", "up")
        self.assertEqual(2, rc)

    def test_list_by_state(self):
        rc, out, _ = self.run_main("migration", "list", "--state", "failed",
                                   "--state", "cancelled")
        self.assertEqual(0, rc)
        self.api.list_migrations.assert_called_once_with(
            SERVICE, request_id=None, direction=None,
            filters={"state": ["failed", "cancelled"]})
        rc, _, err = self.run_main("migration", "list", "--state", "lost")
        self.assertEqual(2, rc)
        self.assertIn("invalid choice", err)

    def test_retry(self):
        rc, out, _ = self.run_main("migration", "retry", "m1")
        self.assertEqual((0, "queued", 2), (rc, json.loads(out)["state"],
                                            json.loads(out)["attempt"]))
        self.api.retry_migration.assert_called_once_with(SERVICE, "m1")
        self.api.retry_migration.side_effect = remote(
            exception.MigrationStateConflict(migration_id="m1",
                                             state="complete",
                                             action="retry"))
        rc, out, err = self.run_main("migration", "retry", "m1")
        self.assertEqual((2, ""), (rc, out))
        self.assertEqual("error: Migration m1 is complete: cannot retry "
                         "it.\n", err)

    def test_show_and_cancel(self):
        rc, out, _ = self.run_main("migration", "show", "m1")
        self.assertEqual((0, "queued"), (rc, json.loads(out)["state"]))
        self.api.get_migration.assert_called_once_with(SERVICE, "m1")
        rc, out, _ = self.run_main("migration", "cancel", "m1")
        self.assertEqual((0, "cancelled"), (rc, json.loads(out)["state"]))
        self.api.cancel_migration.assert_called_once_with(SERVICE, "m1")
        rc, _, err = self.run_main("migration", "show", "m9")
        self.assertEqual((2, "error: Migration m9 could not be found.\n"),
                         (rc, err))

    def test_wait(self):
        for last, code in (("complete", 0), ("failed", 1),
                           ("cancelled", 3)):
            self.engine(FakeEngine(walk("m1", last)))
            rc, out, err = self.run_main("migration", "wait", "m1")
            self.assertEqual(code, rc, err)
            self.assertEqual(last, json.loads(out)["state"])
            self.assertEqual(3, len(err.splitlines()))
        self.assertFalse(self.api.list_migrations.called)

    def test_wait_timeout(self):
        self.engine(FakeEngine([rec("m1", "queued")]))
        rc, out, err = self.run_main("migration", "wait", "m1", "--timeout",
                                     "3")
        self.assertEqual(4, rc)
        self.assertEqual("queued", json.loads(out)["state"])
        self.assertIn("(dtn-migrate-manage migration wait m1)", err)

    def test_wait_for_a_request(self):
        self.engine(FakeEngine(walk("m1"), walk("m2", "failed")))
        rc, out, _ = self.run_main("migration", "wait", "--request-id", RID)
        self.assertEqual(1, rc)
        self.assertEqual(["complete", "failed"],
                         [m["state"] for m in json.loads(out)])
        self.api.list_migrations.assert_called_with(SERVICE, request_id=RID)
        rc, _, err = self.run_main("migration", "wait", "--request-id",
                                   "0" * 32)
        self.assertEqual(2, rc)
        self.assertIn("has no migrations", err)

    def test_wait_needs_one_of_id_and_request(self):
        for args in ([], ["m1", "--request-id", RID]):
            rc, _, err = self.run_main("migration", "wait", *args)
            self.assertEqual(2, rc)
            self.assertIn("give a migration ID or --request-id", err)


class TestDeadline(testcase.TestCase):
    def test_deadline(self):
        # oslo.messaging retries connecting forever while the broker is
        # down, whatever the call's retry: every call has a deadline.
        api = mock.Mock()
        api.list_migrations.side_effect = lambda *a, **kw: time.sleep(5)
        api.get_migration.return_value = "m1"
        self.useFixture(fixtures.MockPatchObject(manage, "BUS_GRACE", 0.05))
        bounded = manage._Bounded(api, 0)
        start = time.monotonic()
        self.assertRaises(manage.BusTimeout, bounded.list_migrations, {})
        self.assertLess(time.monotonic() - start, 2)
        self.assertEqual("m1", bounded.get_migration({}, "m1"))
        time.sleep(0.1)     # the timer was stopped
