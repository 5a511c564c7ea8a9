"""Views of the project's migrations panel."""

from unittest import mock

from django.urls import reverse

from dtn_migrate.client import exceptions as dtn_exc
from dtn_migrate.dashboard import api
from tests.unit.dashboard import base

INDEX = reverse("horizon:project:dtn_migrations:index")


def detail(mid):
    return reverse("horizon:project:dtn_migrations:detail", args=(mid,))


class IndexViewTest(base.TestCase):

    @mock.patch.object(api, "migration_list")
    def test_index_lists_migrations(self, mlist):
        mlist.return_value = base.migrations()
        res = self.client.get(INDEX)
        self.assertEqual(200, res.status_code)
        self.assertTemplateUsed(res, "dtn_migrate/migrations/index.html")
        mlist.assert_called_once_with(mock.ANY, all_projects=False)
        self.assertEqual(3, len(res.context["table"].data))
        self.assertContains(res, 'id="migrations__row__m-run"')
        self.assertContains(res, 'data-progress="42.4"')
        self.assertContains(res, 'id="migrations__action_migrate"')
        self.assertContains(res, 'id="migrations__row_m-run__action_cancel"')
        self.assertContains(res, 'id="migrations__row_m-fail__action_retry"')
        self.assertNotContains(res, "migrations__row_m-done__action_")

    @mock.patch.object(api, "migration_list")
    def test_hostile_names_are_escaped(self, mlist):
        hostile = '<script>alert("x")</script>'
        mlist.return_value = [base.migration(
            "m-fail", image_name=hostile, peer=hostile, error=hostile)]
        res = self.client.get(INDEX)
        self.assertEqual(200, res.status_code)
        self.assertNotContains(res, hostile)
        self.assertContains(res, "&lt;script&gt;")
        # In the cut cells' titles too.
        self.assertNotContains(res, 'title="<')

    @mock.patch.object(api, "migration_list")
    def test_index_api_error_is_a_message(self, mlist):
        mlist.side_effect = dtn_exc.HttpServiceUnavailable(
            "The engine is not answering", http_status=503)
        res = self.client.get(INDEX)
        self.assertEqual(200, res.status_code)
        self.assertEqual([], list(res.context["table"].data))
        self.assertMessageCount(res, error=1)
        self.assertNotContains(res, "Traceback")

    @mock.patch.object(api, "migration_list")
    def test_server_filter_by_state(self, mlist):
        mlist.return_value = base.migrations("m-run")
        res = self.client.post(INDEX, {
            "migrations__filter__q_field": "state",
            "migrations__filter__q": "running"}, follow=True)
        self.assertEqual(200, res.status_code)
        mlist.assert_called_with(mock.ANY, all_projects=False,
                                 state="running")

    @mock.patch.object(api, "migration_list")
    def test_server_filter_by_peer(self, mlist):
        mlist.return_value = []
        self.client.post(INDEX, {"migrations__filter__q_field": "peer",
                                 "migrations__filter__q": "cloud-b"},
                         follow=True)
        mlist.assert_called_with(mock.ANY, all_projects=False,
                                 peer="cloud-b")

    @mock.patch.object(api, "migration_get")
    def test_row_update(self, mget):
        mget.return_value = base.migration("m-run", progress=0.75)
        res = self.client.get(INDEX, {"action": "row_update",
                                      "table": "migrations",
                                      "obj_id": "m-run"},
                              HTTP_X_REQUESTED_WITH="XMLHttpRequest")
        self.assertEqual(200, res.status_code)
        self.assertContains(res, 'data-progress="75.0"')
        self.assertContains(res, 'id="migrations__row__m-run"')
        mget.assert_called_once_with(mock.ANY, "m-run")

    @mock.patch.object(api, "migration_list")
    @mock.patch.object(api, "migration_cancel")
    def test_cancel(self, cancel, mlist):
        mlist.return_value = base.migrations()
        res = self.client.post(INDEX,
                               {"action": "migrations__cancel__m-run"})
        self.assertRedirectsNoFollow(res, INDEX)
        cancel.assert_called_once_with(mock.ANY, "m-run")
        self.assertMessageCount(success=1)

    @mock.patch.object(api, "migration_list")
    @mock.patch.object(api, "migration_cancel")
    def test_cancel_conflict_message(self, cancel, mlist):
        mlist.return_value = base.migrations()
        cancel.side_effect = dtn_exc.HttpConflict(
            "Migration m-run is complete", http_status=409)
        res = self.client.post(INDEX,
                               {"action": "migrations__cancel__m-run"})
        self.assertRedirectsNoFollow(res, INDEX)
        self.assertMessageCount(error=1)

    @mock.patch.object(api, "migration_list")
    @mock.patch.object(api, "migration_retry")
    def test_retry(self, retry, mlist):
        mlist.return_value = base.migrations()
        res = self.client.post(INDEX,
                               {"action": "migrations__retry__m-fail"})
        self.assertRedirectsNoFollow(res, INDEX)
        retry.assert_called_once_with(mock.ANY, "m-fail")

    @mock.patch.object(api, "migration_list")
    @mock.patch.object(api, "migration_get")
    @mock.patch.object(api, "migration_cancel")
    def test_cancel_of_a_row_not_listed(self, cancel, mget, mlist):
        mlist.return_value = []
        mget.return_value = base.migration("m-run")
        res = self.client.post(INDEX,
                               {"action": "migrations__cancel__m-run"})
        self.assertRedirectsNoFollow(res, INDEX)
        cancel.assert_called_once_with(mock.ANY, "m-run")


