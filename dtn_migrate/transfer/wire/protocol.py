"""The DTN object-transfer wire protocol, version 4 (``VERSION``).

Every message travels in a frame::

    offset size field
    0      4    magic      b"DTNM"
    4      1    version    protocol version of this frame (VERSION)
    5      1    type       MsgType
    6      2    flags      FLAG_TAG or 0; other bits reserved, must be 0
    8      4    length     body length in bytes (<= MAX_BODY)
    12     4    crc32      zlib CRC-32 of the body
    16     n    body
    16+n   16   tag        with FLAG_TAG only: see auth.FrameMac

After the handshake of a connection whose CONNECT asked for it
(Caps.FRAME_AUTH) every frame in both directions carries the tag, an
HMAC-SHA256 with a per-connection, per-direction session key over the
frame's sequence number, header and body; a NEW_BLOCK's ``mac`` field is
an HMAC-SHA256 of its object's bytes under the session's object key (see
``auth``).

All integers are big-endian.  The body is the message's fields packed in
the order listed on each class below: fixed-width integers, fixed-size
byte strings, ``str`` (u16 length + UTF-8) and ``blob`` (u32 length +
bytes).  A decoder refuses trailing bytes, over-long strings and any
value outside the bounds in this module; such a frame closes only the
connection that carried it.

Over TCP the object bytes of a NEW_BLOCK follow its frame directly
(``length`` bytes, not covered by the frame CRC or tag but by the
message's xxh3 and ``mac`` fields).  Over RDMA the NEW_BLOCK names a
registered remote buffer (``addr``/``rkey``) that the sink reads with
RDMA READ.

Message types 0-6 keep the numbering of FT-LADS (Kasu et al. 2019,
Listing 1); the others are this protocol's additions for authentication,
flow control, errors and import reports.  See doc/source/protocol.rst for
the sequence.

On a REPORT connection the CONNECT's ``epoch`` carries the attempt of the
transfer the asker waits for a report of (0: unspecified, at most
MAX_ATTEMPT): a retried migration keeps its transfer id, and this is how
the sink's side learns that the source waits for a new attempt.

A REQUEST connection (one stream, no RDMA, epoch 0; its ``transfer_id``
is a random request id) carries one small request to the sink's cloud
and its answer: after CONNECT_ACK the source sends a REPORT whose body
is the request (1 to MAX_REPORT bytes) and the sink answers with a
REPORT (the answer) or a fatal ERROR.  An older sink refuses the role.
"""

import dataclasses
import enum
import struct
import zlib

from dtn_migrate.transfer import errors

MAGIC = b"DTNM"
VERSION = 4
# Versions whose frame header is understood: enough to read a peer's
# refusal (an ERROR) and to name the mismatch clearly.
KNOWN_VERSIONS = (1, 2, 3, 4)
FLAG_TAG = 0x0001
TAG_SIZE = 16

HEADER = struct.Struct("!4sBBHII")
HEADER_SIZE = HEADER.size

# Bounds checked on every decode.
MAX_BODY = 8 << 20
# Before authentication (CONNECT, CHALLENGE, AUTH and an ERROR).
MAX_PREAUTH_BODY = 8 << 10
MAX_NAME = 4096
MAX_COMPONENT = 255
MAX_MESSAGE_TEXT = 2048
MIN_OBJECT_SIZE = 4 << 10
MAX_OBJECT_SIZE = 64 << 20
MAX_FILE_SIZE = 1 << 50
MAX_STREAMS = 64
MAX_OBJECTS = (1 << 32) - 1
MAX_REPORT = 64 << 10
MAX_ATTEMPT = (1 << 31) - 1     # REPORT connection: CONNECT epoch
NO_FILE = 0xFFFFFFFF


class MsgType(enum.IntEnum):
    CONNECT = 0
    NEW_FILE = 1
    FILE_ID = 2
    NEW_BLOCK = 3
    BLOCK_SYNC = 4
    BYE = 5
    FILE_CLOSE = 6
    ZERO_BLOCKS = 7
    NEW_BLOCK_Z = 8
    CHALLENGE = 16
    AUTH = 17
    CONNECT_ACK = 18
    BLOCK_NACK = 19
    BLOCK_PULLED = 20
    REPORT = 21
    ERROR = 30
    ABORT = 31


