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

    def test_policy_list_and_get(self):
        self.http.return_value = FakeResponse(
            200, {"policies": base.POLICIES, "links": []})
        found = api.policy_list(self.req, all_projects=True, peer="",
                                mode="manual")
        self.assertEqual(["p-ok", "p-bad", "p-rep"], [p.id for p in found])
        self.assertIsInstance(found[0], api.Policy)
        self.assertEqual("ok", found[0].rpo_state)
        self.assertEqual(30, found[0].rpo_target)
        self.assertEqual(5400.0, found[1].rpo_seconds)
        self.assertEqual((2, 0, 0), (found[0].replicated, found[0].pending,
                                     found[0].failed))
        self.assertEqual((1, 1), (found[1].pending, found[1].failed))
        method, url, params, _body = self.calls()[0]
        self.assertEqual(base.ENDPOINT + "/v1/policies", url)
        self.assertEqual("true", params["all_projects"])
        self.assertEqual("manual", params["mode"])
        self.assertNotIn("peer", params)
        self.http.return_value = FakeResponse(
            200, {"policy": base.POLICIES[0]})
        self.assertEqual("gold", api.policy_get(self.req, "p-ok").name)
        self.assertEqual(base.ENDPOINT + "/v1/policies/p-ok",
                         self.calls()[1][1])

    def test_policy_wrapper_without_rpo_nor_images(self):
        policy = api.Policy({"id": "x"})
        self.assertIsNone(policy.rpo_state)
        self.assertIsNone(policy.rpo_seconds)
        self.assertEqual(0, policy.pending)

    def test_policy_create_delete_sync(self):
        self.http.return_value = FakeResponse(
            201, {"policy": base.POLICIES[0]})
        created = api.policy_create(self.req, name="gold", peer="cloud-b",
                                    selector={"tags": ["dr-gold"]})
        self.assertEqual("p-ok", created.id)
        self.assertEqual({"name": "gold", "peer": "cloud-b",
                          "selector": {"tags": ["dr-gold"]}},
                         self.calls()[0][3])
        self.http.return_value = FakeResponse(204)
        api.policy_delete(self.req, "p-ok")
        self.assertEqual(("DELETE", base.ENDPOINT + "/v1/policies/p-ok"),
                         self.calls()[1][:2])
        self.http.return_value = FakeResponse(
            202, {"policy": base.POLICIES[0],
                  "migrations": base.MIGRATIONS[:1]})
        policy, started = api.policy_sync(self.req, "p-ok")
        self.assertEqual("p-ok", policy.id)
        self.assertEqual(["m-run"], [m.id for m in started])
        self.assertIsInstance(started[0], api.Migration)
        _m, url, _p, body = self.calls()[2]
        self.assertEqual(base.ENDPOINT + "/v1/policies/p-ok/action", url)
        self.assertEqual({"sync": None}, body)

    def test_policy_images(self):
        self.http.return_value = FakeResponse(
            200, {"images": base.POLICY_IMAGES})
        images = api.policy_images(self.req, "p-ok", state="")
        self.assertEqual(["img-1", "img-3"], [i.id for i in images])
        self.assertEqual(["cirros", "img-3"], [i.name for i in images])
        self.assertEqual(base.ENDPOINT + "/v1/policies/p-ok/images",
                         self.calls()[0][1])

    def test_drills(self):
        self.http.return_value = FakeResponse(200, {"drills": base.DRILLS})
        drills = api.drill_list(self.req, policy_id="p-rep")
        self.assertEqual(["d-run", "d-pass"], [d.id for d in drills])
        _m, url, params, _b = self.calls()[0]
        self.assertEqual(base.ENDPOINT + "/v1/drills", url)
        self.assertEqual("p-rep", params["policy_id"])
        self.assertNotIn("all_projects", params)
        self.http.return_value = FakeResponse(
            202, {"drill": base.DRILLS[0]})
        drill = api.drill_start(self.req, "p-rep")
        self.assertEqual("running", drill.state)
        self.assertEqual({"policy_id": "p-rep"}, self.calls()[1][3])
        self.http.return_value = FakeResponse(
            200, {"drill": base.DRILLS[1]})
        self.assertEqual(75.0, api.drill_get(self.req, "d-pass").rto_seconds)
