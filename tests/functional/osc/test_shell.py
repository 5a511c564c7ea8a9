"""The real ``openstack`` executable loads the plugin and runs the
``openstack dtn`` commands against the fake API (subprocesses, with the
caller's OS_* variables unset; the fake API is an HTTP server of this
process).
"""

import json
import os
import pathlib
import signal
import subprocess
import sys


# Imported for its rule: no skip under DTN_REQUIRE_ALL=1.
from tests.functional import base  # noqa: F401
from tests.unit.client import fakeapi
from tests.unit import testcase

OPENSTACK = pathlib.Path(sys.executable).parent / "openstack"
COMMANDS = ["dtn drill list", "dtn drill show", "dtn drill start",
            "dtn failback", "dtn failover", "dtn migrate",
            "dtn migration cancel", "dtn migration list",
            "dtn migration retry", "dtn migration show", "dtn migration wait",
            "dtn peer list", "dtn peer show", "dtn policy create",
            "dtn policy delete", "dtn policy image list", "dtn policy list",
            "dtn policy set", "dtn policy show", "dtn policy sync",
            "dtn replica list"]
TIMEOUT = 120


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
    env.update(extra)
    return env


class ShellTestCase(testcase.TestCase):

    def setUp(self):
        super().setUp()
        if not OPENSTACK.exists():
            self.skipTest("no openstack executable next to %s"
                          % sys.executable)

    def openstack(self, *args, env=None):
        return subprocess.run([str(OPENSTACK)] + list(args),
                              env=env or clean_env(), capture_output=True,
                              text=True, timeout=TIMEOUT)


class TestRegistered(ShellTestCase):

    def test_dtn_help_lists_the_commands(self):
        out = self.openstack("dtn", "--help")
        self.assertEqual(0, out.returncode, out.stderr)
        listed = [line.strip() for line in out.stdout.splitlines()
                  if line.strip().startswith("dtn ")]
        self.assertEqual(COMMANDS, listed)

    def test_command_list_group(self):
        out = self.openstack("command", "list", "--group", "dtn",
                             "-f", "json")
        self.assertEqual(0, out.returncode, out.stderr)
        self.assertEqual([{"Command Group": "openstack.dtn.v1",
                           "Commands": COMMANDS}], json.loads(out.stdout))

    def test_command_help(self):
        out = self.openstack("help", "dtn", "migrate")
        self.assertEqual(0, out.returncode, out.stderr)
        for option in ("--peer", "--tag", "--property", "--keep-id",
                       "--visibility", "--target-project", "--request-id",
                       "--wait"):
            self.assertIn(option, out.stdout)


