"""The API's harness: ApiServer under uwsgi with the project's venv,
the Keystone personas and the ``dtn-migration`` catalog entry.

The application served is tests/functional/devcloud/echo_app.py (the
real API has its own tests in tests/functional/api): it reads the
configuration file ApiServer wrote and validates tokens with
keystonemiddleware as the ``dtn-migrate`` service user, so what it
answers is what Keystone says of each persona.
"""

import json
import os
import subprocess
import sys

import requests

from devcloud import _base as devcloud_base
from devcloud import api as devcloud_api
from tests.functional.devcloud import harness as dc

OPENSTACK = os.path.join(os.path.dirname(sys.executable), "openstack")


class EchoServer(devcloud_api.ApiServer):
    module = "tests.functional.devcloud.echo_app:application"


class TestApiHarness(dc.DevcloudTestCase):

    def setUp(self):
        super().setUp()
        self.ks = self.keystone(name="ks-api", region="RegionA")
        self.users = devcloud_api.personas(self.ks)
        self.api = self._started(EchoServer(
            self.workdir, self.ks, "rabbit://guest:guest@127.0.0.1/x",
            "sqlite:////nonexistent/db", name="a"))

    def whoami(self, user):
        token = user.session().get_token()
        resp = requests.get(self.api.endpoint + "/",
                            headers={"X-Auth-Token": token}, timeout=30)
        self.assertEqual(200, resp.status_code, resp.text)
        return resp.json()

    def test_config_and_venv(self):
        resp = requests.get(self.api.endpoint + "/", timeout=30)
        self.assertEqual(401, resp.status_code)
        body = resp.json()
        self.assertEqual("rabbit://guest:guest@127.0.0.1/x",
                         body["transport_url"])
        self.assertEqual("sqlite:////nonexistent/db", body["database"])
        self.assertEqual("keystone", body["auth_strategy"])
        self.assertEqual(sys.prefix, body["prefix"])
        self.assertEqual(["--config-file", self.api.conf], body["argv"][1:])

    def test_personas_and_implied_roles(self):
        seen = {name: self.whoami(user)
                for name, user in self.users.items()}
        self.assertEqual(["member", "reader"], seen["alice"]["roles"])
        self.assertEqual(["reader"], seen["rita"]["roles"])
        self.assertEqual(["member", "reader"], seen["bob"]["roles"])
        # Recent Keystones also imply ``manager`` from admin.
        self.assertEqual({"admin", "member", "reader"},
                         {"admin", "member", "reader"}.intersection(
                             seen["admin"]["roles"]))
        demo = self.ks.ensure_project("demo")
        other = self.ks.ensure_project("other")
        self.assertEqual(demo, seen["alice"]["project_id"])
        self.assertEqual(demo, seen["rita"]["project_id"])
        self.assertEqual(other, seen["bob"]["project_id"])
        self.assertNotIn(seen["admin"]["project_id"], (demo, other))
        self.assertEqual(len(seen), len({s["user_id"]
                                         for s in seen.values()}))
        # personas() again changes nothing (no password reset: tokens
        # already issued stay valid).
        token = self.users["alice"].session().get_token()
        devcloud_api.personas(self.ks)
        resp = requests.get(self.api.endpoint + "/",
                            headers={"X-Auth-Token": token}, timeout=30)
        self.assertEqual(200, resp.status_code, resp.text)

    def test_catalog_and_openstack_env(self):
        env = self.api.openstack_env(self.users["alice"])
        out = subprocess.run(
            [OPENSTACK, "catalog", "show", "dtn-migration", "-f", "json"],
            env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(0, out.returncode, out.stderr)
        entry = json.loads(out.stdout)
        self.assertEqual("dtn-migration", entry["type"])
        self.assertEqual("dtn-migrate", entry["name"])
        endpoints = entry["endpoints"]
        text = json.dumps(endpoints)
        for interface in ("public", "internal", "admin"):
            self.assertIn(interface, text)
        self.assertIn(self.api.endpoint, text)
        self.assertIn("RegionA", text)

    def test_restart_keeps_port_and_catalog(self):
        port = self.api.port
        self.api.stop(kill=True)
        self.assertIsNone(devcloud_base.http_status(self.api.endpoint))
        self.api.start()
        self.assertEqual(port, self.api.port)
        self.assertEqual(["member", "reader"],
                         self.whoami(self.users["alice"])["roles"])
