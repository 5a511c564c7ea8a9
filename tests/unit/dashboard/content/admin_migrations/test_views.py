"""The admin migrations panel: every project, with a project column."""

from unittest import mock

from django.urls import reverse
from openstack_dashboard.api import glance
from openstack_dashboard.api import keystone

from dtn_migrate.dashboard import api
from tests.unit.dashboard import base

INDEX = reverse("horizon:admin:dtn_migrations:index")


class AdminMigrationsViewTest(base.AdminTestCase):

    @mock.patch.object(keystone, "tenant_list")
    @mock.patch.object(api, "migration_list")
    def test_index_all_projects(self, mlist, tlist):
        mlist.return_value = base.migrations()
        tlist.return_value = (self.tenants.list(), False)
        res = self.client.get(INDEX)
        self.assertEqual(200, res.status_code)
        mlist.assert_called_once_with(mock.ANY, all_projects=True)
        table = res.context["table"]
        self.assertIn("project", table.columns)
        self.assertContains(res, 'id="migrations__row__m-run"')
        self.assertContains(
            res, reverse("horizon:admin:dtn_migrations:detail",
                         args=("m-run",)))
        self.assertNotContains(res, "migrations__action_migrate")
        project = self.tenants.get(id="1")
        self.assertContains(res, project.name)

    @mock.patch.object(keystone, "tenant_list")
    @mock.patch.object(api, "migration_list")
    def test_project_ids_when_keystone_fails(self, mlist, tlist):
        mlist.return_value = base.migrations("m-run")
        tlist.side_effect = Exception("keystone down")
        res = self.client.get(INDEX)
        self.assertEqual(200, res.status_code)
        row = res.context["table"].get_rows()[0]
        self.assertEqual("1", row.cells["project"].data)

    @mock.patch.object(glance, "image_get")
    @mock.patch.object(keystone, "tenant_list")
    @mock.patch.object(api, "migration_list")
    def test_direction_and_project_of_an_import(self, mlist, tlist, iget):
        project = self.tenants.get(id="1")
        imported = base.migration("m-done", id="m-in",
                                  direction="incoming", project_id=None,
                                  peer_image_id="local-img")
        waiting = base.migration("m-run", id="m-in2", direction="incoming",
                                 project_id=None, peer_image_id=None,
                                 image_id=None)
        mlist.return_value = [imported, waiting] + base.migrations("m-run")
        tlist.return_value = (self.tenants.list(), False)
        iget.return_value = mock.Mock(owner=project.id)
        res = self.client.get(INDEX)
        self.assertEqual(200, res.status_code)
        rows = {r.datum.id: r for r in res.context["table"].get_rows()}
        self.assertEqual("Incoming", rows["m-in"].cells["direction"].data)
        self.assertEqual("Outgoing", rows["m-run"].cells["direction"].data)
        self.assertEqual("%s (imported into)" % project.name,
                         rows["m-in"].cells["project"].data)
        self.assertEqual("Service project (import)",
                         rows["m-in2"].cells["project"].data)
        iget.assert_called_once_with(mock.ANY, "local-img")

    @mock.patch.object(glance, "image_get")
    @mock.patch.object(keystone, "tenant_list")
    @mock.patch.object(api, "migration_list")
    def test_import_project_when_glance_fails(self, mlist, tlist, iget):
        mlist.return_value = [base.migration(
            "m-done", direction="incoming", project_id=None)]
        tlist.return_value = ([], False)
        iget.side_effect = Exception("glance down")
        res = self.client.get(INDEX)
        self.assertEqual(200, res.status_code)
        row = res.context["table"].get_rows()[0]
        self.assertEqual("Service project (import)",
                         row.cells["project"].data)

    @mock.patch.object(api, "migration_get")
    def test_detail(self, mget):
        mget.return_value = base.migration("m-done")
        res = self.client.get(reverse("horizon:admin:dtn_migrations:detail",
                                      args=("m-done",)))
        self.assertEqual(200, res.status_code)
        self.assertContains(res, 'data-field="project_id"')

    @mock.patch.object(keystone, "tenant_list")
    @mock.patch.object(api, "migration_list")
    @mock.patch.object(api, "migration_retry")
    def test_retry(self, retry, mlist, tlist):
        mlist.return_value = base.migrations()
        tlist.return_value = ([], False)
        res = self.client.post(INDEX,
                               {"action": "migrations__retry__m-fail"})
        self.assertRedirectsNoFollow(res, INDEX)
        retry.assert_called_once_with(mock.ANY, "m-fail")