def _default_sigint():
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class TestAgainstAPI(ShellTestCase):

    def setUp(self):
        super().setUp()
        self.api = self.useFixture(fakeapi.FakeAPI())
        self.api.peers["cloud-b"] = fakeapi.peer("cloud-b")
        self.token_args = ["--os-auth-type", "admin_token",
                           "--os-endpoint", self.api.url,
                           "--os-token", fakeapi.TOKEN]
        self.password_args = [
            "--os-auth-url", self.api.keystone_url,
            "--os-identity-api-version", "3", "--os-username", "admin",
            "--os-password", "secret", "--os-project-name", "admin",
            "--os-user-domain-id", "default",
            "--os-project-domain-id", "default",
            "--os-region-name", "RegionOne"]

    def test_endpoint_with_token(self):
        rec = self.api.add(state="running")
        out = self.openstack(*self.token_args, "dtn", "migration", "list",
                             "-f", "value", "-c", "ID", "-c", "State")
        self.assertEqual(0, out.returncode, out.stderr)
        self.assertEqual("%s running" % rec["id"], out.stdout.strip())
        # --os-endpoint with --os-token implies the admin_token type.
        out = self.openstack("--os-endpoint", self.api.url, "--os-token",
                             fakeapi.TOKEN, "dtn", "migration", "show",
                             rec["id"], "-f", "value", "-c", "state")
        self.assertEqual(0, out.returncode, out.stderr)
        self.assertEqual("running", out.stdout.strip())

    def test_catalog_interface(self):
        self.api.catalog = [("public", "RegionOne", "http://192.0.2.1:9/"),
                            ("internal", "RegionOne", self.api.url)]
        out = self.openstack(*self.password_args, "--os-interface",
                             "internal", "dtn", "peer", "show", "cloud-b",
                             "-f", "json")
        self.assertEqual(0, out.returncode, out.stderr)
        self.assertEqual("cloud-b", json.loads(out.stdout)["name"])
        self.assertEqual(1, len(self.api.tokens))

    def test_dtn_endpoint_overrides_catalog(self):
        self.api.catalog = [("public", "RegionOne", "http://192.0.2.1:9/")]
        out = self.openstack(*self.password_args, "--os-dtn-endpoint",
                             self.api.url, "dtn", "peer", "list",
                             "-f", "value", "-c", "Name")
        self.assertEqual(0, out.returncode, out.stderr)
        self.assertEqual("cloud-b", out.stdout.strip())
        out = self.openstack(*self.password_args, "dtn", "peer", "list",
                             env=clean_env(OS_DTN_ENDPOINT=self.api.url))
        self.assertEqual(0, out.returncode, out.stderr)
        self.assertIn("cloud-b", out.stdout)

    def test_no_endpoint_in_catalog(self):
        self.api.catalog = [("public", "RegionOne", "http://192.0.2.1:9/")]
        out = self.openstack(*self.password_args, "--os-interface",
                             "admin", "dtn", "peer", "list")
        self.assertEqual(1, out.returncode)
        self.assertIn("No dtn-migration endpoint", out.stderr)
        self.assertNotIn("Traceback", out.stderr)

    def test_api_version_from_environment(self):
        out = self.openstack(*self.token_args, "dtn", "peer", "list",
                             env=clean_env(OS_DTN_API_VERSION="1"))
        self.assertEqual(0, out.returncode, out.stderr)
        out = self.openstack(*self.token_args, "dtn", "peer", "list",
                             env=clean_env(OS_DTN_API_VERSION="9"))
        self.assertNotEqual(0, out.returncode)
        self.assertIn("dtn API version 9 is not in supported versions: 1",
                      out.stderr)

    def test_migrate_wait_failure_exits_1(self):
        def script(records):
            for rec in records:
                self.api.script[rec["id"]] = [
                    {"state": "running", "stage": "export", "size": 1000,
                     "bytes": {"export": 500, "transfer": 0, "import": 0},
                     "progress": 0.2, "rate": 100.0, "eta": 5},
                    {"state": "failed", "error": "ImportNotAllowed: "
                     "project p9 is not allowed for peer cloud-a"}]
        self.api.on_create = script
        image = "6a3c1e0e-5f3a-4b5e-9b8a-1c2d3e4f5a6b"
        out = self.openstack(*self.token_args, "dtn", "migrate", image,
                             "--peer", "cloud-b", "--target-project", "p9",
                             "--wait", "--interval", "0.1", "-f", "json")
        self.assertEqual(1, out.returncode, out.stderr)
        self.assertEqual(["failed"],
                         [r["State"] for r in json.loads(out.stdout)])
        self.assertIn("export 50% 100 B/s", out.stderr)
        self.assertIn("ETA 00:05 (export 500 B of 1000 B)", out.stderr)
        self.assertIn("failed: ImportNotAllowed: project p9 is not allowed",
                      out.stderr)
        self.assertNotIn("Traceback", out.stderr)

    def test_bad_request_is_a_clear_error(self):
        out = self.openstack(*self.token_args, "dtn", "migration", "show",
                             "f" * 32)
        self.assertEqual(1, out.returncode)
        self.assertEqual("Migration %s could not be found. (HTTP 404)"
                         % ("f" * 32), out.stderr.strip())

    def test_ctrl_c_stops_waiting(self):
        rec = self.api.add(state="running", stage="transfer", size=100,
                           progress=0.5)
        proc = subprocess.Popen(
            [str(OPENSTACK)] + self.token_args +
            ["dtn", "migration", "wait", rec["id"], "--interval", "0.2"],
            env=clean_env(), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
            # As from a shell: a child inherits an ignored SIGINT, and a
            # test run earlier in this worker may have left it ignored
            # (the command then waited on for 120 s in a CI run).
            preexec_fn=_default_sigint)
        self.addCleanup(proc.kill)
        first = proc.stderr.readline()          # the first progress line
        self.assertIn("running", first)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=TIMEOUT)
        self.assertEqual(130, proc.returncode, err)
        self.assertIn("Stopped waiting; the migrations go on", err)
        self.assertEqual("running", self.api.migrations[rec["id"]]["state"])
        self.assertEqual([], [r for r in self.api.requests
                              if r["method"] == "POST"])