class Role(enum.IntEnum):
    CONTROL = 0
    DATA = 1
    REPORT = 2      # fetch the sink's import report of a transfer
    REQUEST = 3     # one small request to the sink's cloud, its answer


class Caps(enum.IntFlag):
    NONE = 0
    RDMA = 1
    FRAME_AUTH = 2      # tag every frame after the handshake
    ZERO_EXTENTS = 4    # all-zero objects travel as ZERO_BLOCKS
    ZSTD = 8            # objects may travel zstd-compressed (NEW_BLOCK_Z)


class Encoding(enum.IntEnum):
    """How a NEW_BLOCK_Z's wire bytes encode its object."""

    ZSTD = 1


class DataPlane(enum.IntEnum):
    TCP = 0
    RDMA = 1


class FileFlags(enum.IntFlag):
    NONE = 0
    GROWING = 1     # final size known, bytes still being written
    RESTART = 2     # discard any partial copy and start over
    HAS_SHA512 = 4  # sha512 field is the expected whole-file hash
    NO_SHA512 = 8   # no whole-file hash: objects' xxh3 only


class FileStatus(enum.IntEnum):
    """FILE_ID status from sink to source."""

    OPEN = 0      # send the objects not in the done set
    SKIP = 1      # the sink already holds this file, complete
    RESET = 2     # the sink has no partial copy: send every object
    REFUSED = 3   # the file cannot be received (see code)


class CloseStatus(enum.IntEnum):
    DECLARE = 0   # source: final size and sha512 of the file
    OK = 1        # sink: all objects durable, sha512 verified
    MISMATCH = 2  # sink: sha512 differs; the copy is discarded
    FAILED = 3    # sink: the file failed (see code)


class ByeFlags(enum.IntFlag):
    REQUEST = 0
    ACK = 1


# Field kinds: fixed struct codes, fixed byte strings, or variable.
_FIXED = {"u8": "B", "u16": "H", "u32": "I", "u64": "Q", "i64": "q",
          "b16": "16s", "b32": "32s", "b64": "64s"}


class Message:
    """Base of all messages; subclasses are dataclasses with FIELDS."""

    TYPE = None
    FIELDS = ()
    _struct = None     # set for messages with only fixed fields

    def encode(self):
        if self._struct is not None:
            return self._struct.pack(*(getattr(self, n) for n, _ in
                                       self.FIELDS))
        parts = []
        for name, kind in self.FIELDS:
            value = getattr(self, name)
            if kind == "str":
                raw = value.encode("utf-8")
                parts.append(struct.pack("!H", len(raw)))
                parts.append(raw)
            elif kind == "blob":
                parts.append(struct.pack("!I", len(value)))
                parts.append(bytes(value))
            else:
                parts.append(struct.pack("!" + _FIXED[kind], value))
        return b"".join(parts)

    @classmethod
    def decode(cls, body):
        if cls._struct is not None:
            if len(body) != cls._struct.size:
                raise errors.ProtocolError(
                    "%s body is %d bytes, expected %d"
                    % (cls.TYPE.name, len(body), cls._struct.size))
            msg = cls(*cls._struct.unpack(body))
            msg.validate()
            return msg
        values = []
        pos = 0
        view = memoryview(body)
        try:
            for name, kind in cls.FIELDS:
                if kind == "str":
                    (n,) = struct.unpack_from("!H", view, pos)
                    pos += 2
                    if pos + n > len(view):
                        raise errors.TruncatedFrame(
                            "%s.%s runs past the body" % (cls.TYPE.name, name))
                    try:
                        values.append(bytes(view[pos:pos + n]).decode("utf-8"))
                    except UnicodeDecodeError:
                        raise errors.ProtocolError(
                            "%s.%s is not UTF-8" % (cls.TYPE.name, name))
                    pos += n
                elif kind == "blob":
                    (n,) = struct.unpack_from("!I", view, pos)
                    pos += 4
                    if pos + n > len(view):
                        raise errors.TruncatedFrame(
                            "%s.%s runs past the body" % (cls.TYPE.name, name))
                    values.append(bytes(view[pos:pos + n]))
                    pos += n
                else:
                    fmt = "!" + _FIXED[kind]
                    values.append(struct.unpack_from(fmt, view, pos)[0])
                    pos += struct.calcsize(fmt)
        except struct.error:
            raise errors.TruncatedFrame("%s body is truncated" % cls.TYPE.name)
        if pos != len(view):
            raise errors.ProtocolError(
                "%s body has %d trailing bytes" % (cls.TYPE.name,
                                                   len(view) - pos))
        msg = cls(*values)
        msg.validate()
        return msg

    def validate(self):
        """Check value bounds; raise BoundsError.  Overridden per type."""


