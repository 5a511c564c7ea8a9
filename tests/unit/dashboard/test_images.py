"""The "Migrate to Peer Cloud" row action of Horizon's Images table."""

import copy
from unittest import mock

from django.test.utils import override_settings
from django.urls import reverse
from openstack_auth import policy as auth_policy
from openstack_dashboard.api import glance
from openstack_dashboard.api import keystone
from openstack_dashboard.dashboards.project.images.images import \
    tables as image_tables

from dtn_migrate.dashboard import images
from tests.unit.dashboard import base

IMAGES = reverse("horizon:project:images:index")
MIGRATE = reverse("horizon:project:dtn_migrations:migrate")


def action_id(image):
    return "images__row_%s__action_dtn_migrate" % image.id


class _ImagesCase(base.TestCase):
    user_roles = None

    def setUp(self):
        auth_policy.reset()
        self.addCleanup(auth_policy.reset)
        super().setUp()
        patcher = mock.patch.object(glance, "image_list_detailed")
        self.image_list = patcher.start()
        self.listed = list(self.images.list())
        queued = copy.copy(self.listed[-1])
        queued.id = "queued-image"
        queued.status = "queued"
        self.listed.append(queued)
        self.image_list.return_value = (self.listed, False, False)
        patcher = mock.patch.object(keystone, "tenant_list")
        patcher.start().return_value = ([self.tenant], False)

    def _setup_user(self, **kwargs):
        if self.user_roles is not None:
            kwargs.setdefault("roles", self.user_roles)
        super()._setup_user(**kwargs)

    def active(self):
        return [i for i in self.listed if i.status == "active"]


class RegisterTest(base.TestCase):

    def test_registered_by_the_customization_module(self):
        table = image_tables.ImagesTable
        self.assertIn(images.MigrateImage, table._meta.row_actions)
        self.assertIn(images.ACTION_NAME, table.base_actions)

    def test_register_is_idempotent(self):
        table = image_tables.ImagesTable
        before = tuple(table._meta.row_actions)
        images.register(table)
        self.assertEqual(before, tuple(table._meta.row_actions))

    def test_register_places_before_delete(self):
        class Table(image_tables.ImagesTable):
            class Meta(object):
                name = "scratch"
                row_actions = (image_tables.EditImage,
                               image_tables.DeleteImage)
        images.register(Table)
        self.assertEqual([image_tables.EditImage, images.MigrateImage,
                          image_tables.DeleteImage],
                         list(Table._meta.row_actions))
        images.unregister(Table)
        self.assertNotIn(images.ACTION_NAME, Table.base_actions)


class ImagesActionTest(_ImagesCase):

    def test_action_links_to_the_form(self):
        res = self.client.get(IMAGES)
        self.assertEqual(200, res.status_code)
        image = self.active()[0]
        self.assertContains(res, 'id="%s"' % action_id(image))
        self.assertContains(res, 'href="%s?image_id=%s"'
                            % (MIGRATE, image.id))

    def test_not_on_inactive_images(self):
        res = self.client.get(IMAGES)
        others = [i for i in self.listed if i.status != "active"]
        self.assertTrue(others)
        for image in others:
            self.assertNotContains(res, action_id(image))


class NoServiceImagesTest(_ImagesCase):
    with_service = False

    def test_no_action_without_the_service(self):
        res = self.client.get(IMAGES)
        self.assertEqual(200, res.status_code)
        self.assertNotContains(res, "__action_dtn_migrate")


@override_settings(POLICY_CHECK_FUNCTION="openstack_auth.policy.check")
class ReaderImagesTest(_ImagesCase):
    user_roles = [{"id": "3", "name": "reader"}]

    def test_no_action_for_a_reader(self):
        res = self.client.get(IMAGES)
        self.assertEqual(200, res.status_code)
        self.assertNotContains(res, "__action_dtn_migrate")


@override_settings(POLICY_CHECK_FUNCTION="openstack_auth.policy.check")
class MemberImagesTest(_ImagesCase):
    user_roles = [{"id": "2", "name": "member"},
                  {"id": "3", "name": "reader"}]

    def test_action_for_a_member(self):
        res = self.client.get(IMAGES)
        self.assertContains(res, action_id(self.active()[0]))
