"""A small dtn-migration API on a local port, for the client's tests.

It answers the REST API's contract (doc: contract section 3) from
in-memory records, on a real HTTP server in a thread: the client under
test goes through keystoneauth1, requests and a socket, nothing mocked.
Every request is logged in ``api.requests``.
"""

import http.server
import json
import threading
import urllib.parse
import uuid

import fixtures
from keystoneauth1 import fixture as ksa_fixture

TITLES = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
          404: "Not Found", 409: "Conflict", 500: "Internal Server Error",
          503: "Service Unavailable"}
SORTABLE = ("created_at", "updated_at", "state", "image_name", "peer",
            "progress", "id")
FILTERS = ("state", "image_id", "peer", "direction", "request_id")
TOKEN = "fake-token"


def migration(**values):
    """A Migration object of the contract, with ``values`` set."""
    mid = values.pop("id", None) or uuid.uuid4().hex
    rec = {"id": mid, "request_id": None, "image_id": uuid.uuid4().hex,
           "image_name": "image", "peer": "cloud-b",
           "direction": "outgoing", "state": "queued", "stage": None,
           "mode": "pipelined", "attempt": 1, "size": None,
           "progress": 0.0, "rate": None, "eta": None,
           "bytes": {"export": 0, "transfer": 0, "import": 0},
           "error": None, "peer_image_id": None, "peer_image_hash": None,
           "os_hash_value": None, "project_id": "p1", "user_id": "u1",
           "created_at": "2026-11-24T10:00:00Z",
           "updated_at": "2026-11-24T10:00:00Z", "started_at": None,
           "finished_at": None, "peer_silent_since": None}
    rec.update(values)
    return rec


def peer(name, **values):
    rec = {"name": name, "address": "192.0.2.2", "port": 47000,
           "reachable": True, "rtt_ms": 0.4,
           "last_throughput": 1.2e9,
           "last_transfer_at": "2026-11-24T09:00:00Z",
           "checked_at": "2026-11-24T10:00:00Z", "error": None}
    rec.update(values)
    return rec


#: Where the fake Keystone answers (``keystone_url``).
KEYSTONE = "/identity/v3"