def _message(type_, fields):
    """Class decorator: make a dataclass message of ``type_``."""

    def wrap(cls):
        cls.TYPE = type_
        cls.FIELDS = tuple(fields)
        cls = dataclasses.dataclass(cls)
        if all(kind in _FIXED for _, kind in fields):
            cls._struct = struct.Struct(
                "!" + "".join(_FIXED[k] for _, k in fields))
        MESSAGES[type_] = cls
        return cls
    return wrap


MESSAGES = {}


def _check(cond, what):
    if not cond:
        raise errors.BoundsError(what)


def _check_text(text, field, limit=MAX_MESSAGE_TEXT):
    _check(len(text) <= limit, "%s longer than %d characters" % (field, limit))


@_message(MsgType.CONNECT, [
    ("version_min", "u8"), ("version_max", "u8"), ("role", "u8"),
    ("stream", "u16"), ("caps", "u32"), ("transfer_id", "b16"),
    ("epoch", "u32"), ("object_size", "u32"), ("streams", "u16"),
    ("nonce", "b32"), ("peer", "str"), ("rdma", "blob"), ("sink", "str")])
class Connect(Message):
    """First message of every connection, from the source.

    ``role`` is CONTROL for the session's control connection and DATA for
    each of its ``streams`` data connections, which carry the ``epoch``
    returned by the control connection's CONNECT_ACK.  ``rdma`` is the
    source's RDMA endpoint for this stream (empty without RDMA).  A
    REPORT connection (one stream, no RDMA) only fetches the sink's
    REPORT for ``transfer_id``; its ``epoch`` is the attempt the asker
    waits for (0: unspecified).  A REQUEST connection (one stream, no
    RDMA, epoch 0) carries one request, its ``transfer_id`` a random
    request id.

    ``peer`` is the source's agent name, ``sink`` the name of the sink
    it means to reach (the peer it dialled): both are in the handshake's
    transcript, and a sink of another name refuses the connection.
    """

    version_min: int
    version_max: int
    role: int
    stream: int
    caps: int
    transfer_id: bytes
    epoch: int
    object_size: int
    streams: int
    nonce: bytes
    peer: str
    rdma: bytes = b""
    sink: str = ""

    def validate(self):
        _check(self.role in set(Role), "unknown role")
        if self.role == Role.REPORT:
            _check(self.streams == 1 and not self.rdma,
                   "a REPORT connection has one stream and no RDMA")
            _check(self.epoch <= MAX_ATTEMPT,
                   "REPORT attempt beyond %d" % MAX_ATTEMPT)
        elif self.role == Role.REQUEST:
            _check(self.streams == 1 and not self.rdma,
                   "a REQUEST connection has one stream and no RDMA")
            _check(self.epoch == 0, "a REQUEST connection has epoch 0")
        _check(1 <= self.streams <= MAX_STREAMS, "stream count out of range")
        _check(self.stream < self.streams, "stream index out of range")
        _check(MIN_OBJECT_SIZE <= self.object_size <= MAX_OBJECT_SIZE,
               "object size out of range")
        _check(0 < len(self.peer) <= 255, "peer name length out of range")
        _check(len(self.rdma) <= 4096, "RDMA endpoint too long")
        _check(len(self.sink) <= 255, "sink name length out of range")


