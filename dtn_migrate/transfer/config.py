"""Tunables of the transfer engine (plain values; the agent fills them
from oslo.config, the standalone CLI from its arguments).
"""

import dataclasses

from dtn_migrate.transfer.wire import protocol

LOGGERS = ("none", "file", "transaction", "universal")
LOG_METHODS = ("char", "int", "binary", "varint", "bit8", "bit64")
TRANSPORTS = ("auto", "tcp", "rdma")
COMPRESSIONS = ("off", "auto", "on")

MiB = 1 << 20


@dataclasses.dataclass
class TransferConfig:
    # Objects and parallelism.
    object_size: int = 4 * MiB
    streams: int = 4
    io_threads: int = 4
    buffer_pool_bytes: int = 256 * MiB
    # Objects sent but not yet confirmed durable (BLOCK_SYNC), in bytes.
    # This bounds what a restart can resend.
    window_bytes: int = 64 * MiB
    max_open_files: int = 128
    # Sink: the done-set bitmaps of one session's open files, in bytes
    # (64 MiB: 2 TiB of files in 4 KiB objects, 128 TiB in 256 KiB ones).
    max_session_bitmap_bytes: int = 64 * MiB
    # Sink durability batching: fdatasync when this many bytes are
    # unsynced or this many seconds have passed, whichever comes first.
    sync_bytes: int = 16 * MiB
    sync_interval: float = 0.05
    preallocate: bool = True
    # Read (source) and write (sink) whole objects with O_DIRECT where
    # the file system takes it (direct.py), the rest through the page
    # cache.
    direct_io: bool = True
    # Reserve left free on the sink's file system.
    min_free_bytes: int = 64 * MiB
    # Object log (source side).
    logger: str = "universal"
    log_method: str = "bit64"
    transaction_size: int = 4
    # Integrity.
    verify_sha512: bool = True
    hash_checkpoint_bytes: int = 256 * MiB
    max_object_retries: int = 8
    max_file_retries: int = 3
    # Network.
    transport: str = "auto"
    socket_buffer_bytes: int = 8 * MiB
    tcp_user_timeout: float = 15.0
    connect_timeout: float = 10.0
    reconnect_initial_interval: float = 0.2
    reconnect_max_interval: float = 10.0
    # Give up on a transfer whose peer stays unreachable this long.
    reconnect_deadline: float = 3600.0
    rate_limit: int = 0
    # Growing files: fail if no new bytes land for this long.
    growing_stall_timeout: float = 600.0
    # Sink limits.
    max_sessions: int = 64
    # Before authentication a connection gets this long, in all (not per
    # byte received), to complete TLS and the HMAC handshake.
    handshake_timeout: float = 10.0
    # Unauthenticated connections held at once: in all, and from one
    # source address; further ones are closed at once.
    max_unauthenticated: int = 64
    max_unauthenticated_per_address: int = 8
    # Connections (and so handler threads) held at once, authenticated
    # or not.
    max_connections: int = 1024
    # What one authenticated peer may hold at once, in all its sessions:
    # connections, and files open for writing.
    max_connections_per_peer: int = 512
    max_open_files_per_peer: int = 1024
    # Authenticate every frame after the handshake (protocol.rst).
    frame_auth: bool = True
    # Send all-zero objects (holes, zero runs) as ZERO_BLOCKS, not bytes.
    zero_extents: bool = True
    # zstd per object on the TCP plane: "off", "on" (every object that
    # shrinks enough) or "auto" (only while the link, not this host's
    # CPU, is the limit).
    compression: str = "off"
    compression_level: int = 1
    # Keep the compressed form only if it saves this fraction or more.
    compression_min_saving: float = 0.125

    def __post_init__(self):
        self.validate()

    def validate(self):
        def need(cond, what):
            if not cond:
                raise ValueError(what)
        need(protocol.MIN_OBJECT_SIZE <= self.object_size
             <= protocol.MAX_OBJECT_SIZE and self.object_size % 4096 == 0,
             "object_size must be a multiple of 4 KiB between %d and %d"
             % (protocol.MIN_OBJECT_SIZE, protocol.MAX_OBJECT_SIZE))
        need(1 <= self.streams <= protocol.MAX_STREAMS,
             "streams must be 1..%d" % protocol.MAX_STREAMS)
        need(self.io_threads >= 1, "io_threads must be >= 1")
        need(self.buffer_pool_bytes >= 2 * self.object_size,
             "buffer_pool_bytes must hold at least two objects")
        need(self.window_bytes >= self.object_size,
             "window_bytes must hold at least one object")
        need(self.logger in LOGGERS, "logger must be one of %s" % (LOGGERS,))
        need(self.log_method in LOG_METHODS,
             "log_method must be one of %s" % (LOG_METHODS,))
        need(self.transaction_size >= 1, "transaction_size must be >= 1")
        need(self.transport in TRANSPORTS,
             "transport must be one of %s" % (TRANSPORTS,))
        need(self.rate_limit >= 0, "rate_limit must be >= 0")
        for name in ("sync_interval", "connect_timeout",
                     "reconnect_initial_interval", "reconnect_max_interval",
                     "reconnect_deadline", "growing_stall_timeout"):
            need(getattr(self, name) > 0, "%s must be > 0" % name)
        for name in ("sync_bytes", "min_free_bytes", "socket_buffer_bytes",
                     "tcp_user_timeout", "max_object_retries",
                     "max_file_retries", "hash_checkpoint_bytes"):
            need(getattr(self, name) >= 0, "%s must be >= 0" % name)
        need(self.max_sessions >= 1, "max_sessions must be >= 1")
        need(self.handshake_timeout > 0, "handshake_timeout must be > 0")
        need(1 <= self.max_unauthenticated_per_address
             <= self.max_unauthenticated <= self.max_connections,
             "need 1 <= max_unauthenticated_per_address <= "
             "max_unauthenticated <= max_connections")
        need(self.compression in COMPRESSIONS,
             "compression must be one of %s" % (COMPRESSIONS,))
        need(-7 <= self.compression_level <= 22,
             "compression_level must be -7..22")
        need(0 < self.compression_min_saving < 1,
             "compression_min_saving must be > 0 and < 1")
        need(self.max_open_files >= 1, "max_open_files must be >= 1")
        need(self.max_connections_per_peer >= 1,
             "max_connections_per_peer must be >= 1")
        need(self.max_open_files_per_peer >= 1,
             "max_open_files_per_peer must be >= 1")
        need(self.max_session_bitmap_bytes >= 1,
             "max_session_bitmap_bytes must be >= 1")

    @property
    def pool_objects(self):
        return max(2, self.buffer_pool_bytes // self.object_size)