class Error(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


class FakeAPI(fixtures.Fixture):
    """The API at ``self.url`` (root) with ``self.migrations`` (id ->
    record, in creation order), ``self.peers`` (name -> record).

    ``self.script[id]``: records that successive GETs of that migration
    answer (the last one stays); ``self.fail``: a list of (method, path
    regex-free prefix, status, message) answered once each, in order
    (status None: the connection is closed unanswered); ``self.raw``:
    (method, path prefix, status, content type, bytes) likewise, answered
    as given; ``self.on_create(records)``, if set, is called with the
    records a POST creates (e.g. to script them).

    Under ``keystone_url`` a minimal Keystone v3 issues TOKEN, with a
    catalog of ``self.catalog``: [(interface, region, url)] of the
    dtn-migration service (by default this API, public, RegionOne).
    """

    def __init__(self, prefix=""):
        super().__init__()
        self.prefix = prefix.rstrip("/")

    def _setUp(self):
        self.migrations = {}
        self.peers = {}
        self.script = {}
        self.fail = []
        self.raw = []
        self.on_create = None
        self.max_limit = 1000
        self.default_limit = 100
        self.requests = []
        self.created = []
        self.lock = threading.Lock()
        api = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                api._handle(self, "GET")

            def do_POST(self):
                api._handle(self, "POST")

        self.server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d%s" % (self.server.server_port,
                                              self.prefix)
        self.keystone_url = "http://127.0.0.1:%d%s" % (
            self.server.server_port, KEYSTONE)
        self.catalog = [("public", "RegionOne", self.url)]
        self.tokens = []
        thread = threading.Thread(target=self.server.serve_forever,
                                  args=(0.05,), daemon=True)
        thread.start()
        self.addCleanup(thread.join, 10)
        self.addCleanup(self.server.server_close)
        self.addCleanup(self.server.shutdown)

    def add(self, **values):
        rec = migration(**values)
        self.migrations[rec["id"]] = rec
        return rec

    # HTTP plumbing.
    def _handle(self, handler, method):
        split = urllib.parse.urlsplit(handler.path)
        query = urllib.parse.parse_qs(split.query, keep_blank_values=True)
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        with self.lock:
            self.requests.append({
                "method": method, "path": split.path, "query": query,
                "body": raw, "headers": dict(handler.headers)})
            try:
                if split.path.startswith(KEYSTONE):
                    self._keystone(handler, method, split.path, raw)
                    return
                if handler.headers.get("X-Auth-Token") != TOKEN:
                    raise Error(401, "The request you have made requires "
                                "authentication.")
                path = split.path
                if not path.startswith(self.prefix + "/"):
                    raise Error(404, "No such resource %s" % path)
                path = path[len(self.prefix):]
                for i, (fm, fpath, status, ctype, data) in \
                        enumerate(self.raw):
                    if fm == method and path.startswith(fpath):
                        del self.raw[i]
                        self._send(handler, status, data, ctype)
                        return
                for i, (fm, fpath, status, message) in enumerate(self.fail):
                    if fm == method and path.startswith(fpath):
                        del self.fail[i]
                        if status is None:
                            handler.close_connection = True
                            handler.connection.close()
                            return
                        raise Error(status, message)
                body = None
                if raw:
                    try:
                        body = json.loads(raw)
                    except ValueError:
                        raise Error(400, "The body is not JSON")
                status, answer = self._route(method, path, query, body)
            except Error as exc:
                status, answer = exc.code, {"error": {
                    "code": exc.code, "title": TITLES.get(exc.code, "Error"),
                    "message": exc.message}}
        self._send(handler, status, json.dumps(answer).encode())

    def _keystone(self, handler, method, path, raw):
        if method == "GET" and path.rstrip("/") == KEYSTONE:
            self._send(handler, 200, json.dumps({"version": {
                "id": "v3.14", "status": "stable",
                "updated": "2020-04-07T00:00:00Z",
                "links": [{"rel": "self", "href": self.keystone_url + "/"}],
                "media-types": [{
                    "base": "application/json",
                    "type": "application/vnd.openstack.identity-v3+json"}],
            }}).encode())
            return
        if method != "POST" or path != KEYSTONE + "/auth/tokens":
            self._send(handler, 404, b'{"error": {"code": 404, '
                       b'"title": "Not Found", "message": "no"}}')
            return
        self.tokens.append(json.loads(raw))
        token = ksa_fixture.V3Token(user_name="admin",
                                    project_name="admin")
        token.set_project_scope(name="admin")
        svc = token.add_service("dtn-migration")
        for interface, region, url in self.catalog:
            svc.add_endpoint(interface, url, region=region)
        identity = token.add_service("identity")
        identity.add_standard_endpoints(public=self.keystone_url,
                                        region="RegionOne")
        data = json.dumps(token).encode()
        handler.send_response(201)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.send_header("X-Subject-Token", TOKEN)
        handler.end_headers()
        handler.wfile.write(data)

    def _send(self, handler, status, data, ctype="application/json"):
        handler.send_response(status)
        handler.send_header("Content-Type", ctype)
        handler.send_header("Content-Length", str(len(data)))
        handler.send_header("x-openstack-request-id", "req-fake")
        handler.end_headers()
        handler.wfile.write(data)

    def _route(self, method, path, query, body):
        parts = [p for p in path.split("/") if p]
        parts = [urllib.parse.unquote(p) for p in parts]
        if parts == [] and method == "GET":
            return 200, {"versions": [self._version()]}
        if parts == ["v1"] and method == "GET":
            return 200, {"version": self._version()}
        if parts == ["v1", "migrations"]:
            if method == "POST":
                return self._create(body)
            return self._list(query)
        if len(parts) == 3 and parts[:2] == ["v1", "migrations"] and \
                method == "GET":
            rec = self._get(parts[2])
            return 200, {"migration": dict(rec, events=[
                {"stage": None, "event": "queued", "message": None,
                 "bytes": None, "created_at": rec["created_at"]}])}
        if len(parts) == 4 and parts[:2] == ["v1", "migrations"] and \
                parts[3] == "action" and method == "POST":
            return self._action(parts[2], body)
        if parts == ["v1", "peers"] and method == "GET":
            return 200, {"peers": list(self.peers.values())}
        if len(parts) == 3 and parts[:2] == ["v1", "peers"] and \
                method == "GET":
            if parts[2] not in self.peers:
                raise Error(404, "Unknown peer DTN %s" % parts[2])
            return 200, {"peer": self.peers[parts[2]]}
        raise Error(404, "No such resource %s" % path)

    def _version(self):
        return {"id": "v1", "status": "CURRENT",
                "links": [{"rel": "self", "href": self.url + "/v1/"}]}

    def _get(self, mid):
        if mid not in self.migrations:
            raise Error(404, "Migration %s could not be found." % mid)
        script = self.script.get(mid)
        if script:
            self.migrations[mid] = dict(self.migrations[mid],
                                        **script.pop(0))
        return self.migrations[mid]

    def _create(self, body):
        if not isinstance(body, dict) or "peer" not in body:
            raise Error(400, "'peer' is a required property")
        if body["peer"] not in self.peers:
            raise Error(404, "Unknown peer DTN %s" % body["peer"])
        self.created.append(body)
        request_id = body.get("request_id") or uuid.uuid4().hex
        recs = [self.add(image_id=image_id, image_name="img-" + image_id,
                         peer=body["peer"], request_id=request_id)
                for image_id in body.get("images") or ["selected"]]
        if self.on_create is not None:
            self.on_create(recs)
        return 202, {"request_id": request_id, "migrations": recs}

    def _list(self, query):
        def one(key):
            return query[key][-1] if key in query else None
        recs = list(self.migrations.values())
        sort_key = one("sort_key") or "created_at"
        if sort_key not in SORTABLE:
            raise Error(400, "Invalid sort_key %s" % sort_key)
        reverse = (one("sort_dir") or "desc") == "desc"
        recs.sort(key=lambda r: (r[sort_key] is not None, r[sort_key],
                                 r["id"]), reverse=reverse)
        if one("marker") is not None:
            # The rows after the marker's, whatever the filters.
            ids = [r["id"] for r in recs]
            if one("marker") not in ids:
                raise Error(400, "Marker %s not found" % one("marker"))
            recs = recs[ids.index(one("marker")) + 1:]
        if "state" in query:
            recs = [r for r in recs if r["state"] in query["state"]]
        for key in FILTERS:
            if key != "state" and one(key) is not None:
                recs = [r for r in recs if r[key] == one(key)]
        if one("changes-since") is not None:
            since = one("changes-since")
            if not since[:4].isdigit():
                raise Error(400, "Invalid changes-since: %s" % since)
            recs = [r for r in recs if r["updated_at"] >= since]
        try:
            limit = int(one("limit") or
                        min(self.default_limit, self.max_limit))
        except ValueError:
            raise Error(400, "limit must be an integer")
        if not 1 <= limit <= self.max_limit:
            raise Error(400, "limit must be at most %d, not %d"
                        % (self.max_limit, limit))
        page = recs[:limit]
        answer = {"migrations": page}
        if len(recs) > limit:
            args = {k: v[-1] for k, v in query.items() if k != "marker"}
            args["marker"] = page[-1]["id"]
            answer["links"] = [{"rel": "next", "href": "%s/v1/migrations?%s"
                                % (self.url,
                                   urllib.parse.urlencode(args))}]
        return 200, answer

    def _action(self, mid, body):
        rec = self._get(mid)
        if body == {"cancel": None}:
            if rec["state"] not in ("queued", "running"):
                raise Error(409, "Migration %s is already %s: cannot "
                            "cancel it." % (mid, rec["state"]))
            rec.update(state="cancelled", error="cancelled by request")
        elif body == {"retry": None}:
            if rec["state"] not in ("failed", "cancelled"):
                raise Error(409, "Migration %s is %s; only a failed or "
                            "cancelled migration can be retried"
                            % (mid, rec["state"]))
            rec.update(state="queued", error=None,
                       attempt=(rec["attempt"] or 0) + 1)
        else:
            raise Error(400, "Give one action: cancel or retry")
        return 202, {"migration": rec}