@_message(MsgType.CHALLENGE, [("version", "u8"), ("nonce", "b32"),
                              ("proof", "b32"), ("sink", "str")])
class Challenge(Message):
    """Sink's nonce, its name and its proof of the shared key (over a
    transcript that holds both agents' names, see ``auth``).
    """

    version: int
    nonce: bytes
    proof: bytes
    sink: str = ""

    def validate(self):
        _check(len(self.sink) <= 255, "sink name length out of range")


@_message(MsgType.AUTH, [("proof", "b32")])
class Auth(Message):
    """Source's proof of the shared key over both nonces."""

    proof: bytes


@_message(MsgType.CONNECT_ACK, [
    ("epoch", "u32"), ("object_size", "u32"), ("streams", "u16"),
    ("max_inflight", "u32"), ("data_plane", "u8"), ("sink", "str"),
    ("rdma", "blob"), ("caps", "u32")])
class ConnectAck(Message):
    """Sink accepts the connection; session parameters it agreed to.

    ``caps``: the CONNECT's optional capabilities (ZERO_EXTENTS, ZSTD)
    that the sink accepts for this session.
    """

    epoch: int
    object_size: int
    streams: int
    max_inflight: int
    data_plane: int
    sink: str
    rdma: bytes = b""
    caps: int = 0

    def validate(self):
        _check(MIN_OBJECT_SIZE <= self.object_size <= MAX_OBJECT_SIZE,
               "object size out of range")
        _check(1 <= self.streams <= MAX_STREAMS, "stream count out of range")
        _check(self.data_plane in (DataPlane.TCP, DataPlane.RDMA),
               "unknown data plane")


@_message(MsgType.NEW_FILE, [
    ("file_id", "u32"), ("flags", "u32"), ("size", "u64"),
    ("mtime_ns", "i64"), ("mode", "u32"), ("object_size", "u32"),
    ("sha512", "b64"), ("name", "str"), ("done", "blob")])
class NewFile(Message):
    """Source announces a file; ``done`` is the run-length encoded set of
    objects the source's log says the sink already holds durably.
    """

    file_id: int
    flags: int
    size: int
    mtime_ns: int
    mode: int
    object_size: int
    sha512: bytes
    name: str
    done: bytes = b""

    def validate(self):
        _check(self.file_id != NO_FILE, "reserved file id")
        _check(self.size <= MAX_FILE_SIZE, "file size out of range")
        _check(MIN_OBJECT_SIZE <= self.object_size <= MAX_OBJECT_SIZE,
               "object size out of range")
        _check(object_count(self.size, self.object_size) <= MAX_OBJECTS,
               "too many objects")
        _check(0 < len(self.name.encode("utf-8")) <= MAX_NAME,
               "name length out of range")

    @property
    def nobjects(self):
        return object_count(self.size, self.object_size)


@_message(MsgType.FILE_ID, [("file_id", "u32"), ("status", "u8"),
                            ("code", "u16"), ("message", "str")])
class FileId(Message):
    """Sink's answer to NEW_FILE."""

    file_id: int
    status: int
    code: int = 0
    message: str = ""

    def validate(self):
        _check(self.status in set(FileStatus), "unknown file status")
        _check_text(self.message, "message")


@_message(MsgType.NEW_BLOCK, [
    ("file_id", "u32"), ("index", "u32"), ("offset", "u64"),
    ("length", "u32"), ("xxh3", "u64"), ("rkey", "u32"), ("addr", "u64"),
    ("nonce", "u64"), ("mac", "b16")])
