"""Integrity after authentication without TLS (issue 11, item 3).

A man in the middle that fixes up everything it can compute without the
session key (CRC-32, xxh3) rewrites control frames and objects, replays
and reorders frames, or moves them between connections: every change is
detected and never accepted, in sha512 and xxh3-only modes, and the
transfer still completes bit-exact once the attack stops.
"""

import hashlib
import os
import socket
import threading
import zlib


from dtn_migrate.transfer import checksum
from dtn_migrate.transfer import errors
from dtn_migrate.transfer.source import transfer as source
from dtn_migrate.transfer.transport import stream
from dtn_migrate.transfer.wire import auth
from dtn_migrate.transfer.wire import handshake
from dtn_migrate.transfer.wire import protocol as P
from tests import mitm
from tests.unit.transfer import test_engine
from tests.unit import testcase

KEY = test_engine.KEY
MiB = 1 << 20
TIMEOUT = 10.0


def connected_pair(caps=P.Caps.FRAME_AUTH):
    """(source side, sink side) Connections after a real handshake."""
    a, b = socket.socketpair()
    for s in (a, b):
        s.settimeout(TIMEOUT)
    src, snk = stream.Connection(a, "sink"), stream.Connection(b, "src")
    connect = P.Connect(P.VERSION, P.VERSION, P.Role.CONTROL, 0, caps,
                        os.urandom(16), 0, 1 << 20, 1, auth.nonce(), "src",
                        sink="sink")
    out = {}

    def serve():
        out["server"] = handshake.server(snk, lambda p: KEY,
                                         require_frame_auth=False,
                                         name="sink")
        snk.send(P.ConnectAck(1, 1 << 20, 1, 64, P.DataPlane.TCP, "sink"))
    t = threading.Thread(target=serve)
    t.start()
    handshake.client(src, connect, KEY)
    t.join(TIMEOUT)
    return src, snk


