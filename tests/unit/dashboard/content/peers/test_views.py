"""The peers pages (project and admin)."""

from unittest import mock

from django.urls import reverse

from dtn_migrate.client import exceptions as dtn_exc
from dtn_migrate.dashboard import api
from tests.unit.dashboard import base

PEERS = reverse("horizon:project:dtn_peers:index")
ADMIN_PEERS = reverse("horizon:admin:dtn_peers:index")


class PeersViewTest(base.TestCase):

    @mock.patch.object(api, "peer_list")
    def test_index(self, plist):
        plist.return_value = base.peers()
        res = self.client.get(PEERS)
        self.assertEqual(200, res.status_code)
        self.assertTemplateUsed(res, "dtn_migrate/peers/index.html")
        self.assertContains(res, 'id="peers__row__cloud-b"')
        self.assertContains(res, "1.2 ms")
        self.assertContains(res, "8.0 MiB/s")
        self.assertContains(res, "192.0.2.2:9000")
        self.assertContains(res, "connection refused")
        table = res.context["table"]
        self.assertEqual(
            ["name", "address", "reachable", "rtt", "throughput",
             "last_transfer", "checked_at", "error"],
            list(table.columns))

    @mock.patch.object(api, "peer_list")
    def test_index_error(self, plist):
        plist.side_effect = dtn_exc.HttpForbidden("Policy forbids",
                                                  http_status=403)
        res = self.client.get(PEERS)
        self.assertEqual(200, res.status_code)
        self.assertMessageCount(res, error=1)


class AdminPeersViewTest(base.AdminTestCase):

    @mock.patch.object(api, "peer_list")
    def test_index(self, plist):
        plist.return_value = base.peers()
        res = self.client.get(ADMIN_PEERS)
        self.assertEqual(200, res.status_code)
        self.assertContains(res, 'id="peers__row__cloud-c"')