class NewBlock(Message):
    """One object.  Over TCP its ``length`` bytes follow the frame.

    ``mac``: with frame authentication, the object's keyed digest
    (``auth.object_mac``: Poly1305 under a one-time key derived from the
    session's object key, the object's place and ``nonce``, which the
    source never repeats within a session); zeros otherwise.
    """

    file_id: int
    index: int
    offset: int
    length: int
    xxh3: int
    rkey: int = 0
    addr: int = 0
    nonce: int = 0
    mac: bytes = bytes(TAG_SIZE)

    def validate(self):
        _check(self.length <= MAX_OBJECT_SIZE, "object length out of range")
        _check(self.offset <= MAX_FILE_SIZE, "object offset out of range")


@_message(MsgType.ZERO_BLOCKS, [
    ("file_id", "u32"), ("index", "u32"), ("count", "u32")])
class ZeroBlocks(Message):
    """Objects ``index`` .. ``index + count - 1`` of a file hold only
    zero bytes (Caps.ZERO_EXTENTS).  Sent on a data stream instead of
    their NEW_BLOCKs; no bytes follow.  The sink leaves or punches a
    hole there and reports them durable in BLOCK_SYNC like any object;
    its sha512 of the file still covers those zeros.
    """

    file_id: int
    index: int
    count: int

    def validate(self):
        _check(self.count >= 1, "empty zero extent")
        _check(self.index + self.count <= MAX_OBJECTS,
               "zero extent beyond the object range")


@_message(MsgType.NEW_BLOCK_Z, [
    ("file_id", "u32"), ("index", "u32"), ("offset", "u64"),
    ("length", "u32"), ("xxh3", "u64"), ("encoding", "u8"),
    ("wire_length", "u32"), ("nonce", "u64"), ("mac", "b16")])
class NewBlockZ(Message):
    """One compressed object (Caps.ZSTD, TCP data plane only).

    ``wire_length`` encoded bytes follow the frame and decode to exactly
    ``length`` bytes; ``xxh3`` and ``mac`` cover the *decoded* object,
    as in NEW_BLOCK, so damage on the way is caught either by the
    decoder or by those checks, and the object is asked for again.
    """

    file_id: int
    index: int
    offset: int
    length: int
    xxh3: int
    encoding: int
    wire_length: int
    nonce: int = 0
    mac: bytes = bytes(TAG_SIZE)

    def validate(self):
        _check(self.length <= MAX_OBJECT_SIZE, "object length out of range")
        _check(self.offset <= MAX_FILE_SIZE, "object offset out of range")
        _check(self.encoding in set(Encoding), "unknown object encoding")
        _check(0 < self.wire_length <= self.length,
               "encoded length out of range")


@_message(MsgType.BLOCK_SYNC, [("ranges", "blob")])
class BlockSync(Message):
    """Sink: these objects are on stable storage.

    ``ranges`` is a packed array of (file_id u32, first u32, count u32).
    """

    ranges: bytes

    _triple = struct.Struct("!III")

    def validate(self):
        _check(len(self.ranges) % self._triple.size == 0,
               "BLOCK_SYNC ranges not a whole number of triples")

    @classmethod
    def from_ranges(cls, triples):
        return cls(b"".join(cls._triple.pack(*t) for t in triples))

    def iter_ranges(self):
        return self._triple.iter_unpack(self.ranges)


@_message(MsgType.BLOCK_NACK, [("file_id", "u32"), ("index", "u32"),
                               ("code", "u16")])
class BlockNack(Message):
    """Sink: this object arrived damaged (or could not be taken); resend."""

    file_id: int
    index: int
    code: int


@_message(MsgType.BLOCK_PULLED, [("file_id", "u32"), ("index", "u32")])
class BlockPulled(Message):
    """Sink (RDMA): the object's remote buffer has been read; reuse it."""

    file_id: int
    index: int


@_message(MsgType.FILE_CLOSE, [
    ("file_id", "u32"), ("status", "u8"), ("code", "u16"), ("size", "u64"),
    ("sha512", "b64"), ("message", "str")])
class FileClose(Message):
    """Source DECLAREs a file's sha512; the sink answers OK or not."""

    file_id: int
    status: int
    code: int
    size: int
    sha512: bytes
    message: str = ""

    def validate(self):
        _check(self.status in set(CloseStatus), "unknown close status")
        _check(self.size <= MAX_FILE_SIZE, "file size out of range")
        _check_text(self.message, "message")


