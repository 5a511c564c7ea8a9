"""Tests of the wire protocol (dtn_migrate.transfer.wire.protocol)."""

import dataclasses
import random
import struct
import zlib


from dtn_migrate.transfer import errors
from dtn_migrate.transfer.wire import protocol as P

from tests.unit import testcase

SHA = bytes(range(64))
NONCE = bytes(range(32))
PROOF = bytes(range(100, 132))
TID = bytes(range(16))


def samples():
    """One valid message of every type."""
    return [
        P.Connect(1, 1, P.Role.CONTROL, 0, P.Caps.RDMA, TID, 7, 4 << 20, 4,
                  NONCE, "source-\u00e9", b"rdma-endpoint"),
        P.Connect(1, 1, P.Role.DATA, 3, P.Caps.NONE, TID, 7, 4 << 20, 4,
                  NONCE, "source", b"", "sink-\u00e9"),
        P.Connect(1, 1, P.Role.REPORT, 0, P.Caps.NONE, TID, 0, 4 << 20, 1,
                  NONCE, "source"),
        P.Connect(1, 1, P.Role.REQUEST, 0, P.Caps.FRAME_AUTH, TID, 0,
                  4 << 20, 1, NONCE, "source"),
        P.Challenge(1, NONCE, PROOF),
        P.Challenge(4, NONCE, PROOF, "sink"),
        P.Auth(PROOF),
        P.ConnectAck(7, 4 << 20, 4, 64, P.DataPlane.RDMA, "sink",
                     b"\x00\x01", P.Caps.ZERO_EXTENTS | P.Caps.ZSTD),
        P.NewFile(3, P.FileFlags.HAS_SHA512 | P.FileFlags.GROWING,
                  10 << 20, -5, 0o644, 4 << 20, SHA,
                  "dir/\u00fcber \u6587\u4ef6.img", b"\x00\x01\x02"),
        P.FileId(3, P.FileStatus.OPEN, 0, "ok"),
        P.FileId(4, P.FileStatus.REFUSED, errors.Code.NO_SPACE),
        P.NewBlock(3, 2, 8 << 20, 4 << 20, (1 << 64) - 1, 5, 1 << 63,
                   (1 << 64) - 1, bytes(range(16))),
        P.ZeroBlocks(3, 2, 5),
        P.NewBlockZ(3, 2, 8 << 20, 4 << 20, (1 << 64) - 1,
                    P.Encoding.ZSTD, 1000, 7, bytes(range(16))),
        P.BlockSync.from_ranges([(1, 0, 5), (2, 3, 4)]),
        P.BlockNack(1, 2, errors.Code.CHECKSUM),
        P.BlockPulled(1, 2),
        P.FileClose(3, P.CloseStatus.DECLARE, 0, 10 << 20, SHA, ""),
        P.FileClose(3, P.CloseStatus.MISMATCH, errors.Code.HASH_MISMATCH,
                    10 << 20, SHA, "sha512 differs"),
        P.Bye(P.ByeFlags.ACK),
        P.Bye(),
        P.Error(errors.Code.IO, 1, P.NO_FILE, "disk on fire"),
        P.Abort(errors.Code.ABORTED, "cancelled by user"),
        P.Report(1, b'{"state": "active"}'),
        P.Report(0),
    ]


def roundtrip(msg):
    frame = P.encode_frame(msg)
    mtype, length, crc = P.parse_header(frame[:P.HEADER_SIZE])
    body = frame[P.HEADER_SIZE:]
    if len(body) != length:
        raise AssertionError("header length %d, body %d"
                             % (length, len(body)))
    return P.decode_body(mtype, body, crc)


def header(magic=P.MAGIC, version=P.VERSION, mtype=P.MsgType.BYE, flags=0,
           length=4, crc=0):
    return P.HEADER.pack(magic, version, mtype, flags, length, crc)


def decode(cls, body):
    """Decode ``body`` as a ``cls`` message through decode_body."""
    return P.decode_body(cls.TYPE, bytes(body), zlib.crc32(body))


