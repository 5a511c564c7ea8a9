"""[staging] options: the local copy onto the DTN's NFS export."""

import re

from oslo_config import cfg

from dtn_migrate.conf import utils

MiB = 1 << 20

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_MARGIN = re.compile(r"(?i)^\s*(?:(\d+(?:\.\d+)?)\s*%|(\d+)\s*([KMGT]?)"
                     r"(?:i?B)?)\s*$")

staging_group = cfg.OptGroup(
    'staging', title='Staging options',
    help='Staging copies VM images from the cloud controller onto the '
         'export of a Data Transfer Node (and back on the receiving '
         'side). Hong et al. 2018 found the fastest writes with the DTN '
         'as NFS server, the controller as NFS client, both '
         'asynchronous, and large rsize/wsize; "dtn-migrate-manage nfs '
         'advise" prints such a setup and "nfs check" verifies a mount.')

staging_opts = [
    cfg.StrOpt(
        'backend', default='path', choices=[
            ('path', 'a directory: the export mounted by the kernel NFS '
                     'client (see "path")'),
            ('libnfs', 'the userspace NFSv3 client libnfs, no kernel '
                       'mount (see "url")'),
        ],
        help='How staging reaches the DTN export.'),
    cfg.StrOpt(
        'path', default='/mnt/dtn-staging',
        help='backend=path: the directory the DTN export is mounted on. '
             'It is checked against /proc/self/mountinfo before staging '
             '(see mount_check and allow_local).'),
    cfg.StrOpt(
        'url',
        sample_default='nfs://dtn1/export/staging?nfsport=2049'
                       '&mountport=20048',
        help='backend=libnfs: libnfs URL of the staging directory, '
             'nfs://SERVER/EXPORT[/DIR][?ARGS]. Fixed nfsport and '
             'mountport avoid asking rpcbind (port 111) through a '
             'firewall.'),
    cfg.StrOpt(
        'mount_check', default='warn', choices=[
            ('refuse', 'refuse to stage on a mount off the profile'),
            ('warn', 'log each deviation and stage anyway'),
            ('off', 'do not compare the mount with the profile'),
        ],
        help='backend=path: what to do when the mount deviates from the '
             'profile (NFS version, proto, rsize/wsize, async, hard, '
             'read-write, nothing else mounted below path). Deviations '
             'cost throughput rather than correctness, except soft '
             'mounts; "refuse" suits a site whose mounts are managed. A '
             'path that is not on NFS at all is refused whatever this '
             'says, unless allow_local is set.'),
    cfg.BoolOpt(
        'allow_local', default=False,
        help='backend=path: accept a path that is not on NFS (an '
             'all-in-one test cloud, or a DTN staging onto its own '
             'disk). Off, a forgotten or failed mount is refused instead '
             'of filling the controller\'s root disk.'),
    cfg.IntOpt(
        'min_rsize', default=MiB, min=0,
        help='Profile: smallest acceptable rsize in bytes (0: not '
             'checked). The Linux client\'s maximum is 1048576.'),
    cfg.IntOpt(
        'min_wsize', default=MiB, min=0,
        help='Profile: smallest acceptable wsize in bytes (0: not '
             'checked). The Linux client\'s maximum is 1048576.'),
    cfg.BoolOpt(
        'require_async', default=True,
        help='Profile: the client must be asynchronous (no "sync" or '
             '"noac" mount option). Hong et al. 2018 measured 48 MB/s '
             'at 1 MiB writes with client and server sync, 106 MB/s with '
             'both async, on 1 Gbit/s.'),
    cfg.IntOpt(
        'block_size', default=4 * MiB, min=4096, max=64 * MiB,
        help='Bytes per read and write of the copy engine: the transfer\'s '
             'object size, and a multiple of the largest NFS rsize/wsize '
             'of the Linux client (1 MiB), so a write becomes whole WRITE '
             'requests. Do not lower it: every writer has one request in '
             'flight, so small blocks are bound by round trips (8 KiB '
             'gave 25-30 MB/s on a 1 gbit link, 1 MiB 109-116 MB/s; see '
             'the NFS benchmark). 4 MiB moved as fast as 1 MiB over NFS '
             'and costs the engines less CPU (fewer requests and thread '
             'hand-offs). A copy holds about (queue_depth + writers + 2) '
             '* block_size + commit_interval_bytes of memory.'),
    cfg.IntOpt(
        'queue_depth', default=4, min=1, max=1024,
        help='Blocks queued between the reader thread and the writer '
             'threads. A copy holds about (queue_depth + writers + 2) * '
             'block_size + commit_interval_bytes of memory: each writer '
             'keeps its uncommitted blocks to rewrite them after a '
             'reconnect.'),
    cfg.IntOpt(
        'writers', default=2, min=1, max=16,
        help='Writer threads of the local copy, each with its own handle '
             'on the export; more keep more NFS WRITEs in flight on a '
             'link with latency.'),
    cfg.IntOpt(
        'readers', default=2, min=1, max=16,
        help='Read-ahead threads of the remote copy.'),
    cfg.IntOpt(
        'commit_interval_bytes', default=64 * MiB, min=4096,
        help='Bytes written between two commits (fdatasync, or NFS '
             'COMMIT with libnfs). After each commit the watermark file '
             'is updated, so the DTN may forward that prefix; a failed '
             'copy resumes from the last watermark.'),
    cfg.BoolOpt(
        'sync_writes', default=False,
        help='Make every write stable on its own (O_DSYNC, or FILE_SYNC '
             'with libnfs) instead of committing every '
             'commit_interval_bytes. Much slower (the sync client of Hong '
             'et al. 2018) and rarely useful: a server that honours COMMIT '
             'needs only the commits, and a knfsd "async" export treats '
             'stable writes as unstable anyway.'),
    cfg.BoolOpt(
        'skip_zeros', default=True,
        help='Do not write zeros while staging an image: the staged '
             'file is sized first, so all-zero blocks, and the zeros that '
             'fill 64 KiB in a block holding data, read as zeros and stay '
             'unallocated on the export (sparse images, their data '
             'scattered or not, stage in the time of their data). The '
             'sha512 still covers every byte. Turn off only for an export '
             'that cannot truncate.'),
    cfg.IntOpt(
        'hash_checkpoint_bytes', default=256 * MiB, min=0,
        help='Bytes between two saved states of the staging sha512 (in '
             'a side file beside the watermark), so that a resumed copy '
             'reads back at most this much to rebuild its hash. 0: never '
             'save (a resume reads back the whole staged prefix).'),
    cfg.StrOpt(
        'export_sha512', default='auto', choices=[
            ('auto', 'hash the export only when nothing further on checks '
                     'every byte against the image\'s os_hash_value '
                     '(a migration whose transfer_options turn '
                     'verify_sha512 off)'),
            ('always', 'hash every export on the source controller too'),
        ],
        help='The sha512 of an outgoing image on the source controller. '
             'By default the peer DTN compares the sha512 of every byte '
             'it receives with the image\'s os_hash_value before anything '
             'is imported, so the export does not hash the image a second '
             'time on this side (one sha512 pass per GiB is 1.3-1.9 '
             'CPU-seconds on the benchmark machine). If the peer finds a '
             'mismatch, this side reads the staged copy back and hashes '
             'it: a wrong copy is invalidated, so that a retry exports '
             'the image again, and the error says which side was wrong. '
             '"always" hashes while staging too: a download that does '
             'not match os_hash_value then fails the export itself, '
             'before its last block is staged (in pipelined mode the '
             'rest may already be on its way to the peer).'),
    cfg.StrOpt(
        'free_space_margin', default='5%',
        regex=_MARGIN.pattern,
        help='Space to leave free on the export: a percentage of its '
             'size ("5%") or bytes with an optional K, M, G or T suffix '
             '("200G"). An image that would eat into it is refused '
             'before staging starts.'),
    cfg.BoolOpt(
        'keep_failed', default=True,
        help='Keep the staged files (the partial copy, its watermark and '
             'the descriptor) of a failed or cancelled outgoing migration, '
             'so that a new request for the same image and peer resumes '
             'from the watermark. Off, the engine removes them as soon as '
             'the migration fails, and a retry exports the image again. '
             'Either way the staged files of a failed migration are '
             'removed once a new request migrates the image under another '
             'transfer (its data or options changed, or force). Files a '
             'peer DTN received are not affected: they stay until their '
             'import succeeds.'),
    cfg.StrOpt(
        'direct_io', default='auto', choices=('auto', 'on', 'off'),
        help='With backend "path": write and read whole blocks of a staged '
             'file with O_DIRECT, past the page cache (the short last '
             'block goes through the page cache). An image is staged once '
             'and read back once, so caching it buys little, and on a VM '
             'whose free memory goes back to the host every new cached '
             'page costs CPU. "auto" uses it on a local file system '
             '(allow_local) and not on a kernel NFS mount, where each '
             'direct write waits for its own WRITE and COMMIT; "on" uses '
             'it on both. libnfs has no client cache either way.'),
    cfg.StrOpt(
        'watermark_suffix', default='.watermark',
        regex=r'^[^/\0]+$',
        help='Suffix of the side file beside each staged image that holds '
             'its committed byte count (followed by " failed" after a '
             'failure); the DTN agent reads it to forward a growing '
             'file.'),
]


def register_opts(conf):
    utils.register(conf, staging_group, staging_opts)


def list_opts():
    return {staging_group: staging_opts}


def margin_bytes(value, total_bytes):
    """Bytes ``free_space_margin`` keeps free on an export of
    ``total_bytes``.
    """
    m = _MARGIN.match(value or "")
    if not m:
        raise ValueError("free_space_margin must be N%% or a size, not %r"
                         % (value,))
    if m.group(1) is not None:
        percent = float(m.group(1))
        if percent > 100:
            raise ValueError("free_space_margin above 100%%: %r" % (value,))
        return int(total_bytes * percent / 100)
    return int(m.group(2)) * _UNITS[m.group(3).upper()]
