"""Is the staging path a well-tuned NFS mount, and how should it be?

The local copy writes images from the cloud controller onto the DTN's
export.  Hong et al. 2018 ("Data Transfer Node between cloud providers",
sections 4-5) measured that copy over NFS with ``dd`` on a 1 Gbit/s
link, NFSv4, a 256 MB file and write buffers from 1 KiB to 1 MiB:

* reads ran at the same rate (reported as about 118 Mbps) whatever the
  modes and buffer size;
* writes depended on the sync/async mode of both ends: DTN server async
  and controller client async converged to about 106 MB/s (from 8 KiB
  buffers on), 22 % more than server sync / client async (87 MB/s),
  while sync on both ends needed 64 MB buffers to reach 85 MB/s and
  only gave 48 MB/s at 1 MiB.

Hence the recommended layout: the DTN is the NFS server, the controller
the client, both asynchronous, with large rsize/wsize.  The paper varies
dd's block size and treats it as the rsize/wsize buffer; it does not
separate the two.  The Linux client caps rsize/wsize at 1 MiB, the
largest size measured in async mode, so the profile asks for exactly
that.  What the paper does not measure, and
this module only derives from first principles (and says so), is the
number of TCP connections (``nconnect``) and the TCP buffer sizes for
faster links.

Everything here reads ``/proc/self/mountinfo`` (through
:mod:`dtn_migrate.transfer.mounts`) and never mounts anything.
"""

import dataclasses
import logging
import math
import os
import re
import textwrap

from dtn_migrate.staging import backend
from dtn_migrate.transfer import mounts

LOG = logging.getLogger(__name__)

KiB = 1 << 10
MiB = 1 << 20

NFS_TYPES = frozenset(("nfs", "nfs4"))

#: The Linux client's largest rsize/wsize (NFS_MAX_FILE_IO_SIZE).
LINUX_MAX_IO = MiB

#: Transports the profile accepts.  Over UDP Linux caps rsize/wsize at
#: 32 KiB, and at gigabit rates the 16-bit IP ID wraps within the
#: fragment reassembly time, which can silently corrupt data.
GOOD_PROTOS = ("tcp", "tcp6", "rdma", "rdma6")

#: Link rate one client TCP connection is expected to carry.  A heuristic,
#: not a measurement of Hong et al.: one RPC transport is one socket whose
#: receive processing runs on one CPU, and a lost segment stalls every RPC
#: queued behind it.  Linux >= 5.3 spreads RPCs over up to 16 connections
#: with ``nconnect``.
BITS_PER_CONNECTION = 5 * 10 ** 9
MAX_NCONNECT = 16

#: Linux default of the tcp_rmem maximum (the larger autotuning bound;
#: tcp_wmem's is 4 MiB).  Advice never goes below it.
LINUX_TCP_RMEM_MAX = 6 * MiB


def _version_tuple(version):
    major, _, minor = str(version).partition(".")
    try:
        return int(major), int(minor or 0)
    except ValueError:
        return (0, 0)


def _int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


@dataclasses.dataclass(frozen=True)
class NfsMount:
    """The NFS mount holding a path, as the kernel reports it.

    Sizes and timeouts are the values in force (negotiated with the
    server), not necessarily those asked for at mount time.  ``sync`` is
    True only for the ``sync`` mount flag; its absence means the client
    is asynchronous (the default).  ``noac`` also makes every write
    synchronous on Linux and is reported separately.
    """

    path: str                  # the inspected path, resolved
    mount_point: str
    source: str                # server:export, as mounted
    server: str
    export: str
    root: str                  # directory of the export mounted (bind)
    fstype: str                # nfs or nfs4
    version: str               # "3", "4.0", "4.1", "4.2"
    rsize: int = None
    wsize: int = None
    sync: bool = False
    noac: bool = False
    read_only: bool = False
    proto: str = None          # tcp, tcp6, udp, udp6, rdma, rdma6
    hard: bool = True
    mode: str = "hard"         # hard, soft or softerr
    timeo: int = None          # deciseconds
    retrans: int = None
    nconnect: int = 1
    actimeo: int = None
    lookupcache: str = None
    options: tuple = ()
    submounts: tuple = ()      # (mount point, fstype, source) below

    @property
    def version_tuple(self):
        return _version_tuple(self.version)

    def to_dict(self):
        d = dataclasses.asdict(self)
        d["options"] = list(self.options)
        d["submounts"] = [list(s) for s in self.submounts]
        return d