def parse_frame(frame):
    """Parse a whole frame, as a receiver would."""
    mtype, length, crc = P.parse_header(frame[:P.HEADER_SIZE])
    body = frame[P.HEADER_SIZE:P.HEADER_SIZE + length]
    if len(body) != length:
        raise errors.TruncatedFrame("short body")
    return P.decode_body(mtype, body, crc)


class RoundTripTest(testcase.TestCase):

    def test_samples_cover_every_type(self):
        self.assertEqual(set(P.MESSAGES),
                         {type(m).TYPE for m in samples()})

    def test_every_message_round_trips(self):
        for msg in samples():
            got = roundtrip(msg)
            self.assertIs(type(msg), type(got))
            self.assertEqual(msg, got)

    def test_header_fields(self):
        msg = P.Auth(PROOF)
        frame = P.encode_frame(msg)
        magic, version, mtype, flags, length, crc = P.HEADER.unpack(
            frame[:P.HEADER_SIZE])
        self.assertEqual(P.MAGIC, magic)
        self.assertEqual(P.VERSION, version)
        self.assertEqual(P.MsgType.AUTH, mtype)
        self.assertEqual(0, flags)
        self.assertEqual(32, length)
        self.assertEqual(zlib.crc32(PROOF), crc)
        self.assertEqual(PROOF, frame[P.HEADER_SIZE:])

    def test_parse_header_returns_msgtype(self):
        mtype, length, crc = P.parse_header(
            P.encode_frame(P.Bye())[:P.HEADER_SIZE])
        self.assertIsInstance(mtype, P.MsgType)
        self.assertEqual(P.MsgType.BYE, mtype)
        self.assertEqual(4, length)

    def test_empty_strings_and_blobs(self):
        msg = P.Error(0, 0, 0, "")
        self.assertEqual(msg, roundtrip(msg))
        msg = P.BlockSync(b"")
        self.assertEqual(msg, roundtrip(msg))
        self.assertEqual([], list(roundtrip(msg).iter_ranges()))

    def test_block_sync_ranges(self):
        triples = [(0, 0, 1), (7, 100, 200), (0xFFFFFFFE, 1, 0xFFFFFFFF)]
        msg = roundtrip(P.BlockSync.from_ranges(triples))
        self.assertEqual(triples, list(msg.iter_ranges()))

    def test_limits_are_accepted(self):
        good = [
            P.Connect(1, 1, P.Role.DATA, 63, 0, TID, 0, P.MIN_OBJECT_SIZE,
                      P.MAX_STREAMS, NONCE, "p" * 255, b"r" * 4096),
            P.Connect(1, 1, P.Role.CONTROL, 0, 0, TID, 0,
                      P.MAX_OBJECT_SIZE, 1, NONCE, "p"),
            P.NewFile(0, 0, P.MAX_FILE_SIZE, 0, 0, P.MAX_OBJECT_SIZE, SHA,
                      "n" * P.MAX_NAME),
            P.NewFile(0, 0, P.MAX_OBJECTS * P.MIN_OBJECT_SIZE, 0, 0,
                      P.MIN_OBJECT_SIZE, SHA, "x"),
            P.FileId(1, P.FileStatus.SKIP, 0, "m" * P.MAX_MESSAGE_TEXT),
            P.FileClose(1, P.CloseStatus.OK, 0, P.MAX_FILE_SIZE, SHA,
                        "m" * P.MAX_MESSAGE_TEXT),
            P.Error(0, 0, 0, "m" * P.MAX_MESSAGE_TEXT),
            P.Abort(0, "m" * P.MAX_MESSAGE_TEXT),
        ]
        self.assertEqual(P.MAX_NAME, len(good[2].name))
        for msg in good:
            self.assertEqual(msg, roundtrip(msg))

    def test_new_file_nobjects(self):
        msg = P.NewFile(1, 0, 10000, 0, 0, 4096, SHA, "f")
        self.assertEqual(3, msg.nobjects)
        msg = P.NewFile(1, 0, 0, 0, 0, 4096, SHA, "f")
        self.assertEqual(1, msg.nobjects)


