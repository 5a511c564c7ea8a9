"""Tests of peer authentication: auth, handshake and TLS connections."""

import hashlib
import hmac
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import zlib

import fixtures
import testtools

from dtn_migrate.transfer import errors
from dtn_migrate.transfer.transport import stream
from dtn_migrate.transfer.wire import auth
from dtn_migrate.transfer.wire import handshake
from dtn_migrate.transfer.wire import protocol as P

from tests.unit import testcase

KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))
NONCE_S = bytes(range(50, 82))
TIMEOUT = 5.0


SINK = "sink-1"


def make_connect(peer="source-1", version_min=P.VERSION,
                 version_max=P.VERSION, caps=P.Caps.FRAME_AUTH, sink=SINK):
    return P.Connect(version_min, version_max, P.Role.CONTROL, 0, caps,
                     os.urandom(16), 0, 4 << 20, 4, auth.nonce(), peer,
                     sink=sink)


def make_ack():
    return P.ConnectAck(9, 4 << 20, 4, 64, P.DataPlane.TCP, "sink-1")


class ProofTest(testcase.TestCase):

    TRANSCRIPT = b"connect body" + bytes(32)

    def test_sink_proof_is_documented_hmac(self):
        want = hmac.new(KEY, b"dtn-migrate/1 sink" + self.TRANSCRIPT,
                        hashlib.sha256).digest()
        self.assertEqual(want, auth.sink_proof(KEY, self.TRANSCRIPT))
        self.assertEqual(32, len(want))

    def test_source_proof_is_documented_hmac(self):
        proof_s = auth.sink_proof(KEY, self.TRANSCRIPT)
        want = hmac.new(KEY, b"dtn-migrate/1 source" + self.TRANSCRIPT
                        + proof_s, hashlib.sha256).digest()
        self.assertEqual(want,
                         auth.source_proof(KEY, self.TRANSCRIPT, proof_s))

    def test_proofs_depend_on_key(self):
        t = self.TRANSCRIPT
        self.assertNotEqual(auth.sink_proof(KEY, t),
                            auth.sink_proof(OTHER_KEY, t))
        p = auth.sink_proof(KEY, t)
        self.assertNotEqual(auth.source_proof(KEY, t, p),
                            auth.source_proof(OTHER_KEY, t, p))

    def test_proofs_depend_on_transcript(self):
        t = self.TRANSCRIPT
        self.assertNotEqual(auth.sink_proof(KEY, t),
                            auth.sink_proof(KEY, t + b"x"))
        p = auth.sink_proof(KEY, t)
        self.assertNotEqual(auth.source_proof(KEY, t, p),
                            auth.source_proof(KEY, t[:-1] + b"\x01", p))
        self.assertNotEqual(auth.source_proof(KEY, t, p),
                            auth.source_proof(KEY, t, bytes(32)))

    def test_labels_separate_directions(self):
        # A sink proof reflected back is not a source proof.
        t = self.TRANSCRIPT
        self.assertNotEqual(auth.sink_proof(KEY, t),
                            auth.source_proof(KEY, t, b""))

    def test_deterministic(self):
        self.assertEqual(auth.sink_proof(KEY, b"t"),
                         auth.sink_proof(bytes(KEY), b"t"))

    def test_verify(self):
        p = auth.sink_proof(KEY, b"t")
        self.assertTrue(auth.verify(p, bytes(p)))
        self.assertFalse(auth.verify(p, p[:-1] + bytes([p[-1] ^ 1])))
        self.assertFalse(auth.verify(p, p[:16]))

    def test_nonce(self):
        a, b = auth.nonce(), auth.nonce()
        self.assertEqual(auth.NONCE_SIZE, len(a))
        self.assertNotEqual(a, b)