def _split_source(source):
    """('dtn1', '/export') from 'dtn1:/export' or '[fd00::1]:/export'."""
    if source.startswith("["):
        host, sep, rest = source[1:].partition("]")
        if sep and rest.startswith(":"):
            return host, rest[1:]
    host, sep, export = source.partition(":")
    if not sep:
        return "", source
    return host, export


def _read(mountinfo):
    try:
        with open(mountinfo) as f:
            return f.read()
    except OSError as exc:
        raise backend.BadMount("cannot read %s: %s"
                               % (mountinfo, exc.strerror or exc))


def _below(table, real):
    """Mounts strictly below directory ``real``."""
    prefix = real.rstrip("/") + "/"
    return tuple((m.mount_point, m.fstype, m.source)
                 for m in table if m.mount_point.startswith(prefix))


def inspect(path, mountinfo="/proc/self/mountinfo"):
    """The :class:`NfsMount` holding ``path``.

    Raises :class:`~dtn_migrate.staging.backend.BadMount` when the path
    is not on NFS -- typically because the export is not mounted and the
    directory below is on the root disk -- or when mountinfo cannot be
    read.  ``path`` need not exist.
    """
    table = mounts.parse_mountinfo(_read(mountinfo))
    mount = mounts.find_mount(table, path)
    real = os.path.realpath(path)
    if mount is None:
        raise backend.BadMount("no mount holds %s in %s" % (real, mountinfo))
    if mount.fstype not in NFS_TYPES:
        hint = ""
        if mount.fstype == "autofs":
            hint = " (an automount point that did not mount)"
        elif mount.mount_point == "/" or mount.fstype in mounts.MEMORY_FS:
            hint = " (is the DTN export mounted?)"
        raise backend.BadMount(
            "%s is not on NFS: it is on %s %s mounted at %s%s"
            % (real, mount.fstype, mount.source, mount.mount_point, hint))

    flags = set()
    kv = {}
    for opt in mount.options:
        key, sep, value = opt.partition("=")
        if sep:
            kv[key] = value
        else:
            flags.add(opt)

    version = kv.get("vers") or kv.get("nfsvers")
    if version is None:
        version = "4" if mount.fstype == "nfs4" else "3"
    if version == "4" and "minorversion" in kv:
        version = "4.%s" % kv["minorversion"]
    if version == "4":
        version = "4.0"

    mode = "hard"
    if "softerr" in flags:
        mode = "softerr"
    elif "soft" in flags:
        mode = "soft"
    server, export = _split_source(mount.source)
    return NfsMount(
        path=real,
        mount_point=mount.mount_point,
        source=mount.source,
        server=server,
        export=export,
        root=mount.root,
        fstype=mount.fstype,
        version=version,
        rsize=_int(kv.get("rsize")),
        wsize=_int(kv.get("wsize")),
        sync="sync" in flags,
        noac="noac" in flags,
        read_only="ro" in flags,
        proto=kv.get("proto"),
        hard=mode == "hard",
        mode=mode,
        timeo=_int(kv.get("timeo")),
        retrans=_int(kv.get("retrans")),
        nconnect=_int(kv.get("nconnect")) or 1,
        actimeo=_int(kv.get("actimeo")),
        lookupcache=kv.get("lookupcache"),
        options=tuple(mount.options),
        submounts=_below(table, real),
    )


@dataclasses.dataclass(frozen=True)
class Profile:
    """What a staging mount should look like (Hong et al. 2018, Case II).

    A minimum of 0 disables that check.  ``min_timeo`` (deciseconds) is
    unchecked by default; the Linux TCP default is 600.
    """

    min_version: str = "3"
    protos: tuple = GOOD_PROTOS
    min_rsize: int = MiB
    min_wsize: int = MiB
    require_async: bool = True
    require_hard: bool = True
    require_rw: bool = True
    allow_submounts: bool = False
    min_timeo: int = None


DEFAULT_PROFILE = Profile()


def _size_hint(name, have, want):
    if have is None:
        return ("%s is not shown in mountinfo; cannot tell whether it "
                "reaches %d" % (name, want))
    server_cap = ("knfsd: /proc/fs/nfsd/max_block_size, written before "
                  "nfsd starts; nfs-ganesha: Max%s"
                  % ("Read" if name == "rsize" else "Write"))
    return ("%s=%d is below %d: mount with %s=%d; if the mount already "
            "asks for it, the server caps it (%s)"
            % (name, have, want, name, min(want, LINUX_MAX_IO), server_cap))