class HeaderRejectTest(testcase.TestCase):

    def test_valid_header(self):
        self.assertEqual((P.MsgType.BYE, 4, 9),
                         P.parse_header(header(crc=9)))

    def test_bad_magic(self):
        exc = self.assertRaises(errors.ProtocolError, P.parse_header,
                                header(magic=b"HTTP"))
        self.assertEqual(errors.Code.PROTOCOL, exc.code)

    def test_unknown_version(self):
        for version in (0, P.VERSION + 1, 255):
            exc = self.assertRaises(errors.ProtocolError, P.parse_header,
                                    header(version=version))
            self.assertEqual(errors.Code.VERSION, exc.code)

    def test_unknown_type(self):
        for mtype in (9, 15, 22, 29, 32, 255):
            self.assertRaises(errors.ProtocolError, P.parse_header,
                              header(mtype=mtype))

    def test_reserved_flags(self):
        for flags in (2, 0x8000, 0xFFFE):
            self.assertRaises(errors.ProtocolError, P.parse_header,
                              header(flags=flags))

    def test_body_over_max(self):
        sync = P.MsgType.BLOCK_SYNC
        self.assertEqual(P.MAX_BODY, P.parse_header(
            header(mtype=sync, length=P.MAX_BODY))[1])
        for length in (P.MAX_BODY + 1, 0xFFFFFFFF):
            exc = self.assertRaises(errors.BoundsError, P.parse_header,
                                    header(mtype=sync, length=length))
            self.assertEqual(errors.Code.BOUNDS, exc.code)

    def test_fixed_size_body_length_exact(self):
        """A message of fixed fields has one body length: any other is
        refused from the header, before the body is allocated.
        """
        for mtype, cls in P.MESSAGES.items():
            if cls._struct is None:
                continue
            size = cls._struct.size
            self.assertEqual(size, P.parse_header(
                header(mtype=mtype, length=size))[1])
            for length in (0, size - 1, size + 1, P.MAX_BODY):
                exc = self.assertRaises(errors.BoundsError, P.parse_header,
                                        header(mtype=mtype, length=length))
                self.assertIn("%s body is %d bytes, expected %d"
                              % (mtype.name, length, size), str(exc))

    def test_encode_refuses_body_over_max(self):
        n = P.MAX_BODY // 12 + 1
        msg = P.BlockSync(bytes(12 * n))
        self.assertRaises(errors.BoundsError, P.encode_frame, msg)

    def test_truncated_header(self):
        good = header()
        for n in (0, 1, 11):
            self.assertRaises(errors.TruncatedFrame, P.parse_header,
                              good[:n])
        self.assertRaises(errors.TruncatedFrame, P.parse_header,
                          good + b"\x00")

    def test_crc_mismatch(self):
        frame = P.encode_frame(P.Error(1, 0, 0, "hello"))
        mtype, length, crc = P.parse_header(frame[:P.HEADER_SIZE])
        body = bytearray(frame[P.HEADER_SIZE:])
        self.assertRaises(errors.ProtocolError, P.decode_body, mtype,
                          bytes(body), crc ^ 1)
        body[-1] ^= 0x20
        exc = self.assertRaises(errors.ProtocolError, P.decode_body, mtype,
                                bytes(body), crc)
        self.assertNotIsInstance(exc, errors.TruncatedFrame)


