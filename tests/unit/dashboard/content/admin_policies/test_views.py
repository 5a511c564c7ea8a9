"""The admin protection policies panel: every project, with a project
column.
"""

from unittest import mock

from django.urls import reverse
from openstack_dashboard.api import keystone

from dtn_migrate.dashboard import api
from tests.unit.dashboard import base

INDEX = reverse("horizon:admin:dtn_policies:index")


class AdminPoliciesViewTest(base.AdminTestCase):

    @mock.patch.object(keystone, "tenant_list")
    @mock.patch.object(api, "policy_list")
    def test_index_all_projects(self, plist, tlist):
        plist.return_value = base.policies()
        tlist.return_value = (self.tenants.list(), False)
        res = self.client.get(INDEX)
        self.assertEqual(200, res.status_code)
        plist.assert_called_once_with(mock.ANY, all_projects=True)
        table = res.context["table"]
        self.assertEqual("project", list(table.columns)[1])
        self.assertContains(res, 'id="policies__row__p-ok"')
        self.assertContains(res, reverse("horizon:admin:dtn_policies:detail",
                                         args=("p-ok",)))
        self.assertNotContains(res, "policies__action_create")
        self.assertContains(res, 'id="policies__row_p-ok__action_sync"')
        self.assertContains(res, self.tenants.get(id="1").name)

    @mock.patch.object(keystone, "tenant_list")
    @mock.patch.object(api, "policy_list")
    def test_project_ids_when_keystone_fails(self, plist, tlist):
        plist.return_value = base.policies("p-ok")
        tlist.side_effect = Exception("keystone down")
        res = self.client.get(INDEX)
        row = res.context["table"].get_rows()[0]
        self.assertEqual("1", row.cells["project"].data)

    @mock.patch.object(api, "drill_list", return_value=[])
    @mock.patch.object(api, "policy_images", return_value=[])
    @mock.patch.object(api, "policy_get")
    def test_detail(self, pget, _images, _drills):
        pget.return_value = base.policy(
            "p-ok", images={"replicated": 1})
        _images.return_value = base.policy_images()
        url = reverse("horizon:admin:dtn_policies:detail", args=("p-ok",))
        res = self.client.get(url)
        self.assertEqual(200, res.status_code)
        self.assertContains(res, 'data-field="project_id"')
        self.assertContains(res, reverse(
            "horizon:admin:dtn_migrations:detail", args=("m-done",)))
        self.assertContains(res, 'action="%s"' % url)

    @mock.patch.object(api, "drill_list", return_value=[])
    @mock.patch.object(api, "policy_images", return_value=[])
    @mock.patch.object(api, "policy_get")
    @mock.patch.object(api, "policy_delete")
    def test_delete_from_detail(self, delete, pget, _images, _drills):
        pget.return_value = base.policy("p-ok")
        url = reverse("horizon:admin:dtn_policies:detail", args=("p-ok",))
        res = self.client.post(url, {"action": "policies__delete__p-ok"})
        self.assertRedirectsNoFollow(res, INDEX)
        delete.assert_called_once_with(mock.ANY, "p-ok")
