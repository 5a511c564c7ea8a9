"""Views of the project's protection policies panel."""

from unittest import mock

from django.urls import reverse

from dtn_migrate.client import exceptions as dtn_exc
from dtn_migrate.dashboard import api
from tests.unit.dashboard import base

INDEX = reverse("horizon:project:dtn_policies:index")


def detail(pid):
    return reverse("horizon:project:dtn_policies:detail", args=(pid,))


class IndexViewTest(base.TestCase):

    @mock.patch.object(api, "policy_list")
    def test_index_lists_policies(self, plist):
        plist.return_value = base.policies()
        res = self.client.get(INDEX)
        self.assertEqual(200, res.status_code)
        self.assertTemplateUsed(res, "dtn_migrate/policies/index.html")
        plist.assert_called_once_with(mock.ANY, all_projects=False)
        self.assertEqual(3, len(res.context["table"].data))
        self.assertContains(res, 'id="policies__row__p-ok"')
        self.assertContains(res, 'id="policies__action_create"')
        self.assertContains(res, 'id="policies__row_p-ok__action_sync"')
        self.assertContains(res, 'id="policies__row_p-ok__action_delete"')
        self.assertNotContains(res, "policies__row_p-ok__action_drill")
        self.assertContains(res, 'id="policies__row_p-rep__action_drill"')
        self.assertNotContains(res, "policies__row_p-rep__action_sync")
        self.assertContains(res, detail("p-ok"))
        for text in ("OK", "Breached", "Not computed", "1h 30m",
                     "Manual", "Continuous"):
            self.assertContains(res, text)

    @mock.patch.object(api, "policy_list")
    def test_hostile_names_are_escaped(self, plist):
        hostile = '<script>alert("x")</script>'
        plist.return_value = [base.policy("p-ok", name=hostile,
                                          peer=hostile)]
        res = self.client.get(INDEX)
        self.assertEqual(200, res.status_code)
        self.assertNotContains(res, hostile)
        self.assertContains(res, "&lt;script&gt;")

    @mock.patch.object(api, "policy_list")
    def test_index_api_error_is_a_message(self, plist):
        plist.side_effect = dtn_exc.HttpServiceUnavailable(
            "The engine is not answering", http_status=503)
        res = self.client.get(INDEX)
        self.assertEqual(200, res.status_code)
        self.assertEqual([], list(res.context["table"].data))
        self.assertMessageCount(res, error=1)
        self.assertNotContains(res, "Traceback")

    @mock.patch.object(api, "policy_get")
    def test_row_update(self, pget):
        pget.return_value = base.policy(
            "p-ok", images={"replicated": 3, "pending": 0})
        res = self.client.get(INDEX, {"action": "row_update",
                                      "table": "policies",
                                      "obj_id": "p-ok"},
                              HTTP_X_REQUESTED_WITH="XMLHttpRequest")
        self.assertEqual(200, res.status_code)
        self.assertContains(res, 'id="policies__row__p-ok"')
        self.assertContains(res, "status_up")
        pget.assert_called_once_with(mock.ANY, "p-ok")

    @mock.patch.object(api, "policy_list")
    @mock.patch.object(api, "policy_sync")
    def test_sync(self, sync, plist):
        plist.return_value = base.policies()
        sync.return_value = (base.policy("p-ok"),
                             [base.migration("m-run")])
        res = self.client.post(INDEX, {"action": "policies__sync__p-ok"})
        self.assertRedirectsNoFollow(res, INDEX)
        sync.assert_called_once_with(mock.ANY, "p-ok")
        self.assertMessageCount(success=1, info=1)

    @mock.patch.object(api, "policy_list")
    @mock.patch.object(api, "policy_sync")
    def test_sync_nothing_to_do(self, sync, plist):
        plist.return_value = base.policies()
        sync.return_value = (base.policy("p-ok"), [])
        res = self.client.post(INDEX, {"action": "policies__sync__p-ok"})
        self.assertRedirectsNoFollow(res, INDEX)
        self.assertMessageCount(success=1, info=1)

    @mock.patch.object(api, "policy_list")
    @mock.patch.object(api, "policy_sync")
    def test_sync_error_is_a_message(self, sync, plist):
        plist.return_value = base.policies()
        sync.side_effect = dtn_exc.HttpConflict(
            "Policy p-ok is disabled", http_status=409)
        res = self.client.post(INDEX, {"action": "policies__sync__p-ok"})
        self.assertRedirectsNoFollow(res, INDEX)
        self.assertMessageCount(error=1)

    @mock.patch.object(api, "policy_list")
    @mock.patch.object(api, "policy_sync")
    def test_no_sync_of_a_replica_policy(self, sync, plist):
        plist.return_value = base.policies()
        res = self.client.post(INDEX, {"action": "policies__sync__p-rep"})
        self.assertRedirectsNoFollow(res, INDEX)
        sync.assert_not_called()
        self.assertMessageCount(error=1)

    @mock.patch.object(api, "policy_list")
    @mock.patch.object(api, "policy_delete")
    def test_delete(self, delete, plist):
        plist.return_value = base.policies()
        res = self.client.post(INDEX, {"action": "policies__delete__p-ok"})
        self.assertRedirectsNoFollow(res, INDEX)
        delete.assert_called_once_with(mock.ANY, "p-ok")
        self.assertMessageCount(success=1)

    @mock.patch.object(api, "policy_list")
    @mock.patch.object(api, "policy_delete")
    def test_delete_error_is_a_message(self, delete, plist):
        plist.return_value = base.policies()
        delete.side_effect = dtn_exc.HttpNotFound(
            "Protection policy p-ok could not be found", http_status=404)
        res = self.client.post(INDEX, {"action": "policies__delete__p-ok"})
        self.assertRedirectsNoFollow(res, INDEX)
        self.assertMessageCount(error=1)

    @mock.patch.object(api, "policy_list")
    @mock.patch.object(api, "drill_start")
    def test_start_drill(self, start, plist):
        plist.return_value = base.policies()
        start.return_value = base.drills("d-run")[0]
        res = self.client.post(INDEX, {"action": "policies__drill__p-rep"})
        self.assertRedirectsNoFollow(res, INDEX)
        start.assert_called_once_with(mock.ANY, "p-rep")
        self.assertMessageCount(success=1)


