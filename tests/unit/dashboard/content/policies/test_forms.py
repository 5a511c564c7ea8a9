"""The "Create Policy" form and its view."""

from unittest import mock

from django.urls import reverse

from dtn_migrate.client import exceptions as dtn_exc
from dtn_migrate.dashboard.content.policies import forms
from dtn_migrate.dashboard import api
from tests.unit.dashboard import base

INDEX = reverse("horizon:project:dtn_policies:index")
CREATE = reverse("horizon:project:dtn_policies:create")


class CreatePolicyFormTest(base.TestCase):

    def setUp(self):
        super().setUp()
        patcher = mock.patch.object(api, "peer_list")
        self.peer_list = patcher.start()
        self.peer_list.return_value = base.peers()
        patcher = mock.patch.object(api, "policy_create")
        self.create = patcher.start()
        self.create.return_value = base.policy("p-ok")

    def post(self, **changes):
        data = {"name": "gold", "peer": "cloud-b", "tags": "dr-gold",
                "properties": "", "mode": "manual", "schedule": "",
                "rpo_minutes": "30"}
        data.update(changes)
        return self.client.post(CREATE, data)

    def test_get(self):
        res = self.client.get(CREATE)
        self.assertEqual(200, res.status_code)
        self.assertTemplateUsed(res, "dtn_migrate/policies/create.html")
        for field in ("id_name", "id_peer", "id_tags", "id_properties",
                      "id_mode", "id_schedule", "id_rpo_minutes",
                      "id_keep_id"):
            self.assertContains(res, 'id="%s"' % field)
        self.assertContains(res, '<option value="cloud-b">cloud-b</option>',
                            html=True)
        self.assertContains(res, "cloud-c (unreachable)")
        self.assertEqual(60, res.context["form"].initial["rpo_minutes"])

    def test_post_tags(self):
        res = self.post(tags="dr-gold, db  dr-gold", keep_id="on")
        self.assertNoFormErrors(res)
        self.assertRedirectsNoFollow(res, INDEX)
        self.create.assert_called_once_with(
            mock.ANY, name="gold", peer="cloud-b", mode="manual",
            rpo_minutes=30, selector={"tags": ["dr-gold", "db"]},
            options={"keep_id": True})
        self.assertMessageCount(success=1)

    def test_post_properties_and_schedule(self):
        res = self.post(tags="", properties="tier = gold\n\nos=linux=6\n",
                        mode="scheduled", schedule=" 0 2 * * * ",
                        description="nightly")
        self.assertNoFormErrors(res)
        self.create.assert_called_once_with(
            mock.ANY, name="gold", peer="cloud-b", mode="scheduled",
            rpo_minutes=30, description="nightly", schedule="0 2 * * *",
            selector={"properties": {"tier": "gold", "os": "linux=6"}},
            options={"keep_id": False})

    def test_schedule_only_for_the_scheduled_mode(self):
        self.post(schedule="0 2 * * *", mode="continuous")
        self.assertNotIn("schedule", self.create.call_args.kwargs)

    def test_scheduled_needs_a_schedule(self):
        res = self.post(mode="scheduled")
        self.assertFormErrors(res, 1)
        self.create.assert_not_called()

    def test_needs_tags_or_properties(self):
        res = self.post(tags=" , ")
        self.assertFormErrors(res, 1)
        self.create.assert_not_called()

    def test_bad_property_line(self):
        res = self.post(properties="tier")
        self.assertFormErrors(res, 1)
        self.assertContains(res, "Line 1 is not key=value")
        self.create.assert_not_called()

    def test_rpo_bounds(self):
        for value in ("0", "525601", "x"):
            res = self.post(rpo_minutes=value)
            self.assertFormErrors(res, 1)
        self.create.assert_not_called()

    def test_unknown_peer(self):
        res = self.post(peer="cloud-z")
        self.assertFormErrors(res, 1)

    def test_api_error_becomes_message(self):
        self.create.side_effect = dtn_exc.HttpConflict(
            "Protection policy gold exists", http_status=409)
        res = self.post()
        self.assertRedirectsNoFollow(res, INDEX)
        self.assertMessageCount(error=1)

    def test_peer_list_error(self):
        self.peer_list.side_effect = dtn_exc.CommunicationError("refused")
        res = self.client.get(CREATE)
        self.assertEqual(200, res.status_code)
        self.assertContains(res, "No peer available")
        self.assertMessageCount(res, error=1)


class HelpersTest(base.TestCase):

    def test_split_tags(self):
        self.assertEqual(["a", "b", "c"], forms.split_tags("a, b c,,a"))
        self.assertEqual([], forms.split_tags(None))

    def test_parse_properties(self):
        self.assertEqual({"a": "1", "b": ""},
                         forms.parse_properties(" a = 1 \n\nb=\n"))
        self.assertRaises(ValueError, forms.parse_properties, "=x")
        self.assertRaises(ValueError, forms.parse_properties, "a")
