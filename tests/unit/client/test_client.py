"""The client against a real local HTTP server answering the contract."""

import datetime
import json
import time

from keystoneauth1 import access
from keystoneauth1 import fixture as ksa_fixture
from keystoneauth1.identity import access as access_plugin
from keystoneauth1 import session as ksa_session
from keystoneauth1 import token_endpoint

from dtn_migrate import client
from dtn_migrate.client import exceptions
from tests.unit.client import fakeapi
from tests.unit import testcase


def token_session(endpoint):
    return ksa_session.Session(
        auth=token_endpoint.Token(endpoint, fakeapi.TOKEN))


def catalog_session(public, internal, region="RegionOne"):
    """A session whose token carries a catalog (no Keystone needed)."""
    token = ksa_fixture.V3Token()
    token.set_project_scope()
    svc = token.add_service("dtn-migration")
    svc.add_endpoint("public", public, region=region)
    svc.add_endpoint("internal", internal, region=region)
    svc.add_endpoint("public", "http://192.0.2.9:1/", region="Other")
    ref = access.create(body=token, auth_token=fakeapi.TOKEN)
    return ksa_session.Session(auth=access_plugin.AccessInfoPlugin(ref))


class ClientTestCase(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.api = self.useFixture(fakeapi.FakeAPI())
        self.api.peers["cloud-b"] = fakeapi.peer("cloud-b")
        self.dtn = client.Client(token_session(self.api.url))

    def last(self):
        return self.api.requests[-1]


class TestEndpoint(ClientTestCase):

    def test_root_endpoint_gets_v1(self):
        self.assertEqual(self.api.url + "/v1", self.dtn.endpoint)

    def test_versioned_endpoint_kept(self):
        dtn = client.Client(token_session(self.api.url + "/v1/"))
        self.assertEqual(self.api.url + "/v1", dtn.endpoint)
        self.assertEqual([], dtn.migrations.list())
        self.assertEqual("/v1/migrations", self.last()["path"])

    def test_endpoint_below_a_path(self):
        api = self.useFixture(fakeapi.FakeAPI(prefix="/dtn-migration"))
        api.add(id="a" * 32)
        dtn = client.Client(token_session(api.url))
        self.assertEqual(["a" * 32],
                         [m["id"] for m in dtn.migrations.list()])
        self.assertEqual("/dtn-migration/v1/migrations",
                         api.requests[-1]["path"])

    def test_catalog_interface_and_region(self):
        other = self.useFixture(fakeapi.FakeAPI())
        other.add(id="b" * 32)
        self.api.add(id="a" * 32)
        sess = catalog_session(public=self.api.url, internal=other.url)
        for interface, expected in (("public", "a"), ("internal", "b"),
                                    (None, "a")):
            dtn = client.Client(sess, interface=interface,
                                region_name="RegionOne")
            self.assertEqual([expected * 32],
                             [m["id"] for m in dtn.migrations.list()])
        # The token from the session goes with each request.
        self.assertEqual(fakeapi.TOKEN,
                         other.requests[-1]["headers"]["X-Auth-Token"])

    def test_endpoint_override_beats_catalog(self):
        self.api.add(id="c" * 32)
        sess = catalog_session(public="http://192.0.2.9:1/",
                               internal="http://192.0.2.9:2/")
        dtn = client.Client(sess, endpoint_override=self.api.url + "/v1")
        self.assertEqual(["c" * 32],
                         [m["id"] for m in dtn.migrations.list()])

    def test_no_endpoint_in_catalog(self):
        sess = catalog_session(public="http://192.0.2.9:1/",
                               internal="http://192.0.2.9:2/")
        dtn = client.Client(sess, region_name="Nowhere")
        exc = self.assertRaises(exceptions.EndpointNotFound,
                                dtn.migrations.list)
        self.assertIsNone(exc.http_status)
        self.assertIsInstance(exc, exceptions.ClientException)

    def test_unsupported_version(self):
        self.assertRaises(exceptions.ClientException, client.Client,
                          token_session(self.api.url), version="2")


class TestErrors(ClientTestCase):

    def test_contract_error_body_mapped(self):
        for status, cls in ((400, exceptions.HttpBadRequest),
                            (403, exceptions.HttpForbidden),
                            (404, exceptions.HttpNotFound),
                            (409, exceptions.HttpConflict),
                            (500, exceptions.HttpInternalServerError),
                            (503, exceptions.HttpServiceUnavailable)):
            self.api.fail.append(("GET", "/v1/peers", status,
                                  "the reason %d" % status))
            exc = self.assertRaises(cls, self.dtn.peers.list)
            self.assertEqual(status, exc.http_status)
            self.assertEqual("the reason %d" % status, exc.message)
            self.assertEqual("the reason %d (HTTP %d)" % (status, status),
                             str(exc))
            self.assertEqual(fakeapi.TITLES[status], exc.title)
            self.assertEqual("req-fake", exc.request_id)
            self.assertIsInstance(exc, exceptions.HttpError)

    def test_unknown_status_keeps_it(self):
        self.api.fail.append(("GET", "/v1/peers", 418, "teapot"))
        exc = self.assertRaises(exceptions.HttpError, self.dtn.peers.list)
        self.assertEqual(418, exc.http_status)
        self.assertEqual("teapot", exc.message)

    def test_not_found_from_api(self):
        exc = self.assertRaises(exceptions.HttpNotFound,
                                self.dtn.migrations.get, "f" * 32)
        self.assertIn("f" * 32, exc.message)

    def test_unauthorized(self):
        dtn = client.Client(ksa_session.Session(
            auth=token_endpoint.Token(self.api.url, "wrong")))
        exc = self.assertRaises(exceptions.HttpUnauthorized, dtn.peers.list)
        self.assertIn("requires authentication", exc.message)

    def test_connection_refused(self):
        port = self.api.server.server_port
        self.api.server.shutdown()
        self.api.server.server_close()
        dtn = client.Client(token_session("http://127.0.0.1:%d" % port))
        exc = self.assertRaises(exceptions.CommunicationError,
                                dtn.peers.list)
        self.assertIsNone(exc.http_status)

    def test_html_error_page(self):
        self.api.raw.append(("GET", "/v1/peers", 502, "text/html",
                             b"<html>upstream is down</html>\n"))
        exc = self.assertRaises(exceptions.HttpBadGateway, self.dtn.peers.list)
        self.assertEqual("<html>upstream is down</html>", exc.message)
        self.assertEqual(502, exc.http_status)

    def test_success_that_is_not_json(self):
        self.api.raw.append(("GET", "/v1/peers", 200, "text/plain",
                             b"hello"))
        exc = self.assertRaises(exceptions.InvalidResponse,
                                self.dtn.peers.list)
        self.assertIn("not JSON", exc.message)
        self.assertEqual(200, exc.http_status)

    def test_other_json_error_shape(self):
        self.api.raw.append(("GET", "/v1/peers", 413, "application/json",
                             b'{"message": "Request is too large."}'))
        exc = self.assertRaises(exceptions.HttpRequestEntityTooLarge,
                                self.dtn.peers.list)
        self.assertEqual("Request is too large.", exc.message)


class TestMigrations(ClientTestCase):

    def test_create_by_ids(self):
        out = self.dtn.migrations.create(
            "cloud-b", images=["i1", "i2"],
            options={"keep_id": True, "visibility": "private"},
            request_id="0" * 32)
        self.assertEqual("0" * 32, out["request_id"])
        self.assertEqual(["i1", "i2"],
                         [m["image_id"] for m in out["migrations"]])
        self.assertEqual({"peer": "cloud-b", "images": ["i1", "i2"],
                          "options": {"keep_id": True,
                                      "visibility": "private"},
                          "request_id": "0" * 32},
                         json.loads(self.last()["body"]))
        self.assertEqual("POST", self.last()["method"])

    def test_create_generates_request_id(self):
        out = self.dtn.migrations.create("cloud-b", tag="dr",
                                         properties={"k": "v"})
        body = json.loads(self.last()["body"])
        self.assertEqual({"peer", "tag", "properties", "request_id"},
                         set(body))
        self.assertEqual(36, len(body["request_id"]))
        self.assertEqual(body["request_id"], out["request_id"])

    def test_create_error(self):
        exc = self.assertRaises(exceptions.HttpNotFound,
                                self.dtn.migrations.create, "nope",
                                images=["i1"])
        self.assertEqual("Unknown peer DTN nope", exc.message)

    def test_list_follows_next_links(self):
        ids = ["%032x" % i for i in range(25)]
        for i, mid in enumerate(ids):
            self.api.add(id=mid, created_at="2026-11-24T10:00:%02dZ" % i)
        found = self.dtn.migrations.list(page_size=10)
        self.assertEqual(list(reversed(ids)), [m["id"] for m in found])
        gets = [r for r in self.api.requests if r["method"] == "GET"]
        self.assertEqual(3, len(gets))
        self.assertEqual([None, [ids[15]], [ids[5]]],
                         [r["query"].get("marker") for r in gets])
        self.assertEqual([["10"]] * 3, [r["query"]["limit"] for r in gets])

    def test_list_limit_stops_early(self):
        ids = ["%032x" % i for i in range(25)]
        for i, mid in enumerate(ids):
            self.api.add(id=mid, created_at="2026-11-24T10:00:%02dZ" % i)
        found = self.dtn.migrations.list(limit=12, page_size=5,
                                         sort_dir="asc")
        self.assertEqual(ids[:12], [m["id"] for m in found])
        self.assertEqual([["5"], ["5"], ["2"]],
                         [r["query"]["limit"] for r in self.api.requests])

    def test_list_marker_and_filters(self):
        a = self.api.add(state="failed", peer="cloud-b",
                         created_at="2026-11-24T10:00:01Z")
        self.api.add(state="complete", created_at="2026-11-24T10:00:02Z")
        c = self.api.add(state="failed", created_at="2026-11-24T10:00:03Z",
                         updated_at="2026-11-24T11:00:00Z")
        found = self.dtn.migrations.list(state="failed", peer="cloud-b",
                                         direction="outgoing",
                                         sort_key="created_at",
                                         sort_dir="desc")
        self.assertEqual([c["id"], a["id"]], [m["id"] for m in found])
        query = self.last()["query"]
        self.assertEqual({"state": ["failed"], "peer": ["cloud-b"],
                          "direction": ["outgoing"],
                          "sort_key": ["created_at"],
                          "sort_dir": ["desc"], "limit": ["1000"]}, query)
        found = self.dtn.migrations.list(marker=c["id"])
        self.assertNotIn(c["id"], [m["id"] for m in found])
        self.assertEqual([c["id"]], self.last()["query"]["marker"])
        found = self.dtn.migrations.list(
            changes_since=datetime.datetime(2026, 11, 24, 10, 30),
            all_projects=True)
        self.assertEqual([c["id"]], [m["id"] for m in found])
        self.assertEqual(["2026-11-24T10:30:00Z"],
                         self.last()["query"]["changes-since"])
        self.assertEqual(["true"], self.last()["query"]["all_projects"])

    def test_list_bad_marker(self):
        exc = self.assertRaises(exceptions.HttpBadRequest,
                                self.dtn.migrations.list, marker="zz")
        self.assertIn("Marker zz", exc.message)

    def test_get_has_events(self):
        rec = self.api.add()
        got = self.dtn.migrations.get(rec["id"])
        self.assertEqual(rec["id"], got["id"])
        self.assertEqual("queued", got["events"][0]["event"])

    def test_cancel_and_retry(self):
        rec = self.api.add(state="running")
        self.assertEqual("cancelled",
                         self.dtn.migrations.cancel(rec["id"])["state"])
        self.assertEqual({"cancel": None}, json.loads(self.last()["body"]))
        exc = self.assertRaises(exceptions.HttpConflict,
                                self.dtn.migrations.cancel, rec["id"])
        self.assertIn("cannot cancel it", exc.message)
        again = self.dtn.migrations.retry(rec["id"])
        self.assertEqual(("queued", 2), (again["state"], again["attempt"]))
        self.assertEqual({"retry": None}, json.loads(self.last()["body"]))
        self.assertEqual("/v1/migrations/%s/action" % rec["id"],
                         self.last()["path"])

    def test_ids_are_quoted(self):
        self.assertRaises(exceptions.HttpNotFound, self.dtn.migrations.get,
                          "a/b")
        self.assertEqual("/v1/migrations/a%2Fb", self.last()["path"])


class TestWait(ClientTestCase):

    def test_wait_until_final(self):
        a = self.api.add(state="queued")
        b = self.api.add(state="running")
        self.api.script[a["id"]] = [
            {"state": "running", "stage": "export", "progress": 0.2},
            {"state": "running", "stage": "transfer", "progress": 0.6},
            {"state": "complete", "stage": None, "progress": 1.0}]
        self.api.script[b["id"]] = [
            {"state": "running"}, {"state": "failed", "error": "boom"}]
        seen = []
        done = self.dtn.migrations.wait(
            [a["id"], b["id"]], interval=0.01,
            callback=lambda ms: seen.append([m["state"] for m in ms]))
        self.assertEqual(["complete", "failed"], [m["state"] for m in done])
        self.assertEqual([["running", "running"], ["running", "failed"],
                          ["complete", "failed"]], seen)
        # A final migration is not asked for again.
        gets = [r["path"] for r in self.api.requests]
        self.assertEqual(2, gets.count("/v1/migrations/%s" % b["id"]))

    def test_wait_one_id_returns_one(self):
        a = self.api.add(state="complete")
        self.assertEqual(a["id"],
                         self.dtn.migrations.wait(a["id"])["id"])

    def test_wait_timeout(self):
        a = self.api.add(state="running")
        start = time.monotonic()
        exc = self.assertRaises(exceptions.WaitTimeout,
                                self.dtn.migrations.wait, [a["id"]],
                                interval=0.05, timeout=0.3)
        self.assertIn(a["id"], exc.message)
        self.assertLess(time.monotonic() - start, 10)

    def test_wait_rides_out_an_outage(self):
        a = self.api.add(state="running")
        self.api.script[a["id"]] = [{"state": "complete"}]
        self.api.fail.extend([
            ("GET", "/v1/migrations/", 503, "restarting"),
            ("GET", "/v1/migrations/", None, None)])
        done = self.dtn.migrations.wait([a["id"]], interval=0.01)
        self.assertEqual("complete", done[0]["state"])
        self.assertEqual(3, len(self.api.requests))

    def test_wait_gives_up_after_long_outage(self):
        a = self.api.add(state="running")
        self.api.fail.extend(
            [("GET", "/v1/migrations/", 503, "down")] * 50)
        self.assertRaises(exceptions.HttpServiceUnavailable,
                          self.dtn.migrations.wait, [a["id"]],
                          interval=0.01, outage=0.1)

    def test_wait_not_found_raises(self):
        self.assertRaises(exceptions.HttpNotFound, self.dtn.migrations.wait,
                          ["f" * 32], interval=0.01)


class TestPeers(ClientTestCase):

    def test_list_and_get(self):
        self.api.peers["cloud c"] = fakeapi.peer("cloud c",
                                                 reachable=False,
                                                 error="refused")
        self.assertEqual(["cloud-b", "cloud c"],
                         [p["name"] for p in self.dtn.peers.list()])
        got = self.dtn.peers.get("cloud c")
        self.assertEqual((False, "refused"), (got["reachable"],
                                              got["error"]))
        self.assertEqual("/v1/peers/cloud%20c", self.last()["path"])

    def test_unknown_peer(self):
        exc = self.assertRaises(exceptions.HttpNotFound, self.dtn.peers.get,
                                "nope")
        self.assertEqual("Unknown peer DTN nope", exc.message)


class TestSmallMaxLimit(ClientTestCase):

    def test_falls_back_to_the_api_page_size(self):
        self.api.max_limit = 5
        ids = ["%032x" % i for i in range(12)]
        for i, mid in enumerate(ids):
            self.api.add(id=mid, created_at="2026-11-24T10:00:%02dZ" % i)
        found = self.dtn.migrations.list()
        self.assertEqual(list(reversed(ids)), [m["id"] for m in found])
        self.assertEqual([["1000"], None, None, None],
                         [r["query"].get("limit")
                          for r in self.api.requests])

    def test_limit_with_api_page_size(self):
        self.api.max_limit = 5
        self.api.default_limit = 5
        for i in range(12):
            self.api.add(created_at="2026-11-24T10:00:%02dZ" % i)
        self.assertEqual(7, len(self.dtn.migrations.list(limit=7)))

    def test_page_size_asked_is_not_changed(self):
        self.api.max_limit = 5
        self.assertRaises(exceptions.HttpBadRequest, self.dtn.migrations.list,
                          page_size=10)

    def test_states_repeat(self):
        a = self.api.add(state="failed")
        b = self.api.add(state="cancelled")
        self.api.add(state="complete")
        found = self.dtn.migrations.list(state=["failed", "cancelled"])
        self.assertEqual({a["id"], b["id"]}, {m["id"] for m in found})
        self.assertEqual(["failed", "cancelled"],
                         self.last()["query"]["state"])


class TestCreateRetries(ClientTestCase):

    def test_sent_again_with_the_same_request_id(self):
        self.api.fail.extend([("POST", "/v1/migrations", None, None),
                              ("POST", "/v1/migrations", 503, "busy")])
        start = time.monotonic()
        out = self.dtn.migrations.create("cloud-b", images=["i1"])
        posts = [json.loads(r["body"]) for r in self.api.requests
                 if r["method"] == "POST"]
        self.assertEqual(3, len(posts))
        self.assertEqual({out["request_id"]},
                         {p["request_id"] for p in posts})
        self.assertEqual(1, len(out["migrations"]))
        # It paused between the attempts (1 s, then 2 s).
        self.assertGreaterEqual(time.monotonic() - start, 2.5)

    def test_gives_up(self):
        self.api.fail.extend([("POST", "/v1/migrations", 503, "busy")] * 2)
        exc = self.assertRaises(exceptions.HttpServiceUnavailable,
                                self.dtn.migrations.create, "cloud-b",
                                images=["i1"], retries=1)
        self.assertEqual("busy", exc.message)
        self.assertEqual([], self.api.created)

    def test_client_errors_are_not_retried(self):
        self.assertRaises(exceptions.HttpNotFound,
                          self.dtn.migrations.create, "nope",
                          images=["i1"])
        self.assertEqual(1, len(self.api.requests))
