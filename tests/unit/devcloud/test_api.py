"""ApiServer's configuration and the personas' environments."""

import configparser
import json
import os

import fixtures

from devcloud import api
from devcloud import keystone

from tests.unit import testcase


class FakeKeystone:
    region = "RegionA"
    auth_url = "http://127.0.0.1:5000/v3"

    def __init__(self):
        self.made = []

    def service_user(self, name, roles):
        self.made.append((name, roles))
        return {"username": name, "password": "pw",
                "project_name": "service"}


USER = {"username": "alice", "password": "pw", "project_name": "demo"}


class TestOpenstackEnv(testcase.TestCase):

    def test_env_replaces_inherited_os_variables(self):
        env = api.openstack_env(FakeKeystone(), USER, base_env={
            "PATH": "/bin", "OS_CLOUD": "prod", "OS_TOKEN": "t"})
        self.assertEqual("/bin", env["PATH"])
        self.assertNotIn("OS_CLOUD", env)
        self.assertNotIn("OS_TOKEN", env)
        self.assertEqual("alice", env["OS_USERNAME"])
        self.assertEqual("demo", env["OS_PROJECT_NAME"])
        self.assertEqual("RegionA", env["OS_REGION_NAME"])
        self.assertEqual("http://127.0.0.1:5000/v3", env["OS_AUTH_URL"])

    def test_region_and_project_override(self):
        env = api.openstack_env(FakeKeystone(), USER, region="RegionB",
                                project_name="other", base_env={})
        self.assertEqual("RegionB", env["OS_REGION_NAME"])
        self.assertEqual("other", env["OS_PROJECT_NAME"])

    def test_clouds_yaml(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            "clouds.yaml")
        api.clouds_yaml(FakeKeystone(), {"alice": USER}, path)
        with open(path) as f:
            clouds = json.load(f)["clouds"]
        self.assertEqual("alice", clouds["alice"]["auth"]["username"])
        self.assertEqual("RegionA", clouds["alice"]["region_name"])


class TestApiServerConfig(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.ks = FakeKeystone()
        self.server = api.ApiServer(self.dir, self.ks, "rabbit://x/v",
                                    "sqlite:///db", port=1,
                                    extra_conf={"api": {"max_limit": 7}})

    def read(self, path):
        parser = configparser.ConfigParser(interpolation=None)
        parser.read(path)
        return parser

    def test_config_file(self):
        self.server._configure()
        conf = self.read(self.server.conf)
        self.assertEqual("rabbit://x/v", conf["DEFAULT"]["transport_url"])
        self.assertEqual("sqlite:///db", conf["database"]["connection"])
        self.assertEqual("keystone", conf["api"]["auth_strategy"])
        self.assertEqual("7", conf["api"]["max_limit"])
        self.assertEqual("dtn-migrate",
                         conf["keystone_authtoken"]["username"])
        self.assertEqual([("dtn-migrate", ("service",))], self.ks.made)

    def test_noauth_without_keystone(self):
        server = api.ApiServer(self.dir, None, "rabbit://x/v",
                               "sqlite:///db", name="n", port=1)
        server._configure()
        conf = self.read(server.conf)
        self.assertEqual("noauth2", conf["api"]["auth_strategy"])
        self.assertFalse(conf.has_section("keystone_authtoken"))

    def test_uwsgi_runs_the_project_venv(self):
        ini = self.read(self.server._write_uwsgi())["uwsgi"]
        self.assertEqual(api.MODULE, ini["module"])
        self.assertEqual(api.project_venv(), ini["home"])
        self.assertEqual("--config-file %s" % self.server.conf,
                         ini["pyargv"])
        self.assertIn("%s=%s" % (api.CONFIG_ENV, self.server.conf),
                      ini["env"])

    def test_other_servers_keep_the_clouds_venv(self):
        server = keystone.KeystoneServer(self.dir, port=2)
        ini = self.read(server._write_uwsgi())["uwsgi"]
        self.assertNotIn("pyargv", ini)
        self.assertTrue(ini["home"].endswith("venv-clouds") or
                        "DTN_CLOUDS_VENV" in os.environ)


class FakeApi:
    """Keystone's API as KeystoneServer._api sees it."""

    def __init__(self):
        self.calls = []
        self.users = {"admin": "admin-id"}

    def __call__(self, method, path, body=None, ok=(200, 201, 204)):
        self.calls.append((method, path))
        if method == "GET" and path.startswith("/users?"):
            name = path.split("name=")[1].split("&")[0]
            found = [{"id": self.users[name]}] if name in self.users else []
            return {"users": found}
        if method == "GET":
            kind = path.split("?")[0].strip("/")
            name = path.split("name=")[1].split("&")[0]
            return {kind: [{"id": "%s-id" % name}]}
        if method == "POST" and path == "/users":
            name = body["user"]["name"]
            self.users[name] = name + "-id"
            return {"user": {"id": self.users[name]}}
        return {}


class TestPersonas(testcase.TestCase):

    def test_roles_and_no_admin_password_change(self):
        ks = keystone.KeystoneServer(
            self.useFixture(fixtures.TempDir()).path, port=1)
        fake = ks._api = FakeApi()
        users = api.personas(ks)
        self.assertEqual({"admin", "alice", "bob", "rita"}, set(users))
        puts = {p for m, p in fake.calls if m == "PUT"}
        self.assertEqual({
            "/projects/demo-id/users/alice-id/roles/member-id",
            "/projects/demo-id/users/rita-id/roles/reader-id",
            "/projects/other-id/users/bob-id/roles/member-id",
            "/projects/demo-id/users/admin-id/roles/admin-id"}, puts)
        self.assertNotIn(("PATCH", "/users/admin-id"), fake.calls)
        self.assertEqual("admin", users["admin"]["project_name"])
        self.assertEqual(keystone.ADMIN_PASSWORD, users["admin"]["password"])
        self.assertEqual("demo", users["rita"]["project_name"])