class BodyRejectTest(testcase.TestCase):

    def assertBounds(self, msg):
        body = msg.encode()
        self.assertRaises(errors.BoundsError, decode, type(msg), body)

    def test_trailing_bytes_fixed(self):
        for msg in (P.Auth(PROOF), P.Bye(), P.NewBlock(1, 2, 3, 4, 5)):
            body = msg.encode() + b"\x00"
            exc = self.assertRaises(errors.ProtocolError, decode,
                                    type(msg), body)
            self.assertIn("expected", str(exc))

    def test_short_fixed(self):
        for msg in (P.Auth(PROOF), P.Bye(), P.BlockPulled(1, 2)):
            body = msg.encode()[:-1]
            self.assertRaises(errors.ProtocolError, decode, type(msg), body)
            self.assertRaises(errors.ProtocolError, decode, type(msg), b"")

    def test_trailing_bytes_variable(self):
        for msg in samples():
            if type(msg)._struct is not None:
                continue
            body = msg.encode() + b"\x00"
            exc = self.assertRaises(errors.ProtocolError, decode,
                                    type(msg), body)
            self.assertNotIsInstance(exc, errors.TruncatedFrame)
            self.assertIn("trailing", str(exc))

    def test_truncated_fixed_field(self):
        body = samples()[0].encode()
        for n in (0, 1, 3, 9, 30):
            self.assertRaises(errors.TruncatedFrame, decode, P.Connect,
                              body[:n])

    def test_every_truncation_is_refused(self):
        for msg in samples():
            body = msg.encode()
            for n in range(len(body)):
                self.assertRaises(errors.ProtocolError, decode, type(msg),
                                  body[:n])

    def test_truncated_str(self):
        body = P.FileId(1, 0, 0, "hello").encode()
        self.assertRaises(errors.TruncatedFrame, decode, P.FileId,
                          body[:-2])
        # Only one byte of the u16 length.
        self.assertRaises(errors.TruncatedFrame, decode, P.FileId,
                          body[:8])
        # A length that runs past the body.
        bad = body[:7] + struct.pack("!H", 1000) + b"hello"
        self.assertRaises(errors.TruncatedFrame, decode, P.FileId, bad)

    def test_truncated_blob(self):
        msg = P.NewFile(1, 0, 100, 0, 0, 4096, SHA, "f", b"\x01\x02\x03")
        body = msg.encode()
        self.assertRaises(errors.TruncatedFrame, decode, P.NewFile,
                          body[:-1])
        self.assertRaises(errors.TruncatedFrame, decode, P.NewFile,
                          body[:-5])
        bad = body[:-7] + struct.pack("!I", 0xFFFFFFFF) + b"\x01\x02\x03"
        self.assertRaises(errors.TruncatedFrame, decode, P.NewFile, bad)
        self.assertEqual(msg, decode(P.NewFile, body))

    def test_non_utf8_str(self):
        raw = b"\xff\xfeoops"
        body = (struct.pack("!IBH", 1, 0, 0) + struct.pack("!H", len(raw))
                + raw)
        exc = self.assertRaises(errors.ProtocolError, decode, P.FileId,
                                body)
        self.assertNotIsInstance(exc, errors.TruncatedFrame)
        self.assertIn("UTF-8", str(exc))
        # A lone surrogate encoded the CESU way is not UTF-8 either.
        raw = b"\xed\xa0\x80"
        body = struct.pack("!HH", 1, len(raw)) + raw
        self.assertRaises(errors.ProtocolError, decode, P.Abort, body)

    def test_connect_bounds(self):
        good = samples()[0]
        for field, value in (("streams", 0), ("streams", P.MAX_STREAMS + 1),
                             ("stream", 4), ("stream", 0xFFFF),
                             ("object_size", P.MIN_OBJECT_SIZE - 1),
                             ("object_size", P.MAX_OBJECT_SIZE + 1),
                             ("object_size", 0),
                             ("peer", ""), ("peer", "p" * 256),
                             ("role", 4), ("role", 255),
                             ("rdma", b"r" * 4097)):
            self.assertBounds(dataclasses.replace(good, **{field: value}))

    def test_request_connect_bounds(self):
        good = P.Connect(P.VERSION, P.VERSION, P.Role.REQUEST, 0,
                         P.Caps.FRAME_AUTH, TID, 0, 4 << 20, 1, NONCE,
                         "source")
        self.assertEqual(good, decode(P.Connect, good.encode()))
        self.assertEqual(3, P.Role.REQUEST)
        for field, value in (("streams", 2), ("stream", 1),
                             ("rdma", b"endpoint"), ("epoch", 1),
                             ("epoch", 0xFFFFFFFF)):
            self.assertBounds(dataclasses.replace(good, **{field: value}))

    def test_connect_ack_bounds(self):
        good = P.ConnectAck(1, 4 << 20, 4, 64, P.DataPlane.TCP, "sink")
        for field, value in (("streams", 0), ("streams", P.MAX_STREAMS + 1),
                             ("object_size", P.MIN_OBJECT_SIZE - 1),
                             ("object_size", P.MAX_OBJECT_SIZE + 1),
                             ("data_plane", 2), ("data_plane", 255)):
            self.assertBounds(dataclasses.replace(good, **{field: value}))

    def test_new_file_bounds(self):
        good = P.NewFile(1, 0, 100, 0, 0, 4096, SHA, "f")
        too_many = (P.MAX_OBJECTS * P.MIN_OBJECT_SIZE) + 1
        for field, value in (("file_id", P.NO_FILE),
                             ("size", P.MAX_FILE_SIZE + 1),
                             ("size", (1 << 64) - 1),
                             ("object_size", P.MIN_OBJECT_SIZE - 1),
                             ("object_size", P.MAX_OBJECT_SIZE + 1),
                             ("object_size", 0),
                             ("size", too_many),
                             ("name", ""),
                             ("name", "n" * (P.MAX_NAME + 1)),
                             # 2049 characters, 4098 bytes.
                             ("name", "\u00e9" * 2049)):
            self.assertBounds(dataclasses.replace(good, **{field: value}))

    def test_zero_blocks_bounds(self):
        good = P.ZeroBlocks(1, 0, 1)
        for field, value in (("count", 0), ("index", P.MAX_OBJECTS)):
            self.assertBounds(dataclasses.replace(good, **{field: value}))
        self.assertBounds(P.ZeroBlocks(1, P.MAX_OBJECTS - 1, 2))

    def test_new_block_z_bounds(self):
        good = P.NewBlockZ(1, 0, 0, 4096, 0, P.Encoding.ZSTD, 100)
        for field, value in (("wire_length", 0),
                             ("wire_length", 4097),
                             ("encoding", 0), ("encoding", 2),
                             ("length", P.MAX_OBJECT_SIZE + 1),
                             ("offset", P.MAX_FILE_SIZE + 1)):
            self.assertBounds(dataclasses.replace(good, **{field: value}))

    def test_connect_ack_caps_default(self):
        """A CONNECT_ACK built without caps offers no optional feature."""
        ack = P.ConnectAck(1, 4 << 20, 4, 64, P.DataPlane.TCP, "sink")
        self.assertEqual(0, roundtrip(ack).caps)

    def test_text_bounds(self):
        text = "m" * (P.MAX_MESSAGE_TEXT + 1)
        for msg in (P.FileId(1, 0, 0, text),
                    P.FileClose(1, 0, 0, 0, SHA, text),
                    P.Error(1, 1, 0, text), P.Abort(1, text)):
            self.assertBounds(msg)

    def test_unknown_statuses(self):
        self.assertBounds(P.FileId(1, 4, 0, ""))
        self.assertBounds(P.FileId(1, 255, 0, ""))
        self.assertBounds(P.FileClose(1, 4, 0, 0, SHA, ""))
        self.assertBounds(P.FileClose(1, 255, 0, 0, SHA, ""))
        self.assertBounds(P.FileClose(1, 0, 0, P.MAX_FILE_SIZE + 1, SHA))

    def test_block_sync_not_triples(self):
        for n in (1, 11, 13, 23, 25):
            self.assertBounds(P.BlockSync(bytes(n)))
        for n in (0, 12, 24, 1200):
            self.assertEqual(n // 12, len(list(
                decode(P.BlockSync, P.BlockSync(bytes(n)).encode())
                .iter_ranges())))

    def test_bounds_error_is_protocol_error(self):
        self.assertTrue(issubclass(errors.BoundsError, errors.ProtocolError))
        self.assertTrue(issubclass(errors.TruncatedFrame,
                                   errors.ProtocolError))


