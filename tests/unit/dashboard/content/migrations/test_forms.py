"""The "Migrate to peer cloud" form and its view."""

from unittest import mock

from django.urls import reverse
from openstack_dashboard.api import glance

from dtn_migrate.client import exceptions as dtn_exc
from dtn_migrate.dashboard.content.migrations import forms
from dtn_migrate.dashboard import api
from tests.unit.dashboard import base

INDEX = reverse("horizon:project:dtn_migrations:index")
MIGRATE = reverse("horizon:project:dtn_migrations:migrate")


class MigrateFormTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.images = [i for i in self.images.list()
                       if i.status == "active"]
        patcher = mock.patch.object(glance, "image_list_detailed")
        self.image_list = patcher.start()
        self.image_list.return_value = (self.images, False, False)
        patcher = mock.patch.object(api, "peer_list")
        self.peer_list = patcher.start()
        self.peer_list.return_value = base.peers()
        patcher = mock.patch.object(api, "migration_create")
        self.create = patcher.start()

    def test_get(self):
        res = self.client.get(MIGRATE)
        self.assertEqual(200, res.status_code)
        self.assertTemplateUsed(res, "dtn_migrate/migrations/migrate.html")
        for field in ("id_images", "id_tag", "id_peer", "id_keep_id",
                      "id_mode"):
            self.assertContains(res, 'id="%s"' % field)
        self.assertContains(res, '<option value="cloud-b">cloud-b</option>',
                            html=True)
        self.assertContains(res, "cloud-c (unreachable)")
        self.image_list.assert_called_once_with(
            mock.ANY, filters={"status": "active"})

    def test_get_preselects_image(self):
        image = self.images[0]
        res = self.client.get(MIGRATE, {"image_id": image.id})
        form = res.context["form"]
        self.assertEqual([image.id], form.initial["images"])
        self.assertContains(res, "?image_id=%s" % image.id)

    def test_preselected_image_not_listed_is_kept(self):
        res = self.client.get(MIGRATE, {"image_id": "not-on-page-1"})
        choices = dict(res.context["form"].fields["images"].choices)
        self.assertIn("not-on-page-1", choices)

    def test_post_images(self):
        image = self.images[0]
        self.create.return_value = [base.migration("m-run")]
        res = self.client.post(MIGRATE, {
            "images": [image.id], "peer": "cloud-b", "keep_id": "on",
            "mode": "serial"})
        self.assertNoFormErrors(res)
        self.assertRedirectsNoFollow(res, INDEX)
        self.create.assert_called_once_with(
            mock.ANY, "cloud-b", images=[image.id], tag=None,
            options={"keep_id": True, "mode": "serial"})
        self.assertMessageCount(success=1)

    def test_get_offers_the_cli_options(self):
        # What `openstack dtn migrate` has: --visibility,
        # --target-project, --force (and --keep-id).
        res = self.client.get(MIGRATE)
        for field in ("id_visibility", "id_target_project", "id_force"):
            self.assertContains(res, 'id="%s"' % field)
        choices = [c[0] for c in
                   res.context["form"].fields["visibility"].choices]
        self.assertEqual(["", "public", "shared", "community"], choices)

    def test_post_options(self):
        image = self.images[0]
        self.create.return_value = [base.migration("m-run")]
        res = self.client.post(MIGRATE, {
            "images": [image.id], "peer": "cloud-b", "mode": "pipelined",
            "visibility": "shared", "target_project": " p-42 ",
            "force": "on"})
        self.assertNoFormErrors(res)
        self.create.assert_called_once_with(
            mock.ANY, "cloud-b", images=[image.id], tag=None,
            options={"keep_id": False, "mode": "pipelined",
                     "visibility": "shared", "target_project": "p-42",
                     "force": True})

    def test_started_message_shortens_long_names(self):
        image = self.images[0]
        long_name = "n" * 300
        self.create.return_value = [base.migration("m-run",
                                                   image_name=long_name)]
        with mock.patch.object(forms.messages, "success") as success:
            self.client.post(MIGRATE, {"images": [image.id],
                                       "peer": "cloud-b",
                                       "mode": "pipelined"})
        [message] = [c.args[1] for c in success.call_args_list]
        self.assertIn("%s…(300 characters)" % ("n" * 64), message)
        self.assertNotIn(long_name, message)

    def test_post_bad_visibility(self):
        res = self.client.post(MIGRATE, {
            "images": [self.images[0].id], "peer": "cloud-b",
            "mode": "pipelined", "visibility": "everyone"})
        self.assertFormErrors(res, 1)
        self.create.assert_not_called()

    def test_long_image_names_are_shortened_with_a_title(self):
        image = mock.Mock(id="img-long", name="long")
        image.name = "n" * 300
        self.image_list.return_value = ([image], False, False)
        res = self.client.get(MIGRATE)
        label = "%s…(300 characters) (%s)" % ("n" * 64, image.id)
        self.assertContains(res, 'title="%s"' % label)
        self.assertContains(res, ">%s</option>" % label)
        self.assertNotContains(res, "n" * 300)
        self.assertRegex(res.content.decode(),
                         r'<select name="images"[^>]*class="[^"]*'
                         r'\bdtn-image-list\b')

    def test_post_tag(self):
        self.create.return_value = base.migrations()
        res = self.client.post(MIGRATE, {"tag": " dr ", "peer": "cloud-b",
                                         "mode": "pipelined"})
        self.assertRedirectsNoFollow(res, INDEX)
        self.create.assert_called_once_with(
            mock.ANY, "cloud-b", images=None, tag="dr",
            options={"keep_id": False, "mode": "pipelined"})

    def test_post_needs_images_or_tag(self):
        res = self.client.post(MIGRATE, {"peer": "cloud-b",
                                         "mode": "pipelined"})
        self.assertFormErrors(res, 1)
        self.create.assert_not_called()

    def test_post_not_both(self):
        res = self.client.post(MIGRATE, {
            "images": [self.images[0].id], "tag": "dr", "peer": "cloud-b",
            "mode": "pipelined"})
        self.assertFormErrors(res, 1)

    def test_post_unknown_peer(self):
        res = self.client.post(MIGRATE, {
            "images": [self.images[0].id], "peer": "cloud-z",
            "mode": "pipelined"})
        self.assertFormErrors(res, 1)

    def test_api_error_becomes_message(self):
        self.create.side_effect = dtn_exc.HttpBadRequest(
            "Peer cloud-b is not reachable", http_status=400)
        res = self.client.post(MIGRATE, {
            "images": [self.images[0].id], "peer": "cloud-b",
            "mode": "pipelined"})
        self.assertRedirectsNoFollow(res, INDEX)
        self.assertMessageCount(error=1)

    def test_peer_list_error(self):
        self.peer_list.side_effect = dtn_exc.CommunicationError("refused")
        res = self.client.get(MIGRATE)
        self.assertEqual(200, res.status_code)
        self.assertContains(res, "No peer available")
        self.assertMessageCount(res, error=1)


class MigrateFormUnitTest(base.TestCase):

    def test_nothing_matched_warns(self):
        with mock.patch.object(api, "migration_create", return_value=[]), \
                mock.patch.object(forms, "image_choices", return_value=[]), \
                mock.patch.object(forms, "peer_choices",
                                  return_value=[("cloud-b", "cloud-b")]), \
                mock.patch.object(forms.messages, "warning") as warning:
            form = forms.MigrateForm(self.request, data={
                "tag": "none", "peer": "cloud-b", "mode": "pipelined"})
            self.assertTrue(form.is_valid())
            self.assertTrue(form.handle(self.request, form.cleaned_data))
        warning.assert_called_once_with(self.request, mock.ANY)
