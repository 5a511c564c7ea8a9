"""A source transfer's files and peers: per-file state, how to reach a
sink, and the exceptions that end attempts and transfers.
"""

import collections
import enum
import time

from dtn_migrate.transfer import bitmap
from dtn_migrate.transfer import errors
from dtn_migrate.transfer.transport import stream
from dtn_migrate.transfer.wire import handshake
from dtn_migrate.transfer.wire import protocol as P


class FileState(enum.Enum):
    PENDING = "pending"        # not announced in the current attempt
    ANNOUNCED = "announced"    # NEW_FILE sent, FILE_ID awaited
    OPEN = "open"              # objects flowing
    COMPLETE = "complete"      # sink verified it (FILE_CLOSE OK or SKIP)
    FAILED = "failed"


TERMINAL = (FileState.COMPLETE, FileState.FAILED)


class Peer:
    """Where and how to reach a sink."""

    def __init__(self, name, host, port, key, tls_context=None,
                 server_hostname=None):
        self.name = name
        self.host = host
        self.port = int(port)
        self.key = key
        self.tls_context = tls_context
        self.server_hostname = server_hostname

    def __repr__(self):
        return "<Peer %s %s:%d>" % (self.name, self.host, self.port)


def open_connection(peer, connect, cfg, timeout=None, buffer_bytes=0):
    """Connect to ``peer`` and authenticate with ``connect`` (a Connect).

    Returns (connection, the sink's ConnectAck); the connection keeps
    ``timeout`` (default: ``cfg.connect_timeout``) and is closed if the
    handshake fails.  With ``cfg.frame_auth`` it asks for frame
    authentication, and every later frame is tagged (see auth).
    """
    timeout = cfg.connect_timeout if timeout is None else timeout
    # The sink checks that it is the one meant, the source that the one
    # meant answered (handshake).
    connect.sink = peer.name
    if cfg.frame_auth:
        connect.caps |= P.Caps.FRAME_AUTH
    conn = stream.connect(peer.host, peer.port, timeout, buffer_bytes,
                          cfg.tcp_user_timeout, peer.tls_context,
                          peer.server_hostname)
    try:
        conn.settimeout(timeout)
        ack = handshake.client(conn, connect, peer.key)
    except BaseException:
        conn.close()
        raise
    return conn, ack


class SourceFile:
    def __init__(self, file_id, spec, object_size, done):
        self.file_id = file_id
        self.spec = spec
        self.object_size = object_size
        self.nobjects = P.object_count(spec.size, object_size)
        self.done = done                    # durable at the sink
        self.sent = bitmap.Bitmap(self.nobjects)  # sent by this process
        self.state = FileState.PENDING
        self.error = None
        self.code = errors.Code.NONE
        self.restart = False
        self.changed = False      # its content changed between runs
        self.file_retries = 0
        self.nacks = collections.Counter()
        self.sha512 = bytes.fromhex(spec.sha512) if spec.sha512 else None
        self.hasher = None        # sourcehash.OrderedSha512 while hashing
        self.fd = None
        # The same file with O_DIRECT, for aligned objects (None where
        # the file system takes no direct I/O).
        self.dfd = None
        self.direct_refused = False
        self.holes = None         # extents.HoleCursor of fd
        self.available = 0 if spec.growing else spec.size
        self.last_growth = time.monotonic()
        # Per attempt.
        self.pending = collections.deque()
        self.outstanding = set()      # window held, one slot per index
        self.light = set()            # of those, held at ZERO_COST
        self.declared = False
        # Bumped when the file is announced again (RESTART): objects
        # queued for an older announcement are dropped, not sent.
        self.generation = 0

    def direct_fd(self):
        """The O_DIRECT descriptor to read with, or None."""
        return None if self.direct_refused else self.dfd

    def span(self, index):
        return P.object_span(index, self.spec.size, self.object_size)

    def done_bytes(self):
        if self.done.full:
            return self.spec.size
        n = len(self.done) * self.object_size
        last = self.nobjects - 1
        if last in self.done:
            n -= self.object_size - self.span(last)[1]
        return n

    def status(self):
        return {"name": self.spec.name, "size": self.spec.size,
                "state": self.state.value, "bytes_done": self.done_bytes(),
                "sha512": self.sha512.hex() if self.sha512 else None,
                "error": self.error,
                "code": self.code.name.lower() if self.code else None}


class _Fatal(Exception):
    """Ends a transfer without further retries."""


class _AttemptFailed(Exception):
    """An attempt failed in a way that a new attempt may cure."""


class Failures:
    """Failed attempts of a run, for back-off and giving up."""

    def __init__(self):
        self.count = 0          # since the last attempt that ended well
        self.first = None       # monotonic time of the first without progress
        self.protocol = 0       # protocol errors without progress
        self.tls_closed = 0     # TLS closes in a row
