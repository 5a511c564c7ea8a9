"""The fault proxy's byte-inverting rule, against a local HTTP server."""

import http.client
import http.server
import os
import threading


from devcloud import faultproxy

from tests.unit import testcase

BODY = os.urandom(3 * faultproxy.BUF + 12345)


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args):
        pass


class TestFlip(testcase.TestCase):
    def setUp(self):
        super().setUp()
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        self.proxy = faultproxy.FaultProxy(
            "http://127.0.0.1:%d" % server.server_address[1]).start()
        self.addCleanup(self.proxy.stop)

    def get(self, path="/v2/images/x/file"):
        conn = http.client.HTTPConnection("127.0.0.1", self.proxy.port,
                                          timeout=30)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def test_one_byte_inverted_once(self):
        # Inside the body, in its second MiB read from upstream.
        self.assertEqual((200, BODY), self.get("/other"))
        at = faultproxy.BUF + 777
        self.proxy.flip(at, count=1, path=r"/file$")
        status, body = self.get()
        self.assertEqual(200, status)
        self.assertEqual(len(BODY), len(body))
        diff = [i for i in range(len(BODY)) if body[i] != BODY[i]]
        self.assertEqual(1, len(diff))
        # AT counts the head too: the inverted byte is AT - head bytes
        # into the body.
        self.assertEqual(BODY[diff[0]] ^ 0xff, body[diff[0]])
        self.assertLess(diff[0], at)
        self.assertGreater(diff[0], at - 1024)
        # Used up: the next answer is whole.
        self.assertEqual((200, BODY), self.get())
        self.assertEqual(["pass", "flip", "pass"],
                         [a for _m, _p, a in self.proxy.log])

    def test_beyond_the_answer_nothing_changes(self):
        self.proxy.flip(len(BODY) + 4096, count=1)
        self.assertEqual((200, BODY), self.get())
        self.assertEqual(1, self.proxy.count("flip"))