class TestFrameTags(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.src, self.snk = connected_pair()
        self.addCleanup(self.src.close)
        self.addCleanup(self.snk.close)

    def sealed(self, msg, conn=None):
        """The bytes ``conn`` (default: the source side) would send."""
        conn = conn or self.src
        frame = P.encode_frame(msg, P.FLAG_TAG)
        return frame + conn._seal.tag(frame)

    def test_keys_differ_per_direction_and_connection(self):
        other, other_snk = connected_pair()
        self.addCleanup(other.close)
        self.addCleanup(other_snk.close)
        keys = {self.src._seal._key, self.src._open._key,
                self.src.object_key, other._seal._key, other._open._key,
                other.object_key}
        self.assertEqual(6, len(keys))
        self.assertEqual(self.src._seal._key, self.snk._open._key)
        self.assertEqual(self.src.object_key, self.snk.object_key)

    def test_good_frames_both_ways(self):
        for i in range(50):
            self.src.send(P.Bye(i))
            self.assertEqual(P.Bye(i), self.snk.recv())
            self.snk.send(P.BlockNack(i, i, 8))
            self.assertEqual(P.BlockNack(i, i, 8), self.src.recv())

    def test_rewritten_frame_with_fixed_crc(self):
        """Many control frames, each rewritten with its CRC fixed."""
        for i in range(20):
            good = self.sealed(P.FileClose(i, P.CloseStatus.DECLARE, 0, 100,
                                           bytes(64)))
            forged = P.encode_frame(P.FileClose(
                i, P.CloseStatus.DECLARE, 0, 100, b"\x01" * 64), P.FLAG_TAG)
            self.src.sock.sendall(forged + good[len(forged):])
            exc = self.assertRaises(errors.IntegrityError, self.snk.recv)
            self.assertIn("fails its authentication tag", str(exc))
            self.assertEqual(errors.Code.INTEGRITY, exc.code)

    def test_replayed_frame(self):
        frame = self.sealed(P.Bye(7))
        self.src.sock.sendall(frame + frame)
        self.assertEqual(P.Bye(7), self.snk.recv())
        self.assertRaises(errors.IntegrityError, self.snk.recv)

    def test_reordered_frames(self):
        first, second = self.sealed(P.Bye(1)), self.sealed(P.Bye(2))
        self.src.sock.sendall(second + first)
        self.assertRaises(errors.IntegrityError, self.snk.recv)

    def test_frame_from_another_connection(self):
        other, other_snk = connected_pair()
        self.addCleanup(other.close)
        self.addCleanup(other_snk.close)
        self.src.sock.sendall(self.sealed(P.Bye(1), other))
        self.assertRaises(errors.IntegrityError, self.snk.recv)

    def test_untagged_frame_after_handshake(self):
        self.src.sock.sendall(P.encode_frame(P.Bye(1)))
        exc = self.assertRaises(errors.IntegrityError, self.snk.recv)
        self.assertIn("lacks an authentication tag", str(exc))

    def test_sink_requires_frame_auth(self):
        a, b = socket.socketpair()
        src, snk = stream.Connection(a, "sink"), stream.Connection(b, "src")
        self.addCleanup(src.close)
        self.addCleanup(snk.close)
        out = {}

        def serve():
            try:
                handshake.server(snk, lambda p: KEY, name="sink")
            except errors.TransferError as exc:
                out["exc"] = exc
        t = threading.Thread(target=serve)
        t.start()
        connect = P.Connect(P.VERSION, P.VERSION, P.Role.CONTROL, 0, 0,
                            os.urandom(16), 0, 1 << 20, 1, auth.nonce(),
                            "src", sink="sink")
        exc = self.assertRaises(errors.PeerError, handshake.client, src,
                                connect, KEY)
        t.join(TIMEOUT)
        self.assertIn("requires frame authentication", str(exc))
        self.assertIsInstance(out["exc"], errors.AuthenticationError)

    def test_version_3_peer_named(self):
        """An agent of before the sink name (v3) is told to upgrade."""
        a, b = socket.socketpair()
        snk = stream.Connection(b, "src")
        self.addCleanup(snk.close)
        self.addCleanup(a.close)
        body = P.Connect(3, 3, P.Role.CONTROL, 0, 0, os.urandom(16), 0,
                         1 << 20, 1, auth.nonce(), "src").encode()
        a.sendall(P.HEADER.pack(P.MAGIC, 3, P.MsgType.CONNECT, 0, len(body),
                                zlib.crc32(body)) + body)
        exc = self.assertRaises(errors.ProtocolError, handshake.server, snk,
                                lambda p: KEY, name="sink")
        self.assertEqual(errors.Code.VERSION, exc.code)
        self.assertIn("speaks protocol version 3, this agent 4: upgrade the "
                      "older agent", str(exc))

    def test_older_peer_named(self):
        """A version 1 frame gets a clear answer."""
        a, b = socket.socketpair()
        snk = stream.Connection(b, "src")
        self.addCleanup(snk.close)
        self.addCleanup(a.close)
        a.sendall(P.HEADER.pack(P.MAGIC, 1, P.MsgType.CONNECT, 0, 0, 0))
        exc = self.assertRaises(errors.ProtocolError, handshake.server, snk,
                                lambda p: KEY, name="sink")
        self.assertEqual(errors.Code.VERSION, exc.code)
        self.assertIn("speaks protocol version 1, this agent %d" % P.VERSION,
                      str(exc))


class TestObjectDigest(test_engine.EngineTestCase):
    """An object whose bytes do not match its NEW_BLOCK's keyed digest
    (what RDMA-read bytes, which no frame tag covers, would show) is
    refused and asked for again; with the right digest it is taken.
    """

    def test_wrong_digest_nacked(self):
        cfg = self.cfg(object_size=64 << 10)
        server = self.start_sink(cfg)
        peer = source.Peer("sink", "127.0.0.1", server.port, KEY)
        tid = os.urandom(16)

        def connect(role, epoch):
            conn, ack = source.open_connection(peer, P.Connect(
                P.VERSION, P.VERSION, role, 0, 0, tid, epoch, 64 << 10, 1,
                auth.nonce(), "source"), cfg)
            self.addCleanup(conn.close)
            return conn, ack
        control, ack = connect(P.Role.CONTROL, 0)
        data = os.urandom(64 << 10)
        control.send(P.NewFile(0, P.FileFlags.NO_SHA512, len(data), 0,
                               0o644, 64 << 10, bytes(64), "d.img"))
        self.assertEqual(P.FileStatus.OPEN, control.recv().status)
        stream_conn, _ = connect(P.Role.DATA, ack.epoch)
        xxh3 = checksum.xxh3(data)
        for forged in (bytes(16), os.urandom(16)):
            stream_conn.send(P.NewBlock(0, 0, 0, len(data), xxh3,
                                        mac=forged), payload=data)
            nack = control.recv(expect=(P.MsgType.BLOCK_NACK,))
            self.assertEqual(errors.Code.INTEGRITY, nack.code)
        # The tag of the same object under another nonce is refused.
        mac = auth.object_mac(control.object_key, 0, 0, 0, len(data), 1)
        mac.update(data)
        stream_conn.send(P.NewBlock(0, 0, 0, len(data), xxh3, nonce=2,
                                    mac=auth.object_tag(mac)), payload=data)
        nack = control.recv(expect=(P.MsgType.BLOCK_NACK,))
        self.assertEqual(errors.Code.INTEGRITY, nack.code)
        mac = auth.object_mac(control.object_key, 0, 0, 0, len(data), 3)
        mac.update(data)
        stream_conn.send(P.NewBlock(0, 0, 0, len(data), xxh3, nonce=3,
                                    mac=auth.object_tag(mac)), payload=data)
        self.assertEqual(P.MsgType.BLOCK_SYNC, control.recv().TYPE)
        rec = server.status(tid.hex(), with_files=False)
        self.assertEqual(3, rec["objects_corrupt"], rec)


class TestManInTheMiddle(test_engine.EngineTestCase):
    """Whole transfers through a frame-aware man in the middle."""

    SIZE = 4 * MiB

    def run_attack(self, kind, count, verify=True, streams=2,
                   forged_sha512=None, frame_auth=True):
        name = "%s-%s.img" % (kind, verify)
        path = os.path.join(self.src, name)
        test_engine.write_file(path, self.SIZE, len(name))
        cfg = self.cfg(streams=streams, verify_sha512=verify,
                       frame_auth=frame_auth, max_object_retries=count + 4)
        server = self.start_sink(cfg)
        attack = mitm.Attacks(kind, count, forged_sha512)
        relay = mitm.Mitm(("127.0.0.1", server.port), attack)
        self.addCleanup(relay.close)
        hashes = None
        if verify:
            with open(path, "rb") as f:
                hashes = {name: hashlib.sha512(f.read()).hexdigest()}
        t = self.transfer(relay.port, [name], cfg, hashes=hashes)
        result = self.run_transfer(t, timeout=120)
        self.assertEqual(count, attack.hits, "the attack did not run")
        return name, result, t, server

    def assertSafe(self, kind, count, verify, **kw):
        name, result, t, server = self.run_attack(kind, count, verify, **kw)
        self.assertEqual("complete", result["state"], t.status())
        self.assertSameFile(name)
        return t, server

    def test_objects_rewritten_with_xxh3_fixed(self):
        """Ten objects rewritten, xxh3 and CRC fixed up: each NEW_BLOCK
        fails its tag (the xxh3 is in its body), the stream is dropped
        and the objects sent again, in both verify modes.
        """
        for verify in (False, True):
            t, server = self.assertSafe("object", 10, verify)
            rec = server.status(t.transfer_id, with_files=False)
            self.assertIn("NEW_BLOCK frame", rec["last_error"])
            self.assertIn("fails its authentication tag", rec["last_error"])
            self.assertGreater(t.status()["attempts"], 1)

    def test_control_frames_rewritten_with_crc_fixed(self):
        """NEW_FILE and FILE_CLOSE declare another sha512 (CRC fixed):
        the sink drops the connection, the source reconnects.
        """
        t, _ = self.assertSafe("control", 3, True)
        self.assertGreaterEqual(t.status()["attempts"], 2)

    def test_forged_file_and_hash(self):
        """Object 0 and the sha512 that NEW_FILE and FILE_CLOSE declare,
        forged to match each other: what an unauthenticated sink verifies
        as whole.
        """
        for verify in (False, True):
            name = "forge-%s.img" % verify
            path = os.path.join(self.src, name)
            test_engine.write_file(path, self.SIZE, len(name))
            with open(path, "rb") as f:
                data = bytearray(f.read())
            data[0] ^= 0xFF
            forged = hashlib.sha512(bytes(data)).digest()
            # xxh3 only: no FILE_CLOSE DECLARE to forge.
            self.assertSafe("forge", 3 if verify else 2, verify,
                            forged_sha512=forged)

    def test_replayed_and_reordered_objects(self):
        for kind in ("replay", "reorder"):
            self.assertSafe(kind, 3, False, streams=1)

    def test_without_frame_auth_the_forgery_lands(self):
        """What the tags prevent: with frame authentication off (as
        before protocol 2) the rewritten objects are accepted.
        """
        name, result, _t, _s = self.run_attack("object", 5, verify=False,
                                               frame_auth=False)
        self.assertEqual("complete", result["state"])
        with open(os.path.join(self.src, name), "rb") as a, \
                open(os.path.join(self.dst, name), "rb") as b:
            self.assertNotEqual(a.read(), b.read())
