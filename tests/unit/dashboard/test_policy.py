"""Policy: the API's rules decide which actions a user sees."""

import os
from unittest import mock

from django.test.utils import override_settings
from django.urls import reverse
from openstack_auth import policy as auth_policy
import yaml

from dtn_migrate.dashboard import api
from dtn_migrate.dashboard import policy
from dtn_migrate import policies
from tests.unit.dashboard import base

INDEX = reverse("horizon:project:dtn_migrations:index")
POLICIES = reverse("horizon:project:dtn_policies:index")
CHECK = "openstack_auth.policy.check"
READER = [{"id": "3", "name": "reader"}]
MEMBER = [{"id": "2", "name": "member"}, {"id": "3", "name": "reader"}]
ADMIN = [{"id": "1", "name": "admin"}] + MEMBER
MIGRATE = reverse("horizon:project:dtn_migrations:migrate")
CREATE_POLICY = reverse("horizon:project:dtn_policies:create")


class DefaultPolicyFileTest(base.TestCase):

    def test_default_file_matches_the_api_rules(self):
        with open(policy.default_file(), encoding="utf-8") as f:
            on_disk = yaml.safe_load(f)
        self.assertEqual(policy.default_rules(), on_disk)
        self.assertEqual(
            sorted(r.name for r in policies.list_rules()),
            sorted(r["name"] for r in on_disk))
        by_name = {r["name"]: r for r in on_disk}
        for rule in policies.list_rules():
            self.assertEqual(rule.check_str,
                             by_name[rule.name]["check_str"])

    def test_settings_point_at_the_plugin_files(self):
        from django.conf import settings
        self.assertTrue(os.path.isfile(
            settings.POLICY_FILES[policy.SERVICE]))
        self.assertEqual(policy.default_file(),
                         settings.DEFAULT_POLICY_FILES[policy.SERVICE])

    def test_rule_names_exist(self):
        names = {r.name for r in policies.list_rules()}
        for rules in (policy.MIGRATION_CREATE, policy.MIGRATION_KEEP_ID,
                      policy.MIGRATION_VISIBILITY,
                      policy.MIGRATION_TARGET_PROJECT, policy.MIGRATION_LIST,
                      policy.MIGRATION_LIST_ALL, policy.MIGRATION_SHOW,
                      policy.MIGRATION_CANCEL, policy.MIGRATION_RETRY,
                      policy.PEER_LIST, policy.PEER_SHOW,
                      policy.POLICY_CREATE, policy.POLICY_LIST,
                      policy.POLICY_LIST_ALL, policy.POLICY_SHOW,
                      policy.POLICY_UPDATE, policy.POLICY_DELETE,
                      policy.POLICY_SYNC, policy.DRILL_START,
                      policy.DRILL_LIST, policy.DRILL_SHOW):
            for service, name in rules:
                self.assertEqual("dtn-migration", service)
                self.assertIn(name, names)


class _PolicyCase(base.TestCase):
    user_roles = MEMBER

    def forms(self):
        """The "Migrate" and "Create Policy" forms, as the user gets
        them.
        """
        with mock.patch.object(api, "peer_list",
                               return_value=base.peers()), \
                mock.patch("openstack_dashboard.api.glance."
                           "image_list_detailed",
                           return_value=([], False, False)):
            pages = [self.client.get(url) for url in (MIGRATE,
                                                      CREATE_POLICY)]
        for page in pages:
            self.assertContains(page, 'id="id_peer"')
        return pages

    def setUp(self):
        auth_policy.reset()
        self.addCleanup(auth_policy.reset)
        super().setUp()

    def _setup_user(self, **kwargs):
        kwargs.setdefault("roles", self.user_roles)
        super()._setup_user(**kwargs)


