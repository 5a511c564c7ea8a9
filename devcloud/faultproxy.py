"""A small HTTP fault injector to put in front of a dev cloud's server.

``FaultProxy(target_url)`` listens on 127.0.0.1 and forwards each
connection byte for byte to the target (one request per connection, as
the devcloud's uwsgi answers ``Connection: close``).  Rules make it
misbehave for a number of requests or seconds, optionally only for some
methods or paths::

    proxy = FaultProxy(glance_b.endpoint).start()
    proxy.fail(503, count=3, retry_after=2)      # three 503s
    proxy.fail(429, seconds=5, method="PUT")      # uploads throttled 5 s
    proxy.reset(count=1, path=r"/file$")          # connection dropped
    proxy.cut(1 << 20, count=1, method="GET")     # download cut at 1 MiB
    proxy.flip(8 << 20, count=1, path=r"/file$")  # one byte inverted
    proxy.slow(2 << 20, path=r"/file$")           # answers at 2 MiB/s
    proxy.clear()

A faulted request's body is read and dropped before the answer, so the
client sees the status rather than a broken pipe.  ``proxy.log`` lists
(method, path, action) for every request.
"""

import collections
import contextlib
import re
import socket
import struct
import threading
import time
import urllib.parse


BUF = 1 << 20
_REASONS = {429: "Too Many Requests", 500: "Internal Server Error",
            502: "Bad Gateway", 503: "Service Unavailable",
            504: "Gateway Timeout"}


class _Rule:
    def __init__(self, action, status=None, seconds=None, count=None,
                 retry_after=None, method=None, path=None, after=None,
                 body=None, content_type="text/plain"):
        self.action = action
        self.status = status
        self.until = time.monotonic() + seconds if seconds else None
        self.count = count
        self.retry_after = retry_after
        if isinstance(method, str):
            method = (method,)
        self.methods = tuple(m.upper() for m in method) if method else None
        self.path = re.compile(path) if path else None
        self.after = after
        self.body = body
        self.content_type = content_type

    def expired(self):
        return ((self.until is not None and time.monotonic() >= self.until)
                or self.count == 0)

    def matches(self, method, path):
        return ((self.methods is None or method in self.methods) and
                (self.path is None or self.path.search(path)))


class FaultProxy:
    """Forward 127.0.0.1:port to TARGET (http://host:port); see module."""

    def __init__(self, target, port=None, host="127.0.0.1"):
        parsed = urllib.parse.urlsplit(target)
        self.target = (parsed.hostname, parsed.port or 80)
        self.host = host
        # The listening socket is bound here, on PORT or (None) on one
        # the kernel picks, so that endpoint is known before start().
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._sock.bind((host, port or 0))
        except OSError:
            self._sock.close()
            raise
        self.port = self._sock.getsockname()[1]
        self.log = collections.deque(maxlen=100000)
        #: (method, path, Range header or None) of every request.
        self.requests = collections.deque(maxlen=100000)
        self._rules = []
        self._lock = threading.Lock()
        self._conns = set()
        self._listener = None
        self._thread = None

    @property
    def endpoint(self):
        return "http://%s:%d" % (self.host, self.port)

    url = endpoint

    # Rules.

    def fail(self, status=503, seconds=None, count=None, retry_after=1,
             method=None, path=None, body=None, content_type="text/plain"):
        """Answer STATUS (with Retry-After unless None) to matching
        requests, for SECONDS or COUNT requests (or until clear()).

        The default body is plain text, as a load balancer's; a JSON body
        must be shaped as OpenStack's ({"name": {"message": ...}}) for
        glanceclient to parse it.
        """
        return self._add(_Rule("fail", status, seconds, count, retry_after,
                               method, path, body=body,
                               content_type=content_type))

    def reset(self, seconds=None, count=None, method=None, path=None):
        """Drop matching connections (TCP reset) without an answer."""
        return self._add(_Rule("reset", None, seconds, count, None, method,
                               path))

    def cut(self, after, seconds=None, count=None, method=None, path=None):
        """Forward matching requests, but reset the connection once AFTER
        bytes of the answer (head included) reached the client.  A short
        answer is not cut but still uses up COUNT: aim with PATH (for
        instance r"/file$" for image data).
        """
        return self._add(_Rule("cut", None, seconds, count, None, method,
                               path, after=after))

    def flip(self, at, seconds=None, count=None, method=None, path=None):
        """Forward matching requests, but invert the byte AT bytes into
        the answer (head included): silent corruption, which only a
        checksum finds.  An answer too short to reach AT passes whole.
        """
        return self._add(_Rule("flip", None, seconds, count, None, method,
                               path, after=at))

    def slow(self, rate, seconds=None, count=None, method=None, path=None):
        """Forward matching requests, but send their answers at RATE
        bytes per second.
        """
        return self._add(_Rule("slow", None, seconds, count, None, method,
                               path, after=rate))

    def clear(self):
        """Remove every rule: forward everything again."""
        with self._lock:
            self._rules = []

    def _add(self, rule):
        with self._lock:
            self._rules.append(rule)
        return rule

    def _pick(self, method, path):
        with self._lock:
            self._rules = [r for r in self._rules if not r.expired()]
            for rule in self._rules:
                if rule.matches(method, path):
                    if rule.count is not None:
                        rule.count -= 1
                    return rule
        return None

    def count(self, action=None, method=None):
        """How many requests were logged (with ACTION, METHOD)."""
        return sum(1 for m, _, a in list(self.log)
                   if (action is None or a == action) and
                   (method is None or m == method))

    # Server.

    def start(self):
        sock, self._sock = self._sock, None
        if sock is None:        # started again after stop(): same port
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.port))
        sock.listen(64)
        self._listener = sock
        self._thread = threading.Thread(target=self._accept, daemon=True,
                                        name="faultproxy-%d" % self.port)
        self._thread.start()
        return self

    def stop(self):
        """Stop listening and drop the connections in flight."""
        sock, self._listener = self._listener, None
        if sock is None:
            return
        _shutdown(sock, socket.SHUT_RDWR)
        sock.close()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            _shutdown(conn, socket.SHUT_RDWR)
        self._thread.join(5)

    close = stop

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def _accept(self):
        while self._listener is not None:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,),
                             daemon=True).start()

    def _track(self, *socks, add=True):
        with self._lock:
            for s in socks:
                (self._conns.add if add else self._conns.discard)(s)

    def _serve(self, client):
        self._track(client)
        upstream = None
        pump = None
        reader = _Reader(client)
        try:
            head = reader.head()
            if head is None:
                return
            method, path, headers = _parse_head(head)
            rule = self._pick(method, path)
            action = rule.action if rule else "pass"
            self.log.append((method, path, action))
            self.requests.append((method, path, headers.get("range")))
            if action == "reset":
                _reset(client)
                return
            if action == "fail":
                _drain_body(reader, headers)
                client.sendall(_answer(rule))
                return
            try:
                upstream = socket.create_connection(self.target, timeout=30)
            except OSError:
                _drain_body(reader, headers)
                client.sendall(_answer(_Rule("fail", 502, retry_after=None,
                                             body="upstream unreachable\n")))
                return
            upstream.settimeout(None)
            self._track(upstream)
            upstream.sendall(head)
            pump = threading.Thread(target=_pump_in, args=(reader, upstream),
                                    daemon=True)
            pump.start()
            cut = rule.after if action == "cut" else None
            flip = rule.after if action == "flip" else None
            rate = rule.after if action == "slow" else None
            if _pump_out(upstream, client, cut, flip, rate):
                _shutdown(client, socket.SHUT_RD)
                pump.join(5)
                _reset(client)
        except OSError:
            pass
        finally:
            # SHUT_RD wakes a pump blocked in recv() without telling the
            # peer anything; close() alone would not.
            _shutdown(client, socket.SHUT_RD)
            if pump is not None:
                pump.join(5)
            for sock in (upstream, client):
                if sock is not None:
                    self._track(sock, add=False)
                    sock.close()


