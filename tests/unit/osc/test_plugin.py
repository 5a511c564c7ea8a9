"""The OSC plugin module: options, and make_client on a real osc-lib
ClientManager (catalog from the fake Keystone, or an endpoint given).
"""

import argparse

import fixtures
from openstack import config as os_config
from osc_lib import clientmanager
from osc_lib import exceptions

from dtn_migrate.client import client as dtn_client
from dtn_migrate.osc import plugin
from tests.unit.client import fakeapi
from tests.unit import testcase


def manager(version="1", **kwargs):
    loader = os_config.OpenStackConfig(load_yaml_config=False,
                                       load_envvars=False)
    cloud = loader.get_one(**kwargs)
    mgr = clientmanager.ClientManager(cli_options=cloud,
                                      api_version={"dtn": version})
    # As the openstack shell does before a command that needs auth.
    mgr._auth_required = True
    mgr.setup_auth()
    return mgr


class TestOptions(testcase.TestCase):

    def parse(self, argv=()):
        parser = plugin.build_option_parser(argparse.ArgumentParser())
        return parser.parse_args(list(argv))

    def test_defaults_from_environment(self):
        self.useFixture(fixtures.EnvironmentVariable(
            "OS_DTN_API_VERSION", "1"))
        self.useFixture(fixtures.EnvironmentVariable(
            "OS_DTN_ENDPOINT", "http://dtn.example:8779"))
        args = self.parse()
        self.assertEqual("1", args.os_dtn_api_version)
        self.assertEqual("http://dtn.example:8779",
                         args.os_dtn_migration_endpoint_override)

    def test_options_beat_environment(self):
        self.useFixture(fixtures.EnvironmentVariable(
            "OS_DTN_ENDPOINT", "http://dtn.example:8779"))
        args = self.parse(["--os-dtn-endpoint", "http://other:1",
                           "--os-dtn-api-version", "1"])
        self.assertEqual("http://other:1",
                         args.os_dtn_migration_endpoint_override)

    def test_unset(self):
        self.useFixture(fixtures.EnvironmentVariable("OS_DTN_API_VERSION"))
        self.useFixture(fixtures.EnvironmentVariable("OS_DTN_ENDPOINT"))
        args = self.parse()
        self.assertIsNone(args.os_dtn_api_version)
        self.assertIsNone(args.os_dtn_migration_endpoint_override)

    def test_versions(self):
        self.assertEqual("dtn", plugin.API_NAME)
        self.assertEqual("os_dtn_api_version", plugin.API_VERSION_OPTION)
        self.assertTrue(plugin.check_api_version("1"))
        self.assertFalse(plugin.check_api_version("2"))


class TestMakeClient(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.api = self.useFixture(fakeapi.FakeAPI())
        self.api.peers["cloud-b"] = fakeapi.peer("cloud-b")

    def password(self, **kwargs):
        return manager(auth_type="password", auth={
            "auth_url": self.api.keystone_url, "username": "admin",
            "password": "secret", "project_name": "admin",
            "user_domain_id": "default", "project_domain_id": "default"},
            **kwargs)

    def test_admin_token_endpoint(self):
        mgr = manager(auth_type="admin_token", auth={
            "endpoint": self.api.url, "token": fakeapi.TOKEN})
        client = plugin.make_client(mgr)
        self.assertIsInstance(client, dtn_client.Client)
        self.assertEqual(self.api.url + "/v1", client.endpoint)
        self.assertEqual(["cloud-b"],
                         [p["name"] for p in client.peers.list()])

    def test_catalog_with_interface_and_region(self):
        self.api.catalog = [
            ("public", "RegionOne", "http://192.0.2.1:9/"),
            ("internal", "RegionOne", self.api.url),
            ("internal", "RegionTwo", "http://192.0.2.2:9/")]
        client = plugin.make_client(self.password(
            interface="internal", region_name="RegionOne"))
        self.assertEqual(self.api.url + "/v1", client.endpoint)
        self.assertEqual(["cloud-b"],
                         [p["name"] for p in client.peers.list()])
        # It authenticated with Keystone, then used the token.
        self.assertEqual("secret", self.api.tokens[0]["auth"]["identity"][
            "password"]["user"]["password"])
        self.assertEqual(fakeapi.TOKEN,
                         self.api.requests[-1]["headers"]["X-Auth-Token"])

    def test_endpoint_override_beats_catalog(self):
        self.api.catalog = [("public", "RegionOne", "http://192.0.2.1:9/")]
        client = plugin.make_client(self.password(
            dtn_migration_endpoint_override=self.api.url + "/v1/"))
        self.assertEqual(self.api.url + "/v1", client.endpoint)
        self.assertEqual(["cloud-b"],
                         [p["name"] for p in client.peers.list()])

    def test_no_endpoint(self):
        self.api.catalog = [("public", "RegionOne", "http://192.0.2.1:9/")]
        exc = self.assertRaises(exceptions.EndpointNotFound,
                                plugin.make_client,
                                self.password(region_name="Elsewhere"))
        self.assertIn("--os-dtn-endpoint", str(exc))
        self.assertIn("dtn-migration", str(exc))

    def test_unsupported_version(self):
        mgr = manager(version="7", auth_type="admin_token", auth={
            "endpoint": self.api.url, "token": fakeapi.TOKEN})
        self.assertRaises(exceptions.UnsupportedVersion, plugin.make_client,
                          mgr)