def check(mount, profile=DEFAULT_PROFILE):
    """Human-readable deviations of ``mount`` from ``profile`` (empty when
    the mount follows it).

    The server's export mode (sync/async, knfsd ``async`` or ganesha
    ``NFS_Commit``) cannot be seen from the client and is not checked.
    """
    out = []
    if mount.version_tuple < _version_tuple(profile.min_version):
        out.append("NFS version %s is below %s: mount with vers=3 or "
                   "vers=4.2 (version 2 caps transfers at 8 KiB)"
                   % (mount.version, profile.min_version))
    if profile.protos and mount.proto not in profile.protos:
        out.append("proto=%s: use %s; over UDP Linux caps rsize/wsize at "
                   "32 KiB and fast links risk silent corruption from "
                   "IP fragment reassembly"
                   % (mount.proto or "unknown",
                      " or ".join(profile.protos)))
    if profile.min_rsize and (mount.rsize is None
                              or mount.rsize < profile.min_rsize):
        out.append(_size_hint("rsize", mount.rsize, profile.min_rsize))
    if profile.min_wsize and (mount.wsize is None
                              or mount.wsize < profile.min_wsize):
        out.append(_size_hint("wsize", mount.wsize, profile.min_wsize))
    if profile.require_async and mount.sync:
        out.append("mounted with sync: every write waits for the server "
                   "(Hong et al. 2018, 1 Gbit/s: sync on both ends gave "
                   "48 MB/s at 1 MiB writes, async 106 MB/s); remount "
                   "without sync (async is the default)")
    if profile.require_async and mount.noac:
        out.append("noac also makes every write synchronous on Linux; "
                   "drop it (use actimeo=N if attributes must be fresher)")
    if profile.require_hard and not mount.hard:
        out.append("%s mount: a server outage fails or, per nfs(5), may "
                   "silently corrupt writes; use hard (the default)"
                   % mount.mode)
    if profile.require_rw and mount.read_only:
        out.append("mounted read-only: staging cannot write")
    if profile.min_timeo and (mount.timeo or 0) < profile.min_timeo:
        out.append("timeo=%s is below %d deciseconds: retransmissions pile "
                   "up on a busy link; use timeo=600 (the TCP default)"
                   % (mount.timeo, profile.min_timeo))
    foreign = [s for s in mount.submounts
               if not (s[1] in NFS_TYPES
                       and _split_source(s[2])[0] == mount.server)]
    if foreign and not profile.allow_submounts:
        out.append("other file systems are mounted below %s: %s; files "
                   "written there do not reach the DTN %s"
                   % (mount.path, ", ".join("%s (%s %s)" % s
                                            for s in foreign),
                      mount.server))
    return out


def verify(path, profile=DEFAULT_PROFILE, mount_check="warn",
           allow_local=False, mountinfo="/proc/self/mountinfo"):
    """Apply the ``[staging] mount_check`` policy to ``path``.

    Returns the :class:`NfsMount`, or None for a non-NFS path when
    ``allow_local`` is set.  A non-NFS path raises BadMount otherwise,
    whatever ``mount_check``.  Profile deviations raise BadMount with
    ``mount_check='refuse'``, are logged with ``'warn'`` and ignored with
    ``'off'``.
    """
    if mount_check not in ("refuse", "warn", "off"):
        raise ValueError("mount_check must be refuse, warn or off, not %r"
                         % (mount_check,))
    try:
        mount = inspect(path, mountinfo)
    except backend.BadMount as exc:
        if not allow_local:
            raise
        LOG.info("Staging on a local path (allow_local): %s", exc)
        return None
    if mount_check == "off":
        return mount
    deviations = check(mount, profile)
    if deviations and mount_check == "refuse":
        raise backend.BadMount("%s (%s) is off the NFS profile: %s"
                               % (mount.mount_point, mount.source,
                                  "; ".join(deviations)))
    for d in deviations:
        LOG.warning("Staging mount %s (%s): %s", mount.mount_point,
                    mount.source, d)
    return mount


_RATE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?(?:e[0-9]+)?)\s*"
                   r"([kmgt]?)(bit|bit/s|bits|bps)?\s*$", re.I)
_PREFIX = {"": 1, "k": 10 ** 3, "m": 10 ** 6, "g": 10 ** 9, "t": 10 ** 12}


def parse_rate(text):
    """Link rate in bit/s from '10gbit', '1g', '400mbit', '25Gbps' or a
    plain number of bits per second (decimal prefixes, like link speeds).
    Byte units are refused: 'GB' would be ambiguous.
    """
    m = _RATE.match(str(text))
    if not m:
        raise ValueError("not a link rate: %r (use e.g. 1gbit, 10gbit "
                         "or a number of bits per second)" % (text,))
    rate = float(m.group(1)) * _PREFIX[m.group(2).lower()]
    if not math.isfinite(rate) or rate < 1000:
        raise ValueError("implausible link rate: %r" % (text,))
    return int(rate)