class ObjectMacTest(testcase.TestCase):
    KEY = b"o" * 32

    def tag(self, data, *place):
        mac = auth.object_mac(self.KEY, *place)
        mac.update(data)
        return auth.object_tag(mac)

    def test_poly1305_under_a_one_time_key(self):
        from cryptography.hazmat.primitives import poly1305
        one_time = hmac.digest(self.KEY, b"dtnm-obj" + bytes.fromhex(
            "00000001" "00000002" "0000000000000003" "00000004"
            "0000000000000005"), "sha256")
        self.assertEqual(poly1305.Poly1305.generate_tag(one_time, b"data"),
                         self.tag(b"data", 1, 2, 3, 4, 5))
        self.assertEqual(auth.TAG_SIZE, len(self.tag(b"", 1, 2, 3, 4, 5)))

    def test_every_field_and_the_bytes_count(self):
        base = self.tag(b"data", 1, 2, 3, 4, 5)
        for place in ((9, 2, 3, 4, 5), (1, 9, 3, 4, 5), (1, 2, 9, 4, 5),
                      (1, 2, 3, 9, 5), (1, 2, 3, 4, 9)):
            self.assertNotEqual(base, self.tag(b"data", *place))
        self.assertNotEqual(base, self.tag(b"datA", 1, 2, 3, 4, 5))
        self.assertNotEqual(base, auth.object_tag(auth.object_mac(
            b"p" * 32, 1, 2, 3, 4, 5)))

    def test_no_key(self):
        self.assertIsNone(auth.object_mac(None, 1, 2, 3, 4, 5))
        self.assertEqual(bytes(auth.TAG_SIZE), auth.object_tag(None))


