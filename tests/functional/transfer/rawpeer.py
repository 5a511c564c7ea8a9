"""A raw, possibly hostile, DTN peer for functional tests.

Built on the engine's own modules (``protocol``, ``auth``,
``transport.stream``) but with none of the source's good manners: it
runs the handshake with any peer name and any key, sends valid or
crafted frames, raw bytes, half frames and frames whose header lies
about their length, and reads the sink's replies with a timeout::

    sess = rawpeer.Session.open(port, "src-1", key, streams=4,
                                sink="dst-1")
    reply = sess.new_file(0, "../x", 4096)      # FileId, REFUSED
    data = sess.data(0)                           # data stream 0
    data.send_block(0, 0, b"...", offset=1)       # a lying NEW_BLOCK
    err = sess.control.expect(P.MsgType.ERROR)    # reported on control
    data.wait_closed()                            # seconds until EOF

A ``RawPeer`` is one connection; a ``Session`` is a control connection
plus the data connections opened with its CONNECT_ACK's epoch.  After
``hello`` (with frame authentication, the default) ``send`` and
``send_block`` tag their frames and objects as a source does, so that
what the sink checks next is the message itself; ``send_raw`` sends
bytes as they are.
"""

import errno
import hashlib
import os
import socket
import time
import zlib

from dtn_migrate.transfer import checksum
from dtn_migrate.transfer import errors
from dtn_migrate.transfer.transport import stream
from dtn_migrate.transfer.wire import auth
from dtn_migrate.transfer.wire import protocol as P


def frame(msg=None, mtype=None, body=None, length=None, crc=None,
          magic=P.MAGIC, version=P.VERSION, flags=0):
    """Bytes of one frame; every header field can be forced to lie.

    ``body`` defaults to ``msg.encode()``, ``length`` and ``crc`` to the
    true length and CRC of that body.
    """
    if body is None:
        body = msg.encode()
    if mtype is None:
        mtype = msg.TYPE
    if length is None:
        length = len(body)
    if crc is None:
        crc = zlib.crc32(body)
    return P.HEADER.pack(magic, version, mtype, flags, length, crc) + body


class RawPeer:
    """One TCP (or TLS) connection to an agent's transfer port."""

    def __init__(self, port, host="127.0.0.1", timeout=10.0,
                 tls_context=None, server_hostname=None, sink=""):
        self.sink = sink          # the name its CONNECTs ask for
        self.conn = stream.connect(host, port, timeout, 0, 0, tls_context,
                                   server_hostname)
        self.conn.settimeout(timeout)
        self.timeout = timeout
        self.sink_proved = None   # did the CHALLENGE prove our key?
        self.ack = None           # the CONNECT_ACK, after hello()
        self.skipped = []         # messages expect() passed over
        self.drained = b""        # bytes wait_closed() read
        self.object_key = None    # the session's, for NEW_BLOCK digests

    @property
    def sock(self):
        return self.conn.sock

    def send_raw(self, data):
        """Send bytes as they are; False if the agent already hung up."""
        try:
            self.sock.sendall(data)
            return True
        except OSError:
            return False

    def send(self, msg, payload=b""):
        """Send a well-formed frame (encoded without bound checks), tagged
        once the handshake set keys.
        """
        try:
            self.conn.send(msg, payload=bytes(payload))
            return True
        except ConnectionError:
            return False

    def recv(self, timeout=None):
        """The next message (validated by the engine's decoder)."""
        self.conn.settimeout(self.timeout if timeout is None else timeout)
        return self.conn.recv()

    def expect(self, *types, timeout=None):
        """Read until a message of one of ``types``; others are skipped
        (kept in ``self.skipped``).  Raises AssertionError on timeout or
        EOF, naming what was seen.
        """
        deadline = time.monotonic() + (timeout or self.timeout)
        self.skipped = []
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                msg = self.recv(left)
            except (ConnectionError, errors.TransferError) as exc:
                raise AssertionError("no %s from %s (got %r, then %s)"
                                     % ("/".join(t.name for t in types),
                                        self.conn.peer, self.skipped, exc))
            if msg.TYPE in types:
                return msg
            self.skipped.append(msg)
        raise AssertionError("no %s from %s in time (got %r)"
                             % ("/".join(t.name for t in types),
                                self.conn.peer, self.skipped))

    def wait_closed(self, timeout=15.0):
        """Drain until the agent closes the connection.  Returns the
        seconds it took, or None if it was still open after ``timeout``.
        Whatever was drained is kept in ``self.drained``.
        """
        start = time.monotonic()
        self.drained = b""
        while True:
            left = start + timeout - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                return None
            except OSError as exc:
                if exc.errno not in (errno.ECONNRESET, errno.EPIPE, None):
                    raise
                data = b""
            if not data:
                return time.monotonic() - start
            self.drained += data

    def hello(self, peer, key, role=P.Role.CONTROL, transfer_id=None,
              epoch=0, stream_index=0, streams=1, object_size=4096,
              version=(P.VERSION, P.VERSION), caps=P.Caps.FRAME_AUTH):
        """CONNECT / CHALLENGE / AUTH with ``key`` (bytes, or hex).

        Unlike the source, AUTH is sent even when the sink's proof does
        not match, so the sink's own check is exercised.  Returns the
        reply to AUTH: a ConnectAck, or the sink's Error.
        """
        if isinstance(key, str):
            key = bytes.fromhex(key)
        connect = P.Connect(version[0], version[1], role, stream_index, caps,
                            transfer_id or os.urandom(16), epoch,
                            object_size, streams, auth.nonce(), peer,
                            sink=self.sink)
        body = connect.encode()
        self.send_raw(frame(connect))
        challenge = self.expect(P.MsgType.CHALLENGE, P.MsgType.ERROR)
        if challenge.TYPE == P.MsgType.ERROR:
            return challenge
        transcript = auth.transcript(body, challenge.nonce, challenge.sink)
        self.sink_proved = auth.verify(auth.sink_proof(key, transcript),
                                       challenge.proof)
        proof_c = auth.source_proof(key, transcript, challenge.proof)
        self.send(P.Auth(proof_c))
        if caps & P.Caps.FRAME_AUTH:
            keys = auth.session_keys(key, transcript, challenge.proof,
                                     proof_c)
            self.conn.authenticate(keys.source, keys.sink, keys.objects)
            self.object_key = keys.objects
        reply = self.expect(P.MsgType.CONNECT_ACK, P.MsgType.ERROR)
        if reply.TYPE == P.MsgType.CONNECT_ACK:
            self.ack = reply
        return reply

    def send_block(self, file_id, index, data, offset=None, length=None,
                   xxh3=None, send=None):
        """NEW_BLOCK for ``data``; ``offset``/``length``/``xxh3`` (and the
        keyed digest) default to the truth (offset from the session's
        object size), ``send`` how many payload bytes actually go out.
        """
        offset = index * self.object_size if offset is None else offset
        length = len(data) if length is None else length
        mac = auth.object_mac(self.object_key, file_id, index,
                              offset & (2 ** 64 - 1), length & (2 ** 32 - 1))
        if mac is not None:
            mac.update(data)
        msg = P.NewBlock(file_id, index, offset, length,
                         checksum.xxh3(data) if xxh3 is None else xxh3,
                         mac=auth.object_tag(mac))
        payload = bytes(data) if send is None else bytes(data)[:send]
        return self.send(msg, payload)

    @property
    def object_size(self):
        return self.ack.object_size

    def close(self):
        self.conn.close()


