"""HorizonServer's settings module, environment and command line."""

import os
import sys
import types
from unittest import mock

import fixtures

from devcloud import _base
from devcloud import horizon

from tests.unit import testcase


class FakeKeystone:
    auth_url = "http://127.0.0.1:5000/v3"


def _fake_horizon_settings():
    """Stand-ins for ``openstack_dashboard.settings`` (what the written
    module star-imports): Horizon's own HORIZON_CONFIG keys survive.
    """
    settings = types.ModuleType("openstack_dashboard.settings")
    settings.HORIZON_CONFIG = {"ajax_poll_interval": 2500,
                               "user_home": "home"}
    settings.DEBUG = True
    settings.__all__ = ["HORIZON_CONFIG", "DEBUG"]
    package = types.ModuleType("openstack_dashboard")
    package.settings = settings
    return {"openstack_dashboard": package,
            "openstack_dashboard.settings": settings}


class TestHorizonSettings(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.server = horizon.HorizonServer(
            self.dir, FakeKeystone(), port=8123,
            horizon_config={"auto_fade_alerts": {"types": []}},
            extra_settings={"OPENSTACK_KEYSTONE_DEFAULT_ROLE": "member"})

    def load(self, server=None):
        """Run the written settings module; its names."""
        server = server or self.server
        server._configure()
        with open(server.settings_file) as f:
            source = f.read()
        namespace = {"__name__": horizon.SETTINGS_MODULE}
        with mock.patch.dict(sys.modules, _fake_horizon_settings()):
            exec(compile(source, server.settings_file, "exec"), namespace)
        return namespace

    def test_written_where_django_finds_it(self):
        self.load()
        self.assertEqual(os.path.join(self.server.dir,
                                      horizon.SETTINGS_MODULE + ".py"),
                         self.server.settings_file)
        env = self.server.environment()
        self.assertEqual(horizon.SETTINGS_MODULE,
                         env["DJANGO_SETTINGS_MODULE"])
        self.assertEqual(self.server.dir,
                         env["PYTHONPATH"].split(os.pathsep)[0])

    def test_dev_cloud_settings(self):
        s = self.load()
        self.assertIs(False, s["DEBUG"])
        self.assertEqual("http://127.0.0.1:5000/v3",
                         s["OPENSTACK_KEYSTONE_URL"])
        self.assertEqual(self.server.secret_key, s["SECRET_KEY"])
        self.assertGreaterEqual(len(s["SECRET_KEY"]), 50)
        self.assertIn("127.0.0.1", s["ALLOWED_HOSTS"])
        self.assertIs(False, s["COMPRESS_OFFLINE"])
        # Compressed assets go to the server's directory, never into the
        # installed Horizon.
        self.assertTrue(s["COMPRESS_ROOT"].startswith(self.server.dir))
        self.assertTrue(os.path.isdir(s["COMPRESS_ROOT"]))
        self.assertEqual("member", s["OPENSTACK_KEYSTONE_DEFAULT_ROLE"])

    def test_cache_never_culls_compressed_assets(self):
        cache = self.load()["CACHES"]["default"]
        self.assertIn("LocMemCache", cache["BACKEND"])
        # Django's default (300) culls the compressor's entries.
        self.assertGreater(cache["OPTIONS"]["MAX_ENTRIES"], 10000)

    def test_horizon_config_merged(self):
        config = self.load()["HORIZON_CONFIG"]
        self.assertEqual(horizon.POLL_INTERVAL_MS,
                         config["ajax_poll_interval"])
        self.assertEqual({"types": []}, config["auto_fade_alerts"])
        self.assertEqual("home", config["user_home"])

    def test_poll_interval(self):
        server = horizon.HorizonServer(self.dir, FakeKeystone(), name="b",
                                       poll_interval=300)
        self.assertEqual(300, self.load(server)["HORIZON_CONFIG"][
            "ajax_poll_interval"])

    def test_logging_to_the_server_log(self):
        logging = self.load()["LOGGING"]
        self.assertEqual(self.server.log,
                         logging["handlers"]["file"]["filename"])
        for name in ("horizon", "openstack_auth", "dtn_migrate"):
            self.assertEqual(["file"],
                             logging["loggers"][name]["handlers"])
        self.assertIn(self.server.log, self.server._logs())

    def test_secret_key_per_server(self):
        other = horizon.HorizonServer(self.dir, FakeKeystone(), name="b")
        self.assertNotEqual(self.server.secret_key, other.secret_key)

    def test_command(self):
        cmd = self.server.command()
        self.assertEqual(["-m", "django", "runserver"], cmd[1:4])
        self.assertIn("--insecure", cmd)
        self.assertIn("--noreload", cmd)
        self.assertEqual("127.0.0.1:8123", cmd[-1])
        self.assertEqual("http://127.0.0.1:8123/auth/login/",
                         self.server.login_url)

    def test_install_plugin(self):
        with mock.patch.object(_base, "run") as run:
            self.server.install_plugin()
        cmd = run.call_args[0][0]
        self.assertEqual([self.server.python, "-m", horizon.INSTALLER],
                         cmd)
        self.assertEqual(self.server.install_log, run.call_args[0][1])