@_message(MsgType.REPORT, [("found", "u8"), ("body", "blob")])
class Report(Message):
    """Sink's answer on a REPORT connection: the import report its side
    stored for the transfer (opaque bytes), if any.  On a REQUEST
    connection: the request (source) and its answer (sink).
    """

    found: int
    body: bytes = b""

    def validate(self):
        _check(self.found in (0, 1), "REPORT found flag is not 0 or 1")
        _check(len(self.body) <= MAX_REPORT,
               "report longer than %d bytes" % MAX_REPORT)
        _check(self.found or not self.body, "REPORT body without found")


@_message(MsgType.BYE, [("flags", "u32")])
class Bye(Message):
    flags: int = ByeFlags.REQUEST


@_message(MsgType.ERROR, [("code", "u16"), ("fatal", "u8"),
                          ("file_id", "u32"), ("message", "str")])
class Error(Message):
    """An error report.  ``fatal`` ends the session."""

    code: int
    fatal: int
    file_id: int
    message: str

    def validate(self):
        _check_text(self.message, "message")


@_message(MsgType.ABORT, [("code", "u16"), ("message", "str")])
class Abort(Message):
    """Source cancels the session; the sink keeps partial files."""

    code: int
    message: str

    def validate(self):
        _check_text(self.message, "message")


def object_count(size, object_size):
    """Number of objects of a ``size``-byte file (an empty file has one)."""
    return max(1, -(-size // object_size))


def object_span(index, size, object_size):
    """(offset, length) of object ``index`` of a file."""
    offset = index * object_size
    return offset, max(0, min(object_size, size - offset))


def encode_frame(msg, flags=0):
    """Frame a message: header followed by body (the tag, if any, is
    the connection's to add).
    """
    body = msg.encode()
    if len(body) > MAX_BODY:
        raise errors.BoundsError("%s body of %d bytes exceeds %d"
                                 % (msg.TYPE.name, len(body), MAX_BODY))
    return HEADER.pack(MAGIC, VERSION, msg.TYPE, flags, len(body),
                       zlib.crc32(body)) + body


def parse_header(raw):
    """Validate a frame header; return (type, body length, crc)."""
    _version, mtype, _flags, length, crc = parse_header_full(raw)
    return mtype, length, crc


def parse_header_full(raw):
    """Validate a frame header; return (version, type, flags, body
    length, crc).  ``version`` is one of KNOWN_VERSIONS: whether it is
    acceptable here is the connection's decision.
    """
    if len(raw) != HEADER_SIZE:
        raise errors.TruncatedFrame("connection closed inside a frame header")
    magic, version, mtype, flags, length, crc = HEADER.unpack(raw)
    if magic != MAGIC:
        raise errors.ProtocolError("bad frame magic %r: not a dtn-migrate "
                                   "peer" % magic)
    if version not in KNOWN_VERSIONS:
        raise errors.ProtocolError("unsupported protocol version %d"
                                   % version, code=errors.Code.VERSION)
    if mtype not in MESSAGES:
        raise errors.ProtocolError("unknown message type %d" % mtype)
    if flags & ~FLAG_TAG:
        raise errors.ProtocolError("reserved frame flags set")
    if length > MAX_BODY:
        raise errors.BoundsError("frame body of %d bytes exceeds %d"
                                 % (length, MAX_BODY))
    fixed = MESSAGES[mtype]._struct
    if fixed is not None and length != fixed.size:
        # Refused before a receiver allocates anything for the body.
        raise errors.BoundsError("%s body is %d bytes, expected %d"
                                 % (MsgType(mtype).name, length, fixed.size))
    return version, MsgType(mtype), flags, length, crc


def decode_body(mtype, body, crc):
    if zlib.crc32(body) != crc:
        raise errors.ProtocolError("%s frame fails its CRC" % mtype.name)
    return MESSAGES[mtype].decode(body)