class _Reader:
    """Buffered reads on a socket, without socket.makefile (whose close
    blocks while another thread reads).
    """

    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray()

    def _fill(self):
        data = self.sock.recv(BUF)
        self.buf += data
        return bool(data)

    def _until(self, mark, limit):
        while True:
            i = self.buf.find(mark)
            if i >= 0:
                out = bytes(self.buf[:i + len(mark)])
                del self.buf[:i + len(mark)]
                return out
            if len(self.buf) > limit:
                raise OSError("line too long")
            if not self._fill():
                return None

    def head(self, limit=65536):
        """The request line and headers, or None at end of stream."""
        return self._until(b"\r\n\r\n", limit)

    def readline(self, limit=4096):
        return self._until(b"\n", limit) or b""

    def read(self, n=BUF):
        """Up to N bytes (buffered ones first); b"" at end of stream."""
        if self.buf:
            out = bytes(self.buf[:n])
            del self.buf[:n]
            return out
        return self.sock.recv(min(n, BUF))


def _parse_head(head):
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    method = parts[0].upper()
    path = parts[1] if len(parts) > 1 else "/"
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            key, value = line.split(":", 1)
            headers[key.strip().lower()] = value.strip()
    return method, path, headers


def _drain_body(reader, headers):
    """Read the request body away so the client can read our answer."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            line = reader.readline()
            if not line:
                return
            size = int(line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while reader.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return
            _skip(reader, size + 2)
    else:
        _skip(reader, int(headers.get("content-length") or 0))


def _skip(reader, n):
    while n > 0:
        data = reader.read(min(n, BUF))
        if not data:
            return
        n -= len(data)


def _answer(rule):
    reason = _REASONS.get(rule.status, "Fault")
    body = (rule.body or "%d %s (devcloud fault proxy)\n"
            % (rule.status, reason)).encode()
    lines = ["HTTP/1.1 %d %s" % (rule.status, reason),
             "Content-Type: %s" % rule.content_type,
             "Content-Length: %d" % len(body), "Connection: close"]
    if rule.retry_after is not None:
        lines.append("Retry-After: %s" % rule.retry_after)
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def _shutdown(sock, how):
    with contextlib.suppress(OSError):
        sock.shutdown(how)


def _reset(sock):
    """Abort with RST rather than FIN: a crash, not a clean end."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                        struct.pack("ii", 1, 0))
    sock.close()


def _pump_in(reader, upstream):
    """Client to upstream (the rest of the request)."""
    try:
        while True:
            data = reader.read()
            if not data:
                break
            upstream.sendall(data)
        upstream.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def _pump_out(upstream, client, limit=None, flip=None, rate=None):
    """Upstream to client; True when LIMIT bytes were sent and it cut.
    The byte at FLIP (if any) goes out inverted; RATE (bytes/s) paces it.
    """
    buf = bytearray(BUF)
    view = memoryview(buf)
    sent = 0
    step = BUF if rate is None else max(4096, min(BUF, int(rate) // 10))
    began = time.monotonic()
    while True:
        if rate is not None:
            ahead = began + sent / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
        want = step if limit is None else min(step, limit - sent)
        if want <= 0:
            return True
        n = upstream.recv_into(buf, want)
        if not n:
            _shutdown(client, socket.SHUT_WR)
            return False
        if flip is not None and sent <= flip < sent + n:
            buf[flip - sent] ^= 0xff
        client.sendall(view[:n])
        sent += n