@override_settings(POLICY_CHECK_FUNCTION=CHECK)
class ReaderTest(_PolicyCase):
    user_roles = READER

    @mock.patch.object(api, "migration_list")
    def test_reader_sees_the_table_without_actions(self, mlist):
        mlist.return_value = base.migrations()
        res = self.client.get(INDEX)
        self.assertEqual(200, res.status_code)
        self.assertContains(res, 'id="migrations__row__m-run"')
        self.assertContains(res, 'data-progress="42.4"')
        self.assertNotContains(res, "migrations__action_migrate")
        self.assertNotContains(res, "__action_cancel")
        self.assertNotContains(res, "__action_retry")

    @mock.patch.object(api, "migration_list")
    def test_reader_sees_no_actions_column(self, mlist):
        # A reader may run no row action: no empty Actions column.
        mlist.return_value = base.migrations()
        res = self.client.get(INDEX)
        table = res.context["table"]
        self.assertNotIn("actions", table.columns)
        self.assertNotContains(res, ">Actions<")
        self.assertNotContains(res, "actions_column")

    @mock.patch.object(api, "migration_get")
    def test_reader_row_update_has_no_actions_cell(self, mget):
        mget.return_value = base.migration("m-run")
        res = self.client.get(INDEX, {"action": "row_update",
                                      "table": "migrations",
                                      "obj_id": "m-run"},
                              HTTP_X_REQUESTED_WITH="XMLHttpRequest")
        self.assertEqual(200, res.status_code)
        self.assertContains(res, 'id="migrations__row__m-run"')
        self.assertNotContains(res, "actions_column")

    @mock.patch.object(api, "migration_get")
    def test_reader_detail_without_actions(self, mget):
        mget.return_value = base.migration("m-run")
        res = self.client.get(reverse("horizon:project:dtn_migrations:"
                                      "detail", args=("m-run",)))
        self.assertEqual(200, res.status_code)
        self.assertNotContains(res, "__action_cancel")

    @mock.patch.object(api, "policy_list")
    def test_reader_sees_policies_without_actions(self, plist):
        plist.return_value = base.policies()
        res = self.client.get(POLICIES)
        self.assertEqual(200, res.status_code)
        self.assertContains(res, 'id="policies__row__p-ok"')
        self.assertContains(res, 'id="policies__row__p-rep"')
        self.assertNotContains(res, "policies__action_")
        self.assertNotContains(res, "__action_sync")
        self.assertNotContains(res, "__action_drill")
        self.assertNotContains(res, "__action_delete")

    @mock.patch.object(api, "drill_list")
    @mock.patch.object(api, "policy_images")
    @mock.patch.object(api, "policy_get")
    def test_reader_policy_detail_without_actions(self, pget, images,
                                                  drills):
        pget.return_value = base.policy("p-rep")
        images.return_value = base.policy_images()
        drills.return_value = base.drills()
        res = self.client.get(reverse("horizon:project:dtn_policies:"
                                      "detail", args=("p-rep",)))
        self.assertEqual(200, res.status_code)
        self.assertContains(res, 'id="drills__row__d-pass"')
        self.assertNotContains(res, "__action_")

    @mock.patch.object(api, "policy_list")
    @mock.patch.object(api, "policy_sync")
    def test_reader_cannot_post_a_sync(self, sync, plist):
        plist.return_value = base.policies()
        self.client.post(POLICIES, {"action": "policies__sync__p-ok"})
        sync.assert_not_called()

    def test_reader_cannot_open_the_form_action(self):
        req = self.factory.get("/")
        self.assertFalse(auth_policy.check(policy.MIGRATION_CREATE, req))
        self.assertTrue(auth_policy.check(policy.MIGRATION_LIST, req))
        self.assertTrue(auth_policy.check(policy.PEER_LIST, req))


