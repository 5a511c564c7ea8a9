"""ImageService.for_token/readable against a small HTTP image service:
the caller's token is what Glance sees, and its answers map to
ImageNotReadable and ImageNotFound.
"""

import http.server
import json
import threading

from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint

from dtn_migrate import exception
from dtn_migrate.image import glance

from tests.unit import testcase

IMAGE = "11111111-2222-3333-4444-555555555555"
SCHEMA = {"name": "image", "additionalProperties": {"type": "string"},
          "properties": {"id": {"type": "string"},
                         "name": {"type": ["null", "string"]},
                         "owner": {"type": ["null", "string"]}}}


class _Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _send(self, code, body):
        # Glance answers errors in plain text.
        data = json.dumps(body).encode() if code == 200 else \
            ("%d %s" % (code, body)).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json"
                         if code == 200 else "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        token = self.headers.get("X-Auth-Token")
        self.server.seen.append((self.path, token))
        if self.path.startswith("/v2/schemas/image"):
            return self._send(200, SCHEMA)
        if token not in ("reader", "outsider", "engine"):
            return self._send(401, "Unauthorized")
        if self.path != "/v2/images/%s" % IMAGE:
            return self._send(404, "Not Found")
        if token == "outsider":
            return self._send(403, "Forbidden")
        return self._send(200, {"id": IMAGE, "name": "img", "owner": "p1"})


class TestCallerGlance(testcase.TestCase):
    def setUp(self):
        super().setUp()
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.seen = []
        self.server = server
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        url = "http://127.0.0.1:%d" % server.server_address[1]
        session = ks_session.Session(auth=token_endpoint.Token(url,
                                                               "engine"))
        self.images = glance.ImageService(session, cloud_name="west",
                                          endpoint_override=url, retries=0)

    def test_the_caller_reads_with_its_own_token(self):
        image = self.images.for_token("reader").readable(IMAGE)
        self.assertEqual(("img", "p1"), (image["name"], image["owner"]))
        self.assertIn(("/v2/images/%s" % IMAGE, "reader"), self.server.seen)
        self.assertNotIn(("/v2/images/%s" % IMAGE, "engine"),
                         self.server.seen)

    def test_forbidden_is_not_readable(self):
        err = self.assertRaises(exception.ImageNotReadable,
                                self.images.for_token("outsider").readable,
                                IMAGE)
        self.assertEqual(403, err.code)
        self.assertIn("west", str(err))

    def test_bad_token_is_not_readable(self):
        self.assertRaises(exception.ImageNotReadable,
                          self.images.for_token("expired").readable, IMAGE)

    def test_hidden_image_is_not_found(self):
        err = self.assertRaises(exception.ImageNotFound,
                                self.images.for_token("reader").readable,
                                "99999999-2222-3333-4444-555555555555")
        self.assertEqual(404, err.code)
