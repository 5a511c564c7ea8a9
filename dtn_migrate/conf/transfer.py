"""[transfer] options: tuning of the DTN-to-DTN transfer engine."""

from oslo_config import cfg

from dtn_migrate.conf import utils

from dtn_migrate.transfer import config as engine

MiB = 1 << 20
_d = engine.TransferConfig()

transfer_group = cfg.OptGroup(
    'transfer', title='Transfer engine options',
    help='Objects, parallelism, durability and fault tolerance of '
         'DTN-to-DTN transfers (FT-LADS).')

transfer_opts = [
    cfg.IntOpt('object_size', default=_d.object_size, min=4096,
               max=64 * MiB,
               help='Bytes per object, a multiple of 4096. Files are split '
                    'into objects that travel out of order.'),
    cfg.IntOpt('streams', default=_d.streams, min=1, max=64,
               help='Parallel data connections per transfer.'),
    cfg.IntOpt('io_threads', default=_d.io_threads, min=1,
               help='Threads reading (source) or writing (sink) objects.'),
    cfg.IntOpt('buffer_pool_bytes', default=_d.buffer_pool_bytes,
               min=2 * 4096,
               help='Upper bound of the object buffers an agent holds, '
                    'whatever the dataset size.'),
    cfg.IntOpt('window_bytes', default=_d.window_bytes, min=4096,
               help='Bytes sent but not yet confirmed durable by the sink. '
                    'Bounds what a crash can cost in resent data.'),
    cfg.IntOpt('max_open_files', default=_d.max_open_files, min=1,
               help='Files of one transfer in flight at once.'),
    cfg.IntOpt('max_session_bitmap_bytes',
               default=_d.max_session_bitmap_bytes, min=1,
               help='Sink: bytes of the done-set bitmaps (one bit per '
                    'object) of one session\'s open files; a file that '
                    'would go over it is refused (BOUNDS).'),
    cfg.IntOpt('sync_bytes', default=_d.sync_bytes, min=0,
               help='Sink: fdatasync after this many unsynced bytes ...'),
    cfg.FloatOpt('sync_interval', default=_d.sync_interval, min=0.001,
                 help='... or after this many seconds, whichever is first. '
                      'Objects are reported durable (BLOCK_SYNC) only after '
                      'the sync.'),
    cfg.BoolOpt('preallocate', default=_d.preallocate,
                help='Sink: reserve each file\'s full size (fallocate) '
                     'before writing. Skipped on tmpfs and ramfs, where it '
                     'would only zero-fill memory; free space is checked '
                     'in every case.'),
    cfg.BoolOpt('direct_io', default=_d.direct_io,
                help='Read (source) and write (sink) whole objects with '
                     'O_DIRECT, past the page cache, where the file system '
                     'takes it; the short last object of a file goes '
                     'through the page cache. A staged or received file is '
                     'written once and read back once, so caching it buys '
                     'little, and on a VM whose free memory goes back to '
                     'the host every new cached page costs CPU. Off: all '
                     'I/O is buffered.'),
    cfg.IntOpt('min_free_bytes', default=_d.min_free_bytes, min=0,
               help='Sink: refuse a file that would leave less free space.'),
    cfg.StrOpt('logger', default=_d.logger, choices=engine.LOGGERS,
               help='Object log mechanism of the source (FT-LADS): one log '
                    'per file, per transaction of files, or one for the '
                    'whole dataset. "none" disables resume.'),
    cfg.StrOpt('log_method', default=_d.log_method,
               choices=engine.LOG_METHODS,
               help='How completed objects are recorded in the log.'),
    cfg.IntOpt('transaction_size', default=_d.transaction_size, min=1,
               help='Files per log with logger=transaction.'),
    cfg.BoolOpt('verify_sha512', default=_d.verify_sha512,
                help='Verify every file\'s sha512 at the sink (Glance\'s '
                     'os_hash_value) in addition to each object\'s xxh3.'),
    cfg.IntOpt('max_object_retries', default=_d.max_object_retries, min=0,
               help='Resends of one damaged object before its file fails.'),
    cfg.IntOpt('max_file_retries', default=_d.max_file_retries, min=0,
               help='Whole-file resends after a sha512 mismatch.'),
    cfg.StrOpt('transport', default=_d.transport,
               choices=engine.TRANSPORTS,
               help='Data plane: "auto" uses RDMA when both DTNs have a '
                    'device and TCP otherwise.'),
    cfg.IntOpt('socket_buffer_bytes', default=_d.socket_buffer_bytes,
               min=0,
               help='TCP send/receive buffer per connection (0: kernel '
                    'autotuning).'),
    cfg.FloatOpt('tcp_user_timeout', default=_d.tcp_user_timeout, min=0,
                 help='Seconds before a connection with unacknowledged '
                      'data, or a silent peer, is declared dead.'),
    cfg.FloatOpt('connect_timeout', default=_d.connect_timeout, min=0.1,
                 help='Seconds to open and authenticate one connection.'),
    cfg.FloatOpt('reconnect_initial_interval',
                 default=_d.reconnect_initial_interval, min=0.01,
                 help='First back-off after a lost connection; doubles up '
                      'to reconnect_max_interval.'),
    cfg.FloatOpt('reconnect_max_interval',
                 default=_d.reconnect_max_interval, min=0.01,
                 help='Longest back-off between reconnection attempts.'),
    cfg.FloatOpt('reconnect_deadline', default=_d.reconnect_deadline,
                 min=1,
                 help='Fail a transfer whose peer stays unreachable (with no '
                      'progress) this many seconds.'),
    cfg.IntOpt('rate_limit', default=_d.rate_limit, min=0,
               help='Bytes per second per outgoing transfer (0: no limit).'),
    cfg.FloatOpt('growing_stall_timeout', default=_d.growing_stall_timeout,
                 min=1,
                 help='Fail a growing file whose writer adds nothing for '
                      'this many seconds.'),
    cfg.IntOpt('max_sessions', default=_d.max_sessions, min=1,
               help='Sink: incoming transfers served at once.'),
    cfg.FloatOpt('handshake_timeout', default=_d.handshake_timeout,
                 min=0.1,
                 help='Sink: seconds a new connection has, in all, to '
                      'complete TLS and authentication; bytes trickling in '
                      'do not extend it.'),
    cfg.IntOpt('max_unauthenticated', default=_d.max_unauthenticated,
               min=1,
               help='Sink: connections not yet authenticated held at once; '
                    'more are closed at once.'),
    cfg.IntOpt('max_unauthenticated_per_address',
               default=_d.max_unauthenticated_per_address, min=1,
               help='Sink: connections not yet authenticated held at once '
                    'from one source: one IPv4 address (IPv4-mapped IPv6 '
                    'addresses count as IPv4), or one IPv6 /64. A peer\'s '
                    'source_addresses count by their own address and come '
                    'first.'),
    cfg.IntOpt('max_connections', default=_d.max_connections, min=1,
               help='Sink: connections held at once, each with one thread '
                    '(a session uses one plus one per stream).'),
    cfg.IntOpt('max_connections_per_peer',
               default=_d.max_connections_per_peer, min=1,
               help='Sink: authenticated connections one peer holds at '
                    'once, in all its sessions; more are refused (LIMIT, '
                    'retried by the source), so that no peer takes all of '
                    'max_connections.'),
    cfg.IntOpt('max_open_files_per_peer',
               default=_d.max_open_files_per_peer, min=1,
               help='Sink: files one peer holds open at once, in all its '
                    'sessions; a file over it is refused (LIMIT).'),
    cfg.BoolOpt('frame_auth', default=_d.frame_auth,
                help='Authenticate every frame after the handshake with a '
                     'session key (an HMAC-SHA256 tag on every frame and an '
                     'HMAC-SHA256 digest of every object), so that no one '
                     'on the path can change, replay or reorder what '
                     'travels without TLS. '
                     'As a source: ask for it. As a sink: refuse sources '
                     'that do not. Turn off only on a trusted link, to '
                     'save its CPU cost.'),
    cfg.BoolOpt('zero_extents', default=_d.zero_extents,
                help='Source: send objects that are holes or all zero bytes '
                     'as zero extents (ZERO_BLOCKS) instead of their bytes, '
                     'and objects that hold holes or zero runs as zstd '
                     '(level 1) even with compression off. Sink: accept '
                     'them and leave holes in the file. The sha512 of the '
                     'file still covers every byte.'),
    cfg.StrOpt('compression', default=_d.compression,
               choices=engine.COMPRESSIONS,
               help='Source: compress objects with zstd on the TCP data '
                    'plane (the sink must offer it). "on": every object '
                    'that shrinks by compression_min_saving or more; '
                    '"auto": only while the link, not this host\'s CPU, '
                    'is the limit, and not for data that does not shrink; '
                    '"off": never.'),
    cfg.IntOpt('compression_level', default=_d.compression_level,
               min=-7, max=22,
               help='zstd level (negative: faster, less compression).'),
    cfg.FloatOpt('compression_min_saving',
                 default=_d.compression_min_saving, min=0.001, max=0.999,
                 help='Send an object compressed only if that saves at '
                      'least this fraction of its length.'),
]


def register_opts(conf):
    utils.register(conf, transfer_group, transfer_opts)


def engine_config(conf):
    """The engine's TransferConfig from [transfer]."""
    group = conf.transfer
    return engine.TransferConfig(
        **{opt.dest: getattr(group, opt.dest) for opt in transfer_opts})


def list_opts():
    return {transfer_group: transfer_opts}
