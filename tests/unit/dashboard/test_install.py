"""The installer and the enabled files."""

import io
import os
import runpy
import shutil
import tempfile

from django.conf import settings

from dtn_migrate.client import exceptions as dtn_exc
from dtn_migrate.dashboard import install

from tests.unit import testcase

ENABLED = [
    "_1800_dtn_migrate_project_panel_group.py",
    "_1810_dtn_migrate_project_migrations_panel.py",
    "_1820_dtn_migrate_project_peers_panel.py",
    "_1830_dtn_migrate_project_policies_panel.py",
    "_2800_dtn_migrate_admin_panel_group.py",
    "_2810_dtn_migrate_admin_migrations_panel.py",
    "_2820_dtn_migrate_admin_peers_panel.py",
    "_2830_dtn_migrate_admin_policies_panel.py",
]
SNIPPET = "_1800_dtn_migrate_settings.py"


class InstallTest(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.root)

    def listing(self, subdir):
        path = os.path.join(self.root, "local", subdir)
        return sorted(f for f in os.listdir(path) if f.endswith(".py"))

    def test_install_and_uninstall(self):
        out = io.StringIO()
        written = install.install(self.root, out=out)
        self.assertEqual(len(ENABLED) + 1, len(written))
        self.assertEqual(ENABLED, self.listing("enabled"))
        self.assertEqual([SNIPPET], self.listing("local_settings.d"))
        self.assertIn("installed", out.getvalue())
        # Idempotent.
        install.install(self.root, out=io.StringIO())
        self.assertEqual(ENABLED, self.listing("enabled"))
        removed = install.uninstall(self.root, out=io.StringIO())
        self.assertEqual(len(written), len(removed))
        self.assertEqual([], self.listing("enabled"))
        self.assertEqual([], self.listing("local_settings.d"))

    def test_main(self):
        self.assertEqual(0, install.main(
            ["--openstack-dashboard", self.root]))
        self.assertEqual(ENABLED, self.listing("enabled"))
        self.assertEqual(0, install.main(
            ["--openstack-dashboard", self.root, "--uninstall"]))
        self.assertEqual([], self.listing("enabled"))

    def test_main_missing_dir(self):
        self.assertRaises(SystemExit, install.main,
                          ["--openstack-dashboard",
                           os.path.join(self.root, "nope")])

    def test_default_dir_is_the_importable_dashboard(self):
        import openstack_dashboard
        self.assertEqual(os.path.dirname(openstack_dashboard.__file__),
                         install.default_dashboard_dir())

    def test_snippet_sets_policy_and_customization(self):
        names = {"POLICY_FILES": {}, "DEFAULT_POLICY_FILES": {},
                 "ANGULAR_FEATURES": {"images_panel": True},
                 "HORIZON_CONFIG": {}}
        path = os.path.join(install.SETTINGS_DIR, SNIPPET)
        result = runpy.run_path(path, init_globals=names)
        self.assertTrue(os.path.isfile(
            result["POLICY_FILES"]["dtn-migration"]))
        self.assertTrue(os.path.isfile(
            result["DEFAULT_POLICY_FILES"]["dtn-migration"]))
        self.assertFalse(result["ANGULAR_FEATURES"]["images_panel"])
        self.assertEqual("dtn_migrate.dashboard.customization",
                         result["HORIZON_CONFIG"]["customization_module"])

    def test_snippet_keeps_a_deployment_customization(self):
        names = {"POLICY_FILES": {}, "DEFAULT_POLICY_FILES": {},
                 "ANGULAR_FEATURES": {},
                 "HORIZON_CONFIG": {"customization_module": "site.custom"}}
        path = os.path.join(install.SETTINGS_DIR, SNIPPET)
        result = runpy.run_path(path, init_globals=names)
        self.assertEqual("site.custom",
                         result["HORIZON_CONFIG"]["customization_module"])


class EnabledTest(testcase.TestCase):

    def test_exceptions_are_mapped(self):
        exceptions = settings.HORIZON_CONFIG["exceptions"]
        self.assertIn(dtn_exc.HttpUnauthorized, exceptions["unauthorized"])
        self.assertIn(dtn_exc.HttpNotFound, exceptions["not_found"])
        self.assertIn(dtn_exc.ClientException, exceptions["recoverable"])

    def test_app_installed_once(self):
        self.assertEqual(1, settings.INSTALLED_APPS.count(
            "dtn_migrate.dashboard"))

    def test_panels_configured(self):
        panels = {(c.get("PANEL_DASHBOARD"), c.get("PANEL"))
                  for c in settings.HORIZON_CONFIG["panel_customization"]
                  if c.get("PANEL")}
        for item in (("project", "dtn_migrations"), ("project", "dtn_peers"),
                     ("project", "dtn_policies"),
                     ("admin", "dtn_migrations"), ("admin", "dtn_peers"),
                     ("admin", "dtn_policies")):
            self.assertIn(item, panels)