class ObjectMathTest(testcase.TestCase):

    def test_object_count(self):
        cases = [(0, 4096, 1), (1, 4096, 1), (4095, 4096, 1),
                 (4096, 4096, 1), (4097, 4096, 2), (8192, 4096, 2),
                 (8193, 4096, 3), (10 << 20, 4 << 20, 3),
                 (12 << 20, 4 << 20, 3)]
        for size, osize, want in cases:
            self.assertEqual(want, P.object_count(size, osize),
                             (size, osize))

    def test_object_span_empty_file(self):
        self.assertEqual((0, 0), P.object_span(0, 0, 4096))

    def test_object_span_exact_multiple(self):
        self.assertEqual((0, 4096), P.object_span(0, 8192, 4096))
        self.assertEqual((4096, 4096), P.object_span(1, 8192, 4096))
        self.assertEqual((8192, 0), P.object_span(2, 8192, 4096))

    def test_object_span_last_partial(self):
        self.assertEqual((8192, 1808), P.object_span(2, 10000, 4096))
        self.assertEqual((0, 1), P.object_span(0, 1, 4096))

    def test_object_span_past_end(self):
        self.assertEqual((40960, 0), P.object_span(10, 10000, 4096))

    def test_spans_tile_the_file(self):
        rnd = random.Random(7)
        for _ in range(200):
            osize = rnd.choice((4096, 8192, 1 << 20))
            size = rnd.randrange(0, 20 * osize)
            pos = 0
            for i in range(P.object_count(size, osize)):
                offset, length = P.object_span(i, size, osize)
                self.assertEqual(pos, offset)
                self.assertLessEqual(length, osize)
                pos += length
            self.assertEqual(size, pos)