class LoadKeyTest(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def keyfile(self, data):
        path = os.path.join(self.tmp, "key")
        with open(path, "wb") as f:
            f.write(data)
        return path

    def test_hex_text(self):
        self.assertEqual(KEY, auth.load_key(text=KEY.hex()))
        self.assertEqual(KEY, auth.load_key(text=" %s\n" % KEY.hex()))
        self.assertEqual(KEY, auth.load_key(text=KEY.hex().upper()))

    def test_raw_text(self):
        self.assertEqual(b"correct horse battery staple",
                         auth.load_key(text="correct horse battery staple"))
        self.assertEqual("\u00fcber-secret-pass".encode("utf-8"),
                         auth.load_key(text="\u00fcber-secret-pass"))
        # Odd number of hex digits is not hex: used raw.
        odd = "a" * 33
        self.assertEqual(odd.encode(), auth.load_key(text=odd))

    def test_hex_file(self):
        path = self.keyfile(KEY.hex().encode() + b"\n")
        self.assertEqual(KEY, auth.load_key(path=path))

    def test_binary_file(self):
        raw = b"\xff\xfe" + bytes(range(40, 60))
        self.assertEqual(raw, auth.load_key(path=self.keyfile(raw)))

    def test_path_wins_over_text(self):
        path = self.keyfile(KEY.hex().encode())
        self.assertEqual(KEY, auth.load_key(text=OTHER_KEY.hex(),
                                            path=path))

    def test_nothing(self):
        self.assertIsNone(auth.load_key())
        self.assertIsNone(auth.load_key(text=""))

    def test_too_short(self):
        self.assertRaises(ValueError, auth.load_key, text="short")
        # 30 hex digits are only 15 bytes.
        self.assertRaises(ValueError, auth.load_key, text="ab" * 15)
        self.assertRaises(ValueError, auth.load_key,
                          path=self.keyfile(b"ab" * 15 + b"\n"))
        self.assertRaises(ValueError, auth.load_key,
                          path=self.keyfile(b"   \n"))
        self.assertEqual(16, len(auth.load_key(text="ab" * 16)))

    def test_missing_file(self):
        self.assertRaises(OSError, auth.load_key,
                          path=os.path.join(self.tmp, "nope"))


class ServerThread(threading.Thread):
    """Run ``handshake.server`` on a connection.

    On success, send ``reply`` (a ConnectAck unless told otherwise).
    """

    def __init__(self, conn, lookup, reply=None, name=SINK):
        super().__init__(daemon=True)
        self.name = name
        self.conn = conn
        self.lookup = lookup
        self.reply = reply if reply is not None else make_ack()
        self.result = None
        self.exc = None
        self.peers = []

    def _lookup(self, peer):
        self.peers.append(peer)
        return self.lookup(peer)

    def run(self):
        try:
            self.result = handshake.server(self.conn, self._lookup,
                                           name=self.name)
            self.conn.send(self.reply)
        except Exception as exc:  # noqa: B902 - examined by the test
            self.exc = exc

    def finish(self, test):
        self.join(TIMEOUT)
        test.assertFalse(self.is_alive(), "server thread hung")


class HandshakeTest(testcase.TestCase):

    def setUp(self):
        super().setUp()
        a, b = socket.socketpair()
        for s in (a, b):
            s.settimeout(TIMEOUT)
        self.sconn = stream.Connection(a, "source-side")
        self.cconn = stream.Connection(b, "sink-side")
        self.addCleanup(self.sconn.close)
        self.addCleanup(self.cconn.close)

    def serve(self, lookup=lambda peer: KEY, reply=None, name=SINK):
        t = ServerThread(self.sconn, lookup, reply, name)
        t.start()
        return t

    def test_success(self):
        server = self.serve()
        connect = make_connect()
        ack = handshake.client(self.cconn, connect, KEY)
        server.finish(self)
        self.assertIsNone(server.exc)
        self.assertEqual(make_ack(), ack)
        got_connect, key = server.result
        self.assertEqual(connect, got_connect)
        self.assertEqual(KEY, key)
        self.assertEqual(["source-1"], server.peers)

    def test_connection_usable_after_handshake(self):
        server = self.serve()
        handshake.client(self.cconn, make_connect(), KEY)
        server.finish(self)
        self.cconn.send(P.Bye())
        self.assertEqual(P.Bye(), self.sconn.recv())

    def test_sink_error_instead_of_ack(self):
        reply = P.Error(errors.Code.LIMIT, 0, P.NO_FILE, "too many")
        server = self.serve(reply=reply)
        exc = self.assertRaises(errors.PeerError, handshake.client,
                                self.cconn, make_connect(), KEY)
        server.finish(self)
        self.assertEqual(errors.Code.LIMIT, exc.code)
        self.assertFalse(exc.fatal)
        self.assertIn("too many", str(exc))

    def assertServerDidNotAuthenticate(self, server):
        server.finish(self)
        self.assertIsNone(server.result)
        self.assertIsInstance(server.exc, (errors.AuthenticationError,
                                           ConnectionError))

    def test_client_wrong_key(self):
        server = self.serve(lambda peer: KEY)
        exc = self.assertRaises(errors.AuthenticationError,
                                handshake.client, self.cconn,
                                make_connect(), OTHER_KEY)
        self.assertEqual(errors.Code.AUTH, exc.code)
        # The source checks the sink first and hangs up without a proof.
        self.cconn.close()
        self.assertServerDidNotAuthenticate(server)

    def test_server_wrong_key(self):
        server = self.serve(lambda peer: OTHER_KEY)
        self.assertRaises(errors.AuthenticationError, handshake.client,
                          self.cconn, make_connect(), KEY)
        self.cconn.close()
        self.assertServerDidNotAuthenticate(server)

    def test_unknown_peer(self):
        server = self.serve(lambda peer: None)
        self.assertRaises(errors.AuthenticationError, handshake.client,
                          self.cconn, make_connect("stranger"), KEY)
        self.cconn.close()
        self.assertServerDidNotAuthenticate(server)
        self.assertEqual(["stranger"], server.peers)

    def forged_auth(self, lookup, proof_fn):
        """Play a source that sends AUTH without checking the sink."""
        server = self.serve(lookup)
        connect = make_connect()
        self.cconn.send(connect)
        challenge = self.cconn.recv(expect=(P.MsgType.CHALLENGE,))
        self.assertEqual(P.VERSION, challenge.version)
        transcript = auth.transcript(connect.encode(), challenge.nonce,
                                     challenge.sink)
        proof_c = proof_fn(transcript, challenge.proof)
        self.cconn.send(P.Auth(proof_c))
        # Keys as a source holding KEY derives them: a sink that accepted
        # the proof tags its CONNECT_ACK; a refusal comes untagged.
        keys = auth.session_keys(KEY, transcript, challenge.proof, proof_c)
        self.cconn.authenticate(keys.source, keys.sink, keys.objects)
        reply = self.cconn.recv()
        server.finish(self)
        return server, reply

    def assertRefusedAuth(self, server, reply):
        self.assertIsInstance(server.exc, errors.AuthenticationError)
        self.assertIsNone(server.result)
        self.assertIsInstance(reply, P.Error)
        self.assertEqual(errors.Code.AUTH, reply.code)
        self.assertEqual(1, reply.fatal)

    def test_server_refuses_wrong_key_proof(self):
        server, reply = self.forged_auth(
            lambda peer: KEY,
            lambda t, ps: auth.source_proof(OTHER_KEY, t, ps))
        self.assertRefusedAuth(server, reply)

    def test_server_refuses_reflected_proof(self):
        server, reply = self.forged_auth(lambda peer: KEY,
                                         lambda t, ps: ps)
        self.assertRefusedAuth(server, reply)

    def test_server_refuses_unknown_peer_even_with_proof(self):
        server, reply = self.forged_auth(
            lambda peer: None, lambda t, ps: auth.source_proof(KEY, t, ps))
        self.assertRefusedAuth(server, reply)

    def test_forged_path_accepts_right_key(self):
        # Control for the forged tests: the same client path succeeds
        # with the right key.
        server, reply = self.forged_auth(
            lambda peer: KEY, lambda t, ps: auth.source_proof(KEY, t, ps))
        self.assertIsNone(server.exc)
        self.assertEqual(make_ack(), reply)

    # Issue 36 item 10: both agents' names are bound.
    def test_sink_refuses_connection_meant_for_another_sink(self):
        # sink-2 holds the same key, but the source dialled sink-1.
        server = self.serve(name="sink-2")
        exc = self.assertRaises(errors.PeerError, handshake.client,
                                self.cconn, make_connect(), KEY)
        server.finish(self)
        self.assertEqual(errors.Code.AUTH, exc.code)
        self.assertTrue(exc.fatal)
        self.assertIn("this is sink 'sink-2', not 'sink-1'", str(exc))
        self.assertIsInstance(server.exc, errors.NameMismatch)
        self.assertIn("(peer 'source-1') meant to reach sink 'sink-1', but "
                      "this is sink 'sink-2'", str(server.exc))
        self.assertIsNone(server.result)
        self.assertEqual([], server.peers)      # no key looked up

    def challenge_as(self, proved, named):
        """Play a sink that holds KEY and answers CONNECT with a proof
        over the sink name ``proved`` and the name ``named``.
        """
        def action(connect):
            transcript = auth.transcript(connect.encode(), NONCE_S, proved)
            self.sconn.send(P.Challenge(P.VERSION, NONCE_S,
                                        auth.sink_proof(KEY, transcript),
                                        named))
        self.sink_that(action, with_connect=True)

    def test_source_refuses_sink_of_another_name(self):
        # A sink that shares the key and proves it, but answers with its
        # own name (sink-2) where the source dialled sink-1.
        self.challenge_as("sink-2", "sink-2")
        exc = self.assertRaises(errors.NameMismatch, handshake.client,
                                self.cconn, make_connect(), KEY)
        self.assertIsInstance(exc, errors.AuthenticationError)
        self.assertIn("from 'source-1' was meant for sink 'sink-1' but "
                      "reached sink 'sink-2'", str(exc))

    def test_sink_name_is_in_the_proof(self):
        # The name in the CHALLENGE changed on the way: the proof fails.
        self.challenge_as("sink-1", "sink-2")
        exc = self.assertRaises(errors.AuthenticationError,
                                handshake.client, self.cconn,
                                make_connect(), KEY)
        self.assertNotIsInstance(exc, errors.NameMismatch)
        self.assertIn("could not prove the shared key", str(exc))
        self.assertIn("calls itself 'sink-2', not 'sink-1'", str(exc))

    def test_source_must_name_the_sink(self):
        self.assertRaises(ValueError, handshake.client, self.cconn,
                          make_connect(sink=""), KEY)

    def test_version_mismatch(self):
        server = self.serve()
        connect = make_connect(version_min=P.VERSION + 1,
                               version_max=P.VERSION + 2)
        exc = self.assertRaises(errors.PeerError, handshake.client,
                                self.cconn, connect, KEY)
        self.assertEqual(errors.Code.VERSION, exc.code)
        server.finish(self)
        self.assertIsInstance(server.exc, errors.ProtocolError)
        self.assertEqual(errors.Code.VERSION, server.exc.code)
        self.assertEqual([], server.peers)

    def test_version_mismatch_frame(self):
        server = self.serve()
        self.cconn.send(make_connect(version_min=0, version_max=0))
        reply = self.cconn.recv()
        server.finish(self)
        self.assertIsInstance(reply, P.Error)
        self.assertEqual(errors.Code.VERSION, reply.code)
        self.assertEqual(1, reply.fatal)
        self.assertEqual(P.NO_FILE, reply.file_id)

    def test_garbage_instead_of_connect(self):
        server = self.serve()
        self.cconn.sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        server.finish(self)
        self.assertIsInstance(server.exc, errors.ProtocolError)
        self.assertIsNone(server.result)

    def test_other_message_instead_of_connect(self):
        server = self.serve()
        self.cconn.send(P.Auth(bytes(32)))
        server.finish(self)
        self.assertIsInstance(server.exc, errors.ProtocolError)
        self.assertIn("before CONNECT", str(server.exc))

    def test_bad_crc_connect(self):
        server = self.serve()
        frame = bytearray(P.encode_frame(make_connect()))
        frame[-1] ^= 0xFF
        self.cconn.sock.sendall(bytes(frame))
        server.finish(self)
        self.assertIsInstance(server.exc, errors.ProtocolError)

    def test_truncated_connect_header(self):
        server = self.serve()
        self.cconn.sock.sendall(P.encode_frame(make_connect())[:7])
        self.cconn.sock.shutdown(socket.SHUT_WR)
        server.finish(self)
        self.assertIsInstance(server.exc, errors.TruncatedFrame)

    def test_truncated_connect_body(self):
        server = self.serve()
        frame = P.encode_frame(make_connect())
        self.cconn.sock.sendall(frame[:P.HEADER_SIZE + 20])
        self.cconn.sock.shutdown(socket.SHUT_WR)
        server.finish(self)
        self.assertIsInstance(server.exc, errors.TruncatedFrame)

    def test_connect_closed_right_after_header(self):
        # The header announced a body; closing before any of it is a
        # truncated frame, not a clean end of the connection.
        server = self.serve()
        frame = P.encode_frame(make_connect())
        self.cconn.sock.sendall(frame[:P.HEADER_SIZE])
        self.cconn.sock.shutdown(socket.SHUT_WR)
        server.finish(self)
        self.assertIsInstance(server.exc, errors.TruncatedFrame)

    def test_connect_with_short_declared_body(self):
        # A complete frame whose body stops inside the CONNECT fields.
        body = make_connect().encode()[:40]
        frame = P.HEADER.pack(P.MAGIC, P.VERSION, P.MsgType.CONNECT, 0,
                              len(body), zlib.crc32(body)) + body
        server = self.serve()
        self.cconn.sock.sendall(frame)
        server.finish(self)
        self.assertIsInstance(server.exc, errors.TruncatedFrame)

    def sink_that(self, action, with_connect=False):
        """Play a sink that reads CONNECT, then runs ``action`` (given
        the CONNECT ``with_connect``).
        """
        def run():
            connect = self.sconn.recv(expect=(P.MsgType.CONNECT,))
            if with_connect:
                action(connect)
            else:
                action()
        t = threading.Thread(target=run, daemon=True)
        t.start()
        self.addCleanup(t.join, TIMEOUT)

    def test_sink_hangs_up_after_connect(self):
        # Lost before the sink proved or refused anything: a network
        # fault to retry, not an authentication failure.
        self.sink_that(self.sconn.close)
        exc = self.assertRaises(ConnectionError, handshake.client,
                                self.cconn, make_connect(), KEY)
        self.assertIn("closed", str(exc))

    def test_sink_truncates_challenge(self):
        frame = P.encode_frame(P.Challenge(1, NONCE_S, bytes(32), SINK))

        def action():
            self.sconn.sock.sendall(frame[:P.HEADER_SIZE + 10])
            self.sconn.close()
        self.sink_that(action)
        self.assertRaises(ConnectionError, handshake.client, self.cconn,
                          make_connect(), KEY)

    def test_sink_refuses_before_challenge(self):
        def action():
            self.sconn.send(P.Error(errors.Code.LIMIT, 1, P.NO_FILE,
                                    "too many sessions"))
        self.sink_that(action)
        exc = self.assertRaises(errors.PeerError, handshake.client,
                                self.cconn, make_connect(), KEY)
        self.assertEqual(errors.Code.LIMIT, exc.code)

    def test_sink_sends_unexpected_message(self):
        self.sink_that(lambda: self.sconn.send(P.Bye()))
        self.assertRaises(errors.ProtocolError, handshake.client,
                          self.cconn, make_connect(), KEY)


def _openssl(cwd, *args):
    subprocess.run(("openssl",) + args, cwd=cwd, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _make_ca(cwd, name):
    _openssl(cwd, "req", "-x509", "-newkey", "ec", "-pkeyopt",
             "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
             name + ".key", "-out", name + ".pem", "-days", "2", "-subj",
             "/CN=%s" % name, "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")


def _make_leaf(cwd, name, ca, usage, serial):
    ext = os.path.join(cwd, name + ".ext")
    with open(ext, "w") as f:
        f.write("basicConstraints=CA:FALSE\n"
                "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                "extendedKeyUsage=%s\n" % usage)
    _openssl(cwd, "req", "-newkey", "ec", "-pkeyopt",
             "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
             name + ".key", "-out", name + ".csr", "-subj", "/CN=%s" % name)
    _openssl(cwd, "x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem",
             "-CAkey", ca + ".key", "-set_serial", str(serial),
             "-days", "2", "-out", name + ".pem", "-extfile", ext)


@testtools.skipUnless(shutil.which("openssl"), "needs the openssl command")
class TlsTest(testcase.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.dir = tempfile.mkdtemp(prefix="dtn-tls-")
        _make_ca(cls.dir, "ca")
        _make_ca(cls.dir, "evil-ca")
        _make_leaf(cls.dir, "server", "ca", "serverAuth", 1001)
        _make_leaf(cls.dir, "client", "ca", "clientAuth", 1002)
        _make_leaf(cls.dir, "evil-client", "evil-ca", "clientAuth", 1003)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)
        super().tearDownClass()

    def f(self, name):
        return os.path.join(self.dir, name)

    def setUp(self):
        super().setUp()
        self.lsock = socket.socket()
        self.addCleanup(self.lsock.close)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(4)
        self.lsock.settimeout(TIMEOUT)
        self.port = self.lsock.getsockname()[1]

    def server_ctx(self, require_client=True):
        return auth.server_context(self.f("server.pem"), self.f("server.key"),
                                   self.f("ca.pem") if require_client
                                   else None)

    def client_ctx(self, cert="client", ca="ca"):
        if cert is None:
            return auth.client_context(self.f(ca + ".pem"))
        return auth.client_context(self.f(ca + ".pem"),
                                   self.f(cert + ".pem"),
                                   self.f(cert + ".key"))

    def accept_in_thread(self, ctx, echo=True):
        """Accept one connection.

        With ``echo``, receive one message and answer Bye(ACK).
        """
        out = {}

        def run():
            try:
                sock, addr = self.lsock.accept()
                conn = stream.accept(sock, addr, 0, 0, tls_context=ctx,
                                     handshake_timeout=TIMEOUT)
                out["conn"] = conn
                if echo:
                    out["msg"] = conn.recv()
                    conn.send(P.Bye(P.ByeFlags.ACK))
            except Exception as exc:  # noqa: B902 - examined by the test
                out["exc"] = exc

        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t, out

    def connect(self, ctx):
        conn = stream.connect("127.0.0.1", self.port, TIMEOUT, 0, 0,
                              tls_context=ctx)
        self.addCleanup(conn.close)
        return conn

    def join(self, t, out):
        t.join(TIMEOUT)
        self.assertFalse(t.is_alive(), "accept thread hung")
        if "conn" in out:
            self.addCleanup(out["conn"].close)

    def test_mutual_tls(self):
        t, out = self.accept_in_thread(self.server_ctx())
        conn = self.connect(self.client_ctx())
        self.assertTrue(conn.tls)
        self.assertFalse(conn.can_sendfile)
        conn.send(P.Bye())
        self.assertEqual(P.Bye(P.ByeFlags.ACK), conn.recv())
        self.join(t, out)
        self.assertNotIn("exc", out)
        self.assertTrue(out["conn"].tls)
        self.assertEqual(P.Bye(), out["msg"])
        subject = dict(x[0] for x in out["conn"].sock.getpeercert()
                       ["subject"])
        self.assertEqual("client", subject["commonName"])

    def test_server_only_tls(self):
        t, out = self.accept_in_thread(self.server_ctx(False))
        conn = self.connect(self.client_ctx(cert=None))
        conn.send(P.Bye())
        self.assertEqual(P.Bye(P.ByeFlags.ACK), conn.recv())
        self.join(t, out)
        self.assertNotIn("exc", out)

    def test_handshake_inside_tls(self):
        out = {}

        def run():
            try:
                sock, addr = self.lsock.accept()
                conn = stream.accept(sock, addr, 0, 0,
                                     tls_context=self.server_ctx(),
                                     handshake_timeout=TIMEOUT)
                out["conn"] = conn
                out["result"] = handshake.server(conn, lambda p: KEY,
                                                 name=SINK)
                conn.send(make_ack())
            except Exception as exc:  # noqa: B902 - examined by the test
                out["exc"] = exc

        t = threading.Thread(target=run, daemon=True)
        t.start()
        conn = self.connect(self.client_ctx())
        self.assertEqual(make_ack(),
                         handshake.client(conn, make_connect(), KEY))
        self.join(t, out)
        self.assertNotIn("exc", out)
        self.assertEqual(KEY, out["result"][1])

    def assertClientRefused(self, ctx):
        t, out = self.accept_in_thread(self.server_ctx())
        try:
            conn = stream.connect("127.0.0.1", self.port, TIMEOUT, 0, 0,
                                  tls_context=ctx)
        except errors.AuthenticationError:
            pass
        else:
            # TLS 1.3: the client finishes before the server has checked
            # its certificate; the refusal shows on first use.
            self.addCleanup(conn.close)
            try:
                conn.send(P.Bye())
                conn.recv()
            except (ConnectionError, errors.TransferError):
                pass
            else:
                self.fail("refused client could still talk")
        self.join(t, out)
        self.assertIsInstance(out.get("exc"), errors.AuthenticationError)
        self.assertNotIn("msg", out)

    def test_client_cert_from_other_ca_refused(self):
        self.assertClientRefused(self.client_ctx(cert="evil-client"))

    def test_client_without_cert_refused(self):
        self.assertClientRefused(self.client_ctx(cert=None))

    def test_client_refuses_unknown_server_ca(self):
        t, out = self.accept_in_thread(self.server_ctx(False), echo=False)
        self.assertRaises(errors.AuthenticationError, stream.connect,
                          "127.0.0.1", self.port, TIMEOUT, 0, 0,
                          tls_context=self.client_ctx(cert=None,
                                                      ca="evil-ca"))
        self.join(t, out)
        self.assertIsInstance(out.get("exc"), errors.AuthenticationError)

    def test_plain_client_to_tls_capable_server(self):
        t, out = self.accept_in_thread(self.server_ctx())
        conn = self.connect(None)
        self.assertFalse(conn.tls)
        self.assertTrue(conn.can_sendfile)
        conn.send(P.Bye())
        self.assertEqual(P.Bye(P.ByeFlags.ACK), conn.recv())
        self.join(t, out)
        self.assertNotIn("exc", out)
        self.assertFalse(out["conn"].tls)
        self.assertEqual(P.Bye(), out["msg"])

    def test_tls_client_to_server_without_context(self):
        t, out = self.accept_in_thread(None, echo=False)
        # The sink just closes: the source sees its handshake cut off.
        self.assertRaises((errors.AuthenticationError, ConnectionError),
                          stream.connect, "127.0.0.1", self.port, TIMEOUT,
                          0, 0, tls_context=self.client_ctx())
        self.join(t, out)
        self.assertIsInstance(out.get("exc"), errors.AuthenticationError)
        self.assertNotIn("conn", out)

    def test_context_settings(self):
        sctx = self.server_ctx()
        self.assertEqual(ssl.CERT_REQUIRED, sctx.verify_mode)
        self.assertEqual(ssl.TLSVersion.TLSv1_2, sctx.minimum_version)
        self.assertEqual(ssl.CERT_NONE, self.server_ctx(False).verify_mode)
        cctx = self.client_ctx()
        self.assertTrue(cctx.check_hostname)
        self.assertEqual(ssl.CERT_REQUIRED, cctx.verify_mode)
        self.assertFalse(auth.client_context(
            self.f("ca.pem"), check_hostname=False).check_hostname)