class DetailViewTest(base.TestCase):

    def setUp(self):
        super().setUp()
        for name, value in (("policy_images", base.policy_images()),
                            ("drill_list", [])):
            patcher = mock.patch.object(api, name, return_value=value)
            setattr(self, name, patcher.start())
            self.addCleanup(patcher.stop)

    @mock.patch.object(api, "policy_get")
    def test_detail(self, pget):
        pget.return_value = base.policy("p-ok")
        res = self.client.get(detail("p-ok"))
        self.assertEqual(200, res.status_code)
        self.assertTemplateUsed(res, "dtn_migrate/policies/detail.html")
        self.assertContains(res, 'data-field="peer">cloud-b<')
        self.assertContains(res, 'data-field="rpo_state">OK<')
        self.assertContains(res, 'data-field="rpo_target">30<')
        self.assertContains(res, 'data-field="mode">Manual<')
        self.assertContains(res, "tags=[&quot;dr-gold&quot;]")
        self.assertContains(res, '2 Replicated')
        self.policy_images.assert_called_once_with(mock.ANY, "p-ok")
        self.drill_list.assert_called_once_with(mock.ANY, policy_id="p-ok")
        images = res.context["images_table"].data
        self.assertEqual(["img-1", "img-3"], [i.id for i in images])
        self.assertContains(res, reverse(
            "horizon:project:dtn_migrations:detail", args=("m-done",)))
        self.assertContains(res, "peer unreachable")
        # The actions of a primary policy, posted to this page.
        self.assertContains(res, 'action="%s"' % detail("p-ok"))
        self.assertContains(res, 'id="policies__row_p-ok__action_sync"')
        self.assertNotContains(res, "__action_drill")
        self.assertContains(res, "dtn-drill-help")

    @mock.patch.object(api, "policy_get")
    def test_replica_detail_offers_a_drill(self, pget):
        pget.return_value = base.policy("p-rep")
        self.drill_list.return_value = base.drills()
        res = self.client.get(detail("p-rep"))
        self.assertEqual(200, res.status_code)
        self.assertContains(res, 'id="policies__row_p-rep__action_drill"')
        self.assertNotContains(res, "__action_sync")
        self.assertNotContains(res, "dtn-drill-help")
        drills = res.context["drills_table"]
        self.assertEqual(["d-run", "d-pass"], [d.id for d in drills.data])
        self.assertContains(res, 'id="drills__row__d-run"')
        self.assertContains(res, "2 / 0")
        self.assertContains(res, "1m 15s")
        self.assertContains(res, 'data-field="role">Replica<')

    @mock.patch.object(api, "policy_get")
    @mock.patch.object(api, "drill_start")
    def test_start_drill_from_detail_stays_there(self, start, pget):
        pget.return_value = base.policy("p-rep")
        start.return_value = base.drills("d-run")[0]
        res = self.client.post(detail("p-rep"),
                               {"action": "policies__drill__p-rep"})
        self.assertRedirectsNoFollow(res, detail("p-rep"))
        start.assert_called_once_with(mock.ANY, "p-rep")

    @mock.patch.object(api, "policy_get")
    @mock.patch.object(api, "drill_start")
    def test_start_drill_error_is_a_message(self, start, pget):
        pget.return_value = base.policy("p-rep")
        start.side_effect = dtn_exc.HttpNotFound(
            "Protection policy p-rep could not be found", http_status=404)
        res = self.client.post(detail("p-rep"),
                               {"action": "policies__drill__p-rep"})
        self.assertRedirectsNoFollow(res, detail("p-rep"))
        self.assertMessageCount(error=1)

    @mock.patch.object(api, "policy_get")
    @mock.patch.object(api, "policy_delete")
    def test_delete_from_detail_goes_to_the_index(self, delete, pget):
        pget.return_value = base.policy("p-ok")
        res = self.client.post(detail("p-ok"),
                               {"action": "policies__delete__p-ok"})
        self.assertRedirectsNoFollow(res, INDEX)
        delete.assert_called_once_with(mock.ANY, "p-ok")

    @mock.patch.object(api, "drill_get")
    @mock.patch.object(api, "policy_get")
    def test_drill_row_update(self, pget, dget):
        pget.return_value = base.policy("p-rep")
        dget.return_value = base.drills("d-pass")[0]
        res = self.client.get(detail("p-rep"), {
            "action": "row_update", "table": "drills", "obj_id": "d-pass"},
            HTTP_X_REQUESTED_WITH="XMLHttpRequest")
        self.assertEqual(200, res.status_code)
        self.assertContains(res, 'id="drills__row__d-pass"')
        dget.assert_called_once_with(mock.ANY, "d-pass")

    @mock.patch.object(api, "policy_get")
    def test_detail_escapes_hostile_names(self, pget):
        hostile = '<img src=x onerror="alert(1)">'
        pget.return_value = base.policy("p-ok", name=hostile,
                                        description=hostile,
                                        last_error=hostile)
        self.policy_images.return_value = [api.PolicyImage(dict(
            base.POLICY_IMAGES[1], image_name=hostile, error=hostile))]
        res = self.client.get(detail("p-ok"))
        self.assertEqual(200, res.status_code)
        self.assertNotContains(res, hostile)
        self.assertContains(res, "&lt;img src=x")

    @mock.patch.object(api, "policy_get")
    def test_detail_not_found(self, pget):
        pget.side_effect = dtn_exc.HttpNotFound(
            "Protection policy nope could not be found", http_status=404)
        res = self.client.get(detail("nope"))
        self.assertRedirectsNoFollow(res, INDEX)
        self.assertMessageCount(error=1)

    @mock.patch.object(api, "policy_get")
    def test_images_and_drills_errors_are_messages(self, pget):
        pget.return_value = base.policy("p-ok")
        self.policy_images.side_effect = dtn_exc.CommunicationError(
            "refused")
        self.drill_list.side_effect = dtn_exc.HttpForbidden(
            "not allowed", http_status=403)
        res = self.client.get(detail("p-ok"))
        self.assertEqual(200, res.status_code)
        self.assertMessageCount(res, error=2)
        self.assertNotContains(res, "Traceback")