class Session:
    """A control connection and its data streams, as one transfer."""

    def __init__(self, port, peer, key, transfer_id, streams, object_size,
                 timeout, host, sink):
        self.port, self.host, self.sink = port, host, sink
        self.peer, self.key = peer, key
        self.transfer_id = transfer_id
        self.streams = streams
        self.timeout = timeout
        self.control = RawPeer(port, host, timeout, sink=sink)
        self.reply = self.control.hello(peer, key, P.Role.CONTROL,
                                        transfer_id, 0, 0, streams,
                                        object_size)
        self.ack = self.control.ack
        self.streams_open = []

    @classmethod
    def open(cls, port, peer, key, transfer_id=None, streams=4,
             object_size=4096, timeout=10.0, host="127.0.0.1", sink=""):
        """Authenticate a control connection to sink ``sink`` (its
        agent name); raise if the sink refuses it.
        """
        sess = cls(port, peer, key, transfer_id or os.urandom(16), streams,
                   object_size, timeout, host, sink)
        if sess.ack is None:
            sess.close()
            raise AssertionError("sink refused the session: %r"
                                 % (sess.reply,))
        return sess

    @property
    def tid(self):
        return self.transfer_id.hex()

    def data(self, index):
        """Open and authenticate data stream ``index``."""
        conn = RawPeer(self.port, self.host, self.timeout, sink=self.sink)
        reply = conn.hello(self.peer, self.key, P.Role.DATA,
                           self.transfer_id, self.ack.epoch, index,
                           self.streams, self.ack.object_size)
        if conn.ack is None:
            conn.close()
            raise AssertionError("sink refused data stream %d: %r"
                                 % (index, reply))
        conn.object_key = self.control.object_key
        self.streams_open.append(conn)
        return conn

    def new_file(self, file_id, name, size, object_size=None, sha512=None,
                 flags=None, mode=0o644, mtime_ns=0, done=b""):
        """NEW_FILE (unvalidated, so any field may be out of bounds),
        then the sink's FILE_ID (or ERROR).
        """
        if flags is None:
            flags = (P.FileFlags.HAS_SHA512 if sha512
                     else P.FileFlags.NO_SHA512)
        msg = P.NewFile(file_id, flags, size, mtime_ns, mode,
                        object_size or self.ack.object_size,
                        sha512 or bytes(64), name, done)
        self.control.send(msg)
        return self.control.expect(P.MsgType.FILE_ID, P.MsgType.ERROR)

    def send_file(self, file_id, name, data, stream_index=0):
        """Announce and send a whole file the honest way; return the
        sink's FILE_CLOSE.
        """
        sha = hashlib.sha512(data).digest()
        reply = self.new_file(file_id, name, len(data), sha512=sha)
        if reply.TYPE != P.MsgType.FILE_ID or \
                reply.status != P.FileStatus.OPEN:
            raise AssertionError("sink did not open %r: %r" % (name, reply))
        conn = self.data(stream_index)
        size = self.ack.object_size
        for index in range(P.object_count(len(data), size)):
            conn.send_block(file_id, index,
                            data[index * size:(index + 1) * size])
        return self.control.expect(P.MsgType.FILE_CLOSE)

    def bye(self):
        """BYE, and the sink's BYE ACK."""
        self.control.send(P.Bye(P.ByeFlags.REQUEST))
        return self.control.expect(P.MsgType.BYE)

    def close(self):
        for conn in self.streams_open + [self.control]:
            conn.close()


def partial_name(name):
    """Base name of the sink's partial copy of ``name``."""
    return hashlib.sha256(name.encode("utf-8")).hexdigest()[:40] + ".part"
