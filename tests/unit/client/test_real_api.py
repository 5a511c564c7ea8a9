"""The client against the real dtn-migrate-api application (noauth2, a
real SQLite database, the API tests' fake engine) served over HTTP by
wsgiref in a thread: the client and the API agree on the contract.
"""

import threading
from wsgiref import simple_server

from keystoneauth1 import noauth
from keystoneauth1 import session as ksa_session

from dtn_migrate import client
from dtn_migrate.client import exceptions
from tests.unit.api import base as api_base


class _Quiet(simple_server.WSGIRequestHandler):
    def log_message(self, *args):
        pass


class RealApiTestCase(api_base.ApiTestCase):

    api_overrides = {"max_limit": 5, "default_limit": 3}

    def setUp(self):
        # The application, as the API's own tests build it.
        super().setUp()
        server = simple_server.make_server("127.0.0.1", 0, self.app,
                                           handler_class=_Quiet)
        thread = threading.Thread(target=server.serve_forever,
                                  args=(0.05,), daemon=True)
        thread.start()
        self.addCleanup(thread.join, 10)
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        self.url = "http://127.0.0.1:%d" % server.server_port

    def dtn(self, persona="member"):
        sess = ksa_session.Session(
            auth=noauth.NoAuth(endpoint=self.url),
            additional_headers=self.headers(persona))
        return client.Client(sess)


class TestRealApi(RealApiTestCase):

    def test_create_show_cancel_retry(self):
        dtn = self.dtn()
        out = dtn.migrations.create("b", images=[api_base.IMAGE],
                                    options={"mode": "serial"})
        self.assertEqual(1, len(out["migrations"]))
        mid = out["migrations"][0]["id"]
        again = dtn.migrations.create("b", images=[api_base.IMAGE],
                                      request_id=out["request_id"])
        self.assertEqual([mid], [m["id"] for m in again["migrations"]])
        shown = dtn.migrations.get(mid)
        self.assertEqual(("queued", "cirros"),
                         (shown["state"], shown["image_name"]))
        self.assertEqual(["queued"], [e["event"] for e in shown["events"]])
        self.assertEqual("cancelled", dtn.migrations.cancel(mid)["state"])
        self.assertRaises(exceptions.HttpConflict, dtn.migrations.cancel, mid)
        self.assertEqual(2, dtn.migrations.retry(mid)["attempt"])
        self.assertRaises(exceptions.WaitTimeout, dtn.migrations.wait,
                          mid, interval=0.01, timeout=0.1)
        self.db.migration_update(mid, {"state": "complete",
                                       "progress": 1.0})
        done = dtn.migrations.wait(mid, interval=0.01)
        self.assertEqual(("complete", 1.0),
                         (done["state"], done["progress"]))

    def test_selector(self):
        out = self.dtn().migrations.create("b", tag="t",
                                           properties={"os": "linux"})
        self.assertEqual([api_base.IMAGE],
                         [m["image_id"] for m in out["migrations"]])

    def test_list_pages_with_a_small_max_limit(self):
        ids = [self.add(state="failed" if i % 2 else "complete")["id"]
               for i in range(13)]
        dtn = self.dtn()
        found = dtn.migrations.list()
        self.assertEqual(sorted(ids), sorted(m["id"] for m in found))
        self.assertEqual(len(ids), len({m["id"] for m in found}))
        self.assertEqual(7, len(dtn.migrations.list(limit=7)))
        failed = dtn.migrations.list(state=["failed"], sort_key="id",
                                     sort_dir="asc")
        self.assertEqual(sorted(ids[1::2]), [m["id"] for m in failed])

    def test_project_isolation_and_all_projects(self):
        mine = self.add()["id"]
        theirs = self.add(project=api_base.OTHER)["id"]
        self.assertEqual([mine],
                         [m["id"] for m in self.dtn().migrations.list()])
        self.assertRaises(exceptions.HttpNotFound, self.dtn().migrations.get,
                          theirs)
        self.assertRaises(exceptions.HttpNotFound,
                          self.dtn().migrations.cancel, theirs)
        self.assertRaises(exceptions.HttpForbidden,
                          self.dtn().migrations.list, all_projects=True)
        everyone = self.dtn("admin").migrations.list(all_projects=True)
        self.assertEqual({mine, theirs}, {m["id"] for m in everyone})

    def test_reader_cannot_create(self):
        exc = self.assertRaises(exceptions.HttpForbidden,
                                self.dtn("reader").migrations.create, "b",
                                images=[api_base.IMAGE])
        self.assertEqual(403, exc.http_status)

    def test_errors_carry_the_api_message(self):
        dtn = self.dtn()
        exc = self.assertRaises(exceptions.HttpNotFound, dtn.peers.get, "zz")
        self.assertIn("zz", exc.message)
        exc = self.assertRaises(exceptions.HttpBadRequest, dtn.migrations.list,
                                marker="not-a-uuid")
        self.assertIn("marker", exc.message)
        exc = self.assertRaises(exceptions.HttpBadRequest,
                                dtn.migrations.create, "b",
                                images=["nope"])
        self.assertEqual(400, exc.http_status)
        exc = self.assertRaises(exceptions.HttpNotFound,
                                dtn.migrations.create, "zz",
                                images=[api_base.IMAGE])
        self.assertIn("zz", exc.message)

    def test_peers(self):
        dtn = self.dtn("reader")
        self.assertEqual(["b", "c"], [p["name"] for p in dtn.peers.list()])
        peer = dtn.peers.get("c")
        # A reader learns whether it is reachable, not where nor why.
        self.assertEqual(False, peer["reachable"])
        self.assertFalse({"address", "port", "error"} & set(peer))
        peer = self.dtn("admin").peers.get("c")
        self.assertEqual((False, "connection refused", 7000),
                         (peer["reachable"], peer["error"], peer["port"]))