def rate_text(bits):
    """'10 Gbit/s' for 10**10."""
    for prefix, scale in (("T", 10 ** 12), ("G", 10 ** 9), ("M", 10 ** 6),
                          ("k", 10 ** 3)):
        if bits >= scale:
            return "%.4g %sbit/s" % (bits / scale, prefix)
    return "%d bit/s" % bits


def _pow2_at_least(n):
    return 1 << max(0, math.ceil(math.log2(max(1, n))))


@dataclasses.dataclass
class Advice:
    """Recommended settings for one client and one DTN export."""

    server: str
    export: str
    client: str
    mount_point: str
    link_rate: int             # bit/s
    rtt: float                 # seconds
    bdp_bytes: int
    nconnect: int
    tcp_buffer_bytes: int
    nfsd_threads: int
    mount_options: list
    mount_command: str
    fstab_line: str
    exports_line: str
    nfs_conf: list
    ganesha_export: str
    sysctls: dict
    notes: list

    def to_dict(self):
        return dataclasses.asdict(self)

    def render(self):
        """The advice as text for an operator's terminal."""
        lines = [
            "# Client %s (cloud controller): mount the DTN export"
            % self.client,
            self.mount_command,
            "# or in /etc/fstab:",
            self.fstab_line,
            "",
            "# DTN %s with the kernel server (knfsd): /etc/exports, then "
            "exportfs -ra" % self.server,
            self.exports_line,
            "# /etc/nfs.conf:",
        ] + self.nfs_conf + [
            "",
            "# DTN %s with nfs-ganesha: /etc/ganesha/ganesha.conf"
            % self.server,
            self.ganesha_export,
            "",
            "# Both hosts: TCP autotuning limits (raise, never lower), "
            "twice the",
            "# bandwidth-delay product of %d bytes (%s, %.3g ms RTT)"
            % (self.bdp_bytes, rate_text(self.link_rate), self.rtt * 1000),
        ]
        lines += ["sysctl -w %s='%s'" % kv for kv in self.sysctls.items()]
        for note in self.notes:
            lines.append("")
            lines += textwrap.wrap(note, 77, initial_indent="# ",
                                   subsequent_indent="#   ",
                                   break_on_hyphens=False)
        return "\n".join(lines) + "\n"


