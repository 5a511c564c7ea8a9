"""The per-request API client and the wrappers."""

import json
from unittest import mock

from horizon import exceptions as horizon_exc
from keystoneauth1 import adapter

from dtn_migrate.client import exceptions as dtn_exc
from dtn_migrate.dashboard import api
from tests.unit.dashboard import base


class FakeResponse(object):
    def __init__(self, status, body=None):
        self.status_code = status
        self.content = json.dumps(body).encode() if body is not None else b""
        self.text = self.content.decode()
        self.headers = {}
        self.reason = "reason"
        self._body = body

    def json(self):
        if self._body is None:
            raise ValueError("no body")
        return self._body


class ClientTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.req = self.factory.get("/")

    def test_client_uses_token_and_catalog_endpoint(self):
        client = api.dtnclient(self.req)
        self.assertEqual(base.ENDPOINT, client.adapter.endpoint_override)
        session = client.adapter.session
        self.assertEqual(self.token.id, session.auth.get_token(session))
        self.assertEqual(base.ENDPOINT + "/v1", client.endpoint)
        self.assertEqual(api.TIMEOUT, session.timeout)

    def test_client_is_built_once_per_request(self):
        self.assertIs(api.dtnclient(self.req),
                      api.dtnclient(self.req))

    def test_is_enabled(self):
        self.assertTrue(api.is_enabled(self.req))


class NoServiceTest(base.TestCase):
    with_service = False

    def setUp(self):
        super().setUp()
        self.req = self.factory.get("/")

    def test_not_enabled(self):
        self.assertFalse(api.is_enabled(self.req))

    def test_no_endpoint_is_a_catalog_error(self):
        self.assertRaises(horizon_exc.ServiceCatalogException,
                          api.dtnclient, self.req)


class WrapperTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.req = self.factory.get("/")
        patcher = mock.patch.object(adapter.Adapter, "request")
        self.http = patcher.start()

    def calls(self):
        return [(c.args[1], c.args[0], c.kwargs.get("params"),
                 c.kwargs.get("json")) for c in self.http.call_args_list]

    def test_migration_list_filters(self):
        self.http.return_value = FakeResponse(
            200, {"migrations": base.MIGRATIONS[:1], "links": []})
        found = api.migration_list(self.req, all_projects=True,
                                   state="running", peer="", image_id=None)
        self.assertEqual(["m-run"], [m.id for m in found])
        self.assertIsInstance(found[0], api.Migration)
        self.assertEqual("cirros", found[0].name)
        method, url, params, _body = self.calls()[0]
        self.assertEqual("GET", method)
        self.assertEqual(base.ENDPOINT + "/v1/migrations", url)
        self.assertEqual("running", params["state"])
        self.assertEqual("true", params["all_projects"])
        self.assertNotIn("peer", params)

    def test_migration_get(self):
        self.http.return_value = FakeResponse(
            200, {"migration": dict(base.MIGRATIONS[1], events=[])})
        migration = api.migration_get(self.req, "m-done")
        self.assertEqual("peer-2", migration.peer_image_id)
        self.assertEqual(base.ENDPOINT + "/v1/migrations/m-done",
                         self.calls()[0][1])

    def test_migration_create(self):
        self.http.return_value = FakeResponse(
            202, {"request_id": "r", "migrations": base.MIGRATIONS[:2]})
        started = api.migration_create(self.req, "cloud-b",
                                       images=["img-1"],
                                       options={"keep_id": True})
        self.assertEqual(["m-run", "m-done"], [m.id for m in started])
        _m, url, _p, body = self.calls()[0]
        self.assertEqual("cloud-b", body["peer"])
        self.assertEqual(["img-1"], body["images"])
        self.assertEqual({"keep_id": True}, body["options"])
        self.assertNotIn("tag", body)

    def test_cancel_and_retry(self):
        self.http.return_value = FakeResponse(
            202, {"migration": base.MIGRATIONS[0]})
        api.migration_cancel(self.req, "m-run")
        api.migration_retry(self.req, "m-run")
        bodies = [c[3] for c in self.calls()]
        self.assertEqual([{"cancel": None}, {"retry": None}], bodies)

    def test_peers(self):
        self.http.return_value = FakeResponse(200, {"peers": base.PEERS})
        peers = api.peer_list(self.req)
        self.assertEqual(["cloud-b", "cloud-c"], [p.id for p in peers])
        self.http.return_value = FakeResponse(200, {"peer": base.PEERS[0]})
        self.assertEqual(1.25, api.peer_get(self.req, "cloud-b").rtt_ms)

    def test_http_errors_are_client_exceptions(self):
        self.http.return_value = FakeResponse(
            404, {"error": {"code": 404, "title": "Not Found",
                            "message": "Migration x could not be found"}})
        with self.assertRaises(dtn_exc.HttpNotFound) as ctx:
            api.migration_get(self.req, "x")
        self.assertIn("could not be found", str(ctx.exception))