@override_settings(POLICY_CHECK_FUNCTION=CHECK)
class MemberTest(_PolicyCase):

    @mock.patch.object(api, "migration_list")
    def test_member_sees_actions(self, mlist):
        mlist.return_value = base.migrations()
        res = self.client.get(INDEX)
        self.assertContains(res, 'id="migrations__action_migrate"')
        self.assertContains(res, 'id="migrations__row_m-run__action_cancel"')
        self.assertContains(res, 'id="migrations__row_m-fail__action_retry"')

    @mock.patch.object(api, "policy_list")
    def test_member_sees_policy_actions(self, plist):
        plist.return_value = base.policies()
        res = self.client.get(POLICIES)
        self.assertContains(res, 'id="policies__action_create"')
        self.assertContains(res, 'id="policies__row_p-ok__action_sync"')
        self.assertContains(res, 'id="policies__row_p-ok__action_delete"')
        self.assertContains(res, 'id="policies__row_p-rep__action_drill"')

    @mock.patch.object(api, "policy_list")
    def test_member_may_not_delete_a_replica_policy(self, plist):
        # Its loss is a failback's: dtn:policy:delete:non_primary.
        plist.return_value = base.policies()
        res = self.client.get(POLICIES)
        self.assertContains(res, 'id="policies__row_p-ok__action_delete"')
        self.assertNotContains(res, "policies__row_p-rep__action_delete")

    @mock.patch.object(api, "migration_list")
    def test_member_sees_the_actions_column(self, mlist):
        mlist.return_value = base.migrations()
        res = self.client.get(INDEX)
        self.assertIn("actions", res.context["table"].columns)
        self.assertContains(res, "actions_column")

    def test_member_forms_do_not_offer_kept_ids(self):
        for page in self.forms():
            self.assertNotContains(page, 'id="id_keep_id"')

    def test_member_migrate_form_offers_what_the_policy_allows(self):
        # dtn:migration:create:{visibility,target_project} are an
        # administrator's; --force is anyone's who may migrate.
        page = self.forms()[0]
        self.assertNotContains(page, 'id="id_visibility"')
        self.assertNotContains(page, 'id="id_target_project"')
        self.assertContains(page, 'id="id_force"')

    def test_member_has_no_admin_policies_panel(self):
        res = self.client.get(reverse("horizon:admin:dtn_policies:index"))
        self.assertNotEqual(200, res.status_code)

    def test_member_rules(self):
        req = self.factory.get("/")
        self.assertTrue(auth_policy.check(policy.MIGRATION_CREATE, req))
        self.assertFalse(auth_policy.check(policy.MIGRATION_LIST_ALL, req))

    def test_member_has_no_admin_panel(self):
        res = self.client.get(reverse("horizon:admin:dtn_migrations:index"))
        self.assertNotEqual(200, res.status_code)


@override_settings(POLICY_CHECK_FUNCTION=CHECK)
class AdminTest(_PolicyCase):
    user_roles = ADMIN

    @mock.patch.object(api, "policy_list")
    def test_admin_may_delete_a_replica_policy(self, plist):
        plist.return_value = base.policies()
        res = self.client.get(POLICIES)
        self.assertContains(res, 'id="policies__row_p-rep__action_delete"')

    def test_admin_forms_offer_kept_ids(self):
        for page in self.forms():
            self.assertContains(page, 'id="id_keep_id"')

    def test_admin_migrate_form_offers_every_option(self):
        page = self.forms()[0]
        for field in ("id_keep_id", "id_visibility", "id_target_project",
                      "id_force"):
            self.assertContains(page, 'id="%s"' % field)


@override_settings(POLICY_CHECK_FUNCTION=CHECK)
class NoServiceTest(_PolicyCase):
    with_service = False

    def test_panel_hidden_without_the_service(self):
        res = self.client.get(INDEX)
        self.assertNotEqual(200, res.status_code)

    @mock.patch.object(api, "peer_list")
    def test_menu_has_no_panel(self, plist):
        res = self.client.get(reverse("horizon:project:api_access:index"))
        self.assertNotContains(res, "/project/dtn_migrations/")
        self.assertNotContains(res, "Disaster Recovery")