class FuzzTest(testcase.TestCase):
    """Random damage must give a ProtocolError or a valid message."""

    ITERATIONS = 3000

    def mutate(self, rnd, data):
        data = bytearray(data)
        for _ in range(rnd.randint(1, 4)):
            op = rnd.randrange(6)
            pos = rnd.randrange(len(data) + 1)
            if op == 0 and data:
                data[min(pos, len(data) - 1)] ^= 1 << rnd.randrange(8)
            elif op == 1 and data:
                data[min(pos, len(data) - 1)] = rnd.randrange(256)
            elif op == 2:
                data[pos:pos] = rnd.randbytes(rnd.randint(1, 8))
            elif op == 3:
                del data[pos:pos + rnd.randint(1, 8)]
            elif op == 4:
                del data[pos:]
            else:
                # Big-endian lengths: poke a plausible small value.
                data[pos:pos + 2] = struct.pack("!H", rnd.randrange(300))
        return bytes(data)

    def check(self, fn, data, context):
        try:
            msg = fn(data)
        except errors.ProtocolError:
            return
        except Exception as exc:  # noqa: B902 - the point of the test
            self.fail("%s: %r raised %s: %s"
                      % (context, data, type(exc).__name__, exc))
        self.assertIsInstance(msg, P.Message)

    def test_mutated_frames(self):
        rnd = random.Random(20240601)
        frames = [P.encode_frame(m) for m in samples()]
        for i in range(self.ITERATIONS):
            frame = self.mutate(rnd, rnd.choice(frames))
            self.check(parse_frame, frame, "frame iteration %d" % i)

    def test_mutated_bodies_with_valid_crc(self):
        # Recompute the CRC so that the body decoders see the damage.
        rnd = random.Random(42)
        msgs = samples()
        for i in range(self.ITERATIONS):
            msg = rnd.choice(msgs)
            body = self.mutate(rnd, msg.encode())
            self.check(lambda b: decode(type(msg), b), body,
                       "%s body iteration %d" % (msg.TYPE.name, i))

    def test_bodies_decoded_as_other_types(self):
        rnd = random.Random(3)
        bodies = [m.encode() for m in samples()]
        bodies += [rnd.randbytes(rnd.randrange(200)) for _ in range(200)]
        for body in bodies:
            for cls in set(P.MESSAGES.values()):
                self.check(lambda b: decode(cls, b), body, cls.TYPE.name)