class DetailViewTest(base.TestCase):

    @mock.patch.object(api, "migration_get")
    def test_detail(self, mget):
        mget.return_value = base.migration("m-done")
        res = self.client.get(detail("m-done"))
        self.assertEqual(200, res.status_code)
        self.assertTemplateUsed(res, "dtn_migrate/migrations/detail.html")
        self.assertContains(res, 'data-field="peer_image_id">peer-2<')
        self.assertContains(res, 'data-field="peer_image_hash"')
        self.assertContains(res, "deadbeef")
        self.assertContains(res, 'data-field="verified"')
        self.assertContains(res, ">yes<")
        self.assertContains(res, 'data-field="state">Complete<')
        self.assertContains(res, "Stage Timeline")
        stages = res.context["stages_table"].data
        self.assertEqual(["export", "transfer", "import"],
                         [s.name for s in stages])
        self.assertEqual(10.0, stages[0].duration)
        self.assertIsNone(stages[2].started)
        self.assertEqual(6, len(res.context["events_table"].data))
        self.assertContains(res, 'id="stages"')
        self.assertContains(res, 'id="events"')
        self.assertContains(res, 'data-live="false"')

    @mock.patch.object(api, "migration_get")
    def test_detail_hashes_on_one_line(self, mget):
        sha512 = "ab" * 64
        mget.return_value = base.migration(
            "m-done", os_hash_value=sha512, peer_image_hash=sha512)
        res = self.client.get(detail("m-done"))
        for key in ("os_hash_value", "peer_image_hash"):
            self.assertContains(
                res, '<dd data-field="%s"><span class="dtn-ellipsis" '
                     'title="%s">%s</span></dd>' % (key, sha512, sha512),
                html=True)
        self.assertNotContains(res, 'data-field="os_hash_value" style=')

    @mock.patch.object(api, "migration_get")
    def test_detail_stage_of_a_failure(self, mget):
        mget.return_value = base.migration("m-fail", events=[
            {"stage": "import", "event": "failed", "message": "refused",
             "bytes": None, "created_at": "2026-11-25T04:00:30.000000Z"}])
        res = self.client.get(detail("m-fail"))
        self.assertContains(res, 'data-field="stage">Import (failed)<')

    @mock.patch.object(api, "migration_get")
    def test_detail_escapes_hostile_names(self, mget):
        hostile = '<img src=x onerror="alert(1)">'
        mget.return_value = base.migration(
            "m-fail", image_name=hostile, peer=hostile, error=hostile,
            events=[{"stage": "transfer", "event": "failed",
                     "message": hostile, "bytes": None,
                     "created_at": "2026-11-25T05:00:00.000000Z"}])
        res = self.client.get(detail("m-fail"))
        self.assertEqual(200, res.status_code)
        self.assertNotContains(res, hostile)
        self.assertContains(res, "&lt;img src=x")

    @mock.patch.object(api, "migration_get")
    def test_detail_actions(self, mget):
        mget.return_value = base.migration("m-run")
        res = self.client.get(detail("m-run"))
        self.assertContains(res, 'id="migrations__row_m-run__action_cancel"')
        self.assertContains(res, 'action="%s"' % INDEX)
        self.assertContains(res, 'data-live="true"')
        self.assertContains(res, 'data-field="verified"')

    @mock.patch.object(api, "migration_get")
    def test_detail_not_found(self, mget):
        mget.side_effect = dtn_exc.HttpNotFound(
            "Migration nope could not be found", http_status=404)
        res = self.client.get(detail("nope"))
        self.assertRedirectsNoFollow(res, INDEX)
        self.assertMessageCount(error=1)

    @mock.patch.object(api, "migration_get")
    def test_detail_unreachable_api(self, mget):
        mget.side_effect = dtn_exc.CommunicationError("Connection refused")
        res = self.client.get(detail("m-run"))
        self.assertRedirectsNoFollow(res, INDEX)