def advise(link_rate, rtt=0.001, server="dtn", export="/export/staging",
           client="controller", mount_point="/mnt/dtn-staging",
           version="4.2", proto="tcp", io_size=MiB, server_sync=False):
    """Mount and export settings for a controller-to-DTN link.

    ``link_rate`` is in bit/s, ``rtt`` in seconds.  What comes from Hong
    et al. 2018: the DTN serves, the controller mounts; both asynchronous
    (about 22 % more write throughput than a sync server); rsize/wsize
    large (``io_size``, 1 MiB: the Linux maximum, the paper's largest).
    What is derived here instead:

    * ``nconnect``: one connection per :data:`BITS_PER_CONNECTION` of
      link rate, 1 to 16, and 1 over RDMA, where one queue pair keeps up
      with the link; omitted from the options when 1 (kernels before
      5.3 refuse it);
    * TCP buffers: autotuning needs about twice the bandwidth-delay
      product (half the buffer goes to overhead), rounded up to a power
      of two and never below the Linux defaults;
    * knfsd threads: enough for several outstanding 1 MiB requests per
      connection, at least 16.

    knfsd's ``async`` export answers COMMIT without flushing; a sync
    export (``server_sync``) keeps COMMIT honest at the cost the paper
    measured (Case I, about 18 % slower).  nfs-ganesha has no such mode:
    with ``NFS_Commit = false`` it keeps client writes unstable until a
    COMMIT, which it honours like a sync export.  See
    "The durability point" in doc/source/staging.rst.
    """
    if link_rate < 1000:
        raise ValueError("link_rate is in bit/s: %r" % (link_rate,))
    if rtt <= 0:
        raise ValueError("rtt must be positive seconds: %r" % (rtt,))
    if io_size < 4 * KiB or io_size > LINUX_MAX_IO or io_size & (
            io_size - 1):
        raise ValueError("io_size must be a power of two from 4 KiB to "
                         "1 MiB (the Linux client's maximum): %r"
                         % (io_size,))
    if _version_tuple(version) < (3, 0) or _version_tuple(version) > (4, 2):
        raise ValueError("NFS version must be 3, 4.0, 4.1 or 4.2: %r"
                         % (version,))
    if proto not in GOOD_PROTOS:
        raise ValueError("proto must be one of %s: %r"
                         % (", ".join(GOOD_PROTOS), proto))
    rdma = proto.startswith("rdma")

    bdp = int(math.ceil(link_rate * rtt / 8))
    if rdma:
        nconnect = 1
    else:
        nconnect = max(1, min(MAX_NCONNECT,
                              math.ceil(link_rate / BITS_PER_CONNECTION)))
    buf = max(LINUX_TCP_RMEM_MAX, _pow2_at_least(2 * bdp))
    threads = max(16, 4 * nconnect)

    options = ["vers=%s" % version, "proto=%s" % proto]
    if rdma:
        options.append("port=20049")
    options += ["rsize=%d" % io_size, "wsize=%d" % io_size, "async",
                "hard", "timeo=600", "retrans=2"]
    if nconnect > 1:
        options.append("nconnect=%d" % nconnect)
    source = "%s:%s" % (server, export)
    opts = ",".join(options)
    mount_command = "mount -t nfs -o %s %s %s" % (opts, source, mount_point)
    fstab = "%s %s nfs %s,_netdev 0 0" % (source, mount_point, opts)

    mode = "sync" if server_sync else "async"
    exports = ("%s %s(rw,%s,no_subtree_check,root_squash,sec=sys)"
               % (export, client, mode))
    nfs_conf = ["[nfsd]", "threads = %d" % threads, "tcp = y", "udp = n"]
    if version == "3":
        nfs_conf.append("vers3 = y")
    if rdma:
        nfs_conf += ["rdma = y", "rdma-port = 20049"]

    transports = "TCP, RDMA" if rdma else "TCP"
    protocols = "3" if version == "3" else "4"
    ganesha = "\n".join([
        "EXPORT {",
        "    Export_Id = 1;            # unique on this server",
        "    Path = %s;" % export,
        "    Pseudo = %s;" % export,
        "    Protocols = %s;" % protocols,
        "    Transports = %s;" % transports,
        "    SecType = sys;",
        "    Squash = root_squash;",
        "    Access_Type = None;",
        "    MaxRead = %d;" % io_size,
        "    MaxWrite = %d;" % io_size,
        "    PrefRead = %d;" % io_size,
        "    PrefWrite = %d;" % io_size,
        "    # false: writes stay unstable until the client's COMMIT,",
        "    # which ganesha honours (fsync), like a knfsd sync export;",
        "    # true would also make every WRITE stable (slower).",
        "    NFS_Commit = false;",
        "    FSAL { Name = VFS; }",
        "    CLIENT {",
        "        Clients = %s;" % client,
        "        Access_Type = RW;",
        "    }",
        "}",
    ])

    sysctls = {
        "net.core.rmem_max": str(buf),
        "net.core.wmem_max": str(buf),
        "net.ipv4.tcp_rmem": "4096 131072 %d" % buf,
        "net.ipv4.tcp_wmem": "4096 16384 %d" % buf,
    }

    notes = [
        "rsize/wsize: knfsd offers at most /proc/fs/nfsd/max_block_size "
        "(1 MiB by default on servers with 4 GiB of RAM or more); check "
        "the mount with: dtn-migrate-manage nfs check %s" % mount_point,
    ]
    if not server_sync:
        notes.append(
            "async export (Hong et al. 2018: ~22% faster writes than "
            "sync): knfsd then answers COMMIT before the data is on disk, "
            "so a DTN crash can lose bytes the controller already "
            "published; restage after a DTN crash (the peer's check "
            "against Glance's sha512 catches damage). A sync export "
            "(--server-sync) keeps COMMIT honest. nfs-ganesha has no "
            "such async mode: with NFS_Commit = false it honours COMMIT "
            "like a sync export.")
    if nconnect > 1:
        notes.append("nconnect=%d needs Linux 5.3 or later on the "
                     "controller; it is a heuristic (one connection per "
                     "%d Gbit/s), not a measurement"
                     % (nconnect, BITS_PER_CONNECTION // 10 ** 9))
    if version == "3":
        notes.append("NFSv3 also needs rpcbind and mountd reachable on "
                     "the DTN; NFSv4 needs only port 2049")
    return Advice(server=server, export=export, client=client,
                  mount_point=mount_point, link_rate=int(link_rate),
                  rtt=rtt, bdp_bytes=bdp,
                  nconnect=nconnect, tcp_buffer_bytes=buf,
                  nfsd_threads=threads, mount_options=options,
                  mount_command=mount_command, fstab_line=fstab,
                  exports_line=exports, nfs_conf=nfs_conf,
                  ganesha_export=ganesha, sysctls=sysctls, notes=notes)
