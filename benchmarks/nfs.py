"""NFS staging throughput: Hong et al. 2018 (Table 1, Figs. 6-7) again.

The paper wrote and read a 256 MB file with ``dd`` over a kernel NFS
mount at 1 Gbit/s, for block sizes (``dd bs``) from 1 KiB to 1 MiB, in
three cases of server/client synchrony.  This script measures the same
with dtn-migrate's own components: a real nfs-ganesha NFSv3 server
(``devcloud/ganesha.py``) exporting a directory on disk, the
userspace client libnfs (``dtn_migrate.staging.libnfs``) and the copy
engine (``dtn_migrate.staging.copy`` and ``dtn_migrate.staging.stream``),
across a tbf-limited veth (``devcloud/netns.py``).

Cases (Table 1 of the paper)::

    I    server sync  / client async   ganesha NFS_Commit = true;
                                       UNSTABLE writes + COMMIT
    II   server async / client async   NFS_Commit = false; UNSTABLE +
                                       COMMIT (ganesha honours COMMIT)
    III  server sync  / client sync    NFS_Commit = true; FILE_SYNC
                                       writes (open_write(sync=True))

*Block size* is what ``dd bs`` is: the size of each write (read) the
application issues.  The source handed to :func:`copy.stage` is an
iterator of chunks of that size.  Two series per case:

``bs requests``   the engine's ``block_size`` is the block size too, so
                  every NFS WRITE carries one application write: what an
                  application writing bs-sized requests gets from a
                  client with no page cache to gather them.
``production``    the engine as dtn-migrate runs it (``block_size`` 1
                  MiB, 2 writers, commit every 64 MiB): the bs-sized
                  chunks are gathered into 1 MiB WRITEs, as a kernel
                  client's page cache does for ``dd`` on an async mount.

Reads: :func:`stream.open_staged` with ``block_size`` = block size (bs
READs by 2 reader threads), and the production read path (1 MiB
read-ahead, the application calling ``read(bs)``).

Each point writes (reads) ``min(--max-size, bs x N)`` bytes, N per
series (``--blocks``), so that a point takes about 1-5 s; production
points move ``--prod-size`` bytes.  Time is the wall clock of the whole
``stage()`` call (create, writes, the last COMMIT, the watermark) or of
the whole read including the sha512 check.  In the same run: ``iperf3``
over the same veth in both directions (the ceiling) and ``nfs-cp``
(libnfs-utils: 1 MiB requests, one at a time) as a peer.  MB/s is 10^6
bytes per second.  Usage (root)::

    python -m benchmarks.nfs [--link 1gbit] [--reps 3] [--sizes 1K,..,1M]
        [--mtu 1500] [--out DIR] [--quick]
    python -m benchmarks.nfs --from-json DIR/nfs.json --out DIR

The second form redraws tables and figures without measuring.
"""

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time

from benchmarks._lab import ganesha
from benchmarks._lab import netns
from benchmarks import common
from benchmarks import report
from benchmarks import workloads
from dtn_migrate.staging import backend as staging
from dtn_migrate.staging import copy
from dtn_migrate.staging import copycommon
from dtn_migrate.staging import libnfs
from dtn_migrate.staging import stream as staging_stream

KiB = 1 << 10
MiB = 1 << 20
DEFAULT_SIZES = ",".join(
    workloads.format_size(1 << n) for n in range(10, 21))
IPERF3_PORT = 5201
SERVERS = ("sync", "async")

# key -> (label, kind, server, client FILE_SYNC, engine block)
SERIES = {
    "I": ("I: server sync / client async", "write", "sync", False, "bs"),
    "II": ("II: server async / client async", "write", "async", False,
           "bs"),
    "III": ("III: server sync / client sync", "write", "sync", True, "bs"),
    "I-prod": ("I production (1 MiB WRITEs)", "write", "sync", False,
               "prod"),
    "II-prod": ("II production (1 MiB WRITEs)", "write", "async", False,
                "prod"),
    "III-prod": ("III production (1 MiB FILE_SYNC)", "write", "sync", True,
                 "prod"),
    "R": ("read, bs READs", "read", "async", False, "bs"),
    "R-prod": ("read, production (1 MiB read-ahead)", "read", "async",
               False, "prod"),
    "R-sync": ("read, bs READs (server sync)", "read", "sync", False,
               "bs"),
    "R-sync-prod": ("read, production (server sync)", "read", "sync",
                    False, "prod"),
}
# N of the size rule bs x N, per series with bs requests: about 2-3 s a
# point on a quiet machine at small block sizes (latency bound).
DEFAULT_BLOCKS = "I=4096,II=8192,III=4096,R=8192,R-sync=8192"
PAPER = {"I": 87.0, "II": 106.0, "III": 48.0, "read": 118.0}


# ------------------------------------------------------------ helpers

def parse_sizes(text):
    sizes = [workloads.parse_size(s) for s in text.split(",") if s.strip()]
    if not sizes or any(s < 1 for s in sizes):
        raise argparse.ArgumentTypeError("bad size list %r" % text)
    return sizes


def parse_blocks(text):
    out = {}
    for item in text.split(","):
        if not item.strip():
            continue
        key, _, value = item.partition("=")
        if key.strip() not in SERIES or not value.strip().isdigit():
            raise argparse.ArgumentTypeError("bad --blocks item %r" % item)
        out[key.strip()] = int(value)
    return out


def size_label(n):
    return workloads.format_size(n)


def fs_type(path):
    """File system type of the mount holding ``path``."""
    path = os.path.realpath(path)
    best, kind = "", "?"
    with open("/proc/self/mounts") as f:
        for line in f:
            parts = line.split()
            mnt = parts[1].replace("\\040", " ")
            if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and \
                    len(mnt) >= len(best):
                best, kind = mnt, parts[2]
    return kind


def dpkg_version(pkg):
    try:
        p = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", pkg],
                           capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout.strip() or None


def disk_probe(directory):
    """Stable-write speed of the export's disk (MB/s): O_DSYNC writes of
    4 KiB and 1 MiB, and 64 MiB buffered plus fdatasync.
    """
    path = os.path.join(directory, "dtnm-nfs-disk-probe-%d" % os.getpid())
    out = {}
    try:
        for label, bs, count, flags in (
                ("dsync_4K", 4 * KiB, 512, os.O_DSYNC),
                ("dsync_1M", MiB, 32, os.O_DSYNC),
                ("fdatasync_64M", MiB, 64, 0)):
            data = os.urandom(bs)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | flags,
                         0o600)
            try:
                t = time.perf_counter()
                for _ in range(count):
                    os.write(fd, data)
                os.fdatasync(fd)
                out[label] = bs * count / (time.perf_counter() - t) / 1e6
            finally:
                os.close(fd)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
    return out


class Pattern:
    """Incompressible source data, cut into chunks of one block size."""

    def __init__(self, nbytes=8 * MiB):
        self.data = os.urandom(nbytes)
        self._pieces = {}

    def chunks(self, bs, size):
        """An iterator of ``size`` bytes in ``bs``-sized bytes chunks."""
        pieces = self._pieces.get(bs)
        if pieces is None:
            step = min(bs, len(self.data))
            pieces = [self.data[i:i + step]
                      for i in range(0, len(self.data), step)]
            self._pieces = {bs: pieces}
        done = 0
        while done < size:
            for piece in pieces:
                if done >= size:
                    return
                if done + len(piece) > size:
                    piece = piece[:size - done]
                yield piece
                done += len(piece)


# ------------------------------------------------------------ the sites

class Site:
    """One lab (two namespaces, tbf veth) with one ganesha server in
    namespace b exporting a directory under ``export_dir``, and the
    libnfs backend of a client in namespace a.
    """

    def __init__(self, mode, args):
        self.mode = mode
        self.lab = netns.Lab(rate=args.rate, mtu=args.mtu, burst=args.burst)
        self.srv = None
        self.backend = None
        self.iperf3 = None
        try:
            self.lab.start()
            self.srv = ganesha.Ganesha(lab=self.lab,
                                       commit=(mode == "sync"),
                                       tmpdir=args.export_dir)
            self.srv.start()
            with self.client():
                self.backend = libnfs.LibnfsBackend(self.srv.url)
        except BaseException:
            self.close()
            raise

    def client(self):
        return self.srv.client()

    def url(self, name):
        return self.srv.url_for("a", name)

    def start_iperf3(self):
        """iperf3's server in namespace b, on its usual port or another
        (common.on_own_port).
        """
        log_path = os.path.join(self.srv.dir, "iperf3.log")

        def start(port):
            with open(log_path, "w") as log:
                proc = self.lab.popen(
                    "b", ["iperf3", "-s", "-B", self.lab.addr_b, "-p",
                          str(port)], stdin=subprocess.DEVNULL, stdout=log,
                    stderr=subprocess.STDOUT)
            try:
                common.wait_listening(proc, port, log_path, name="iperf3")
            except common.ServerError:
                self.lab.stop(proc)
                raise
            return proc
        self.iperf3, self.iperf3_port = common.on_own_port(
            start, first=IPERF3_PORT)

    def close(self):
        errors = []
        for step in (lambda: self.backend and self.backend.close(),
                     lambda: self.iperf3 and self.lab.stop(self.iperf3),
                     lambda: self.srv and self.srv.close(),
                     self.lab.close):
            try:
                step()
            except Exception as exc:  # noqa: B902 - report, go on
                errors.append(str(exc))
        return errors


# ------------------------------------------------------------ measurements

def write_point(site, name, bs, size, pattern, client_sync, block):
    opts = copycommon.CopyOptions(block_size=bs if block == "bs" else MiB,
                                  sync=client_sync)
    with site.client():
        t = time.perf_counter()
        result = copy.stage(site.backend, name, pattern.chunks(bs, size),
                            size, options=opts)
        seconds = time.perf_counter() - t
        got = site.backend.size(name)
        copy.cleanup(site.backend, name)
    if got != size or result.size != size:
        raise common.BenchError("%s: %s bytes on the export, expected %d"
                                % (name, got, size))
    return seconds


def read_point(site, name, bs, size, sha512, block):
    n = 0
    with site.client():
        t = time.perf_counter()
        if block == "bs":
            with staging_stream.open_staged(
                    site.backend, name, size, sha512,
                    options=copycommon.CopyOptions(
                        block_size=bs)) as stream:
                for data in stream:
                    n += len(data)
        else:
            with staging_stream.open_staged(
                    site.backend, name, size, sha512) as s:
                while True:
                    data = s.read(bs)
                    if not data:
                        break
                    n += len(data)
        seconds = time.perf_counter() - t
    if n != size:
        raise common.BenchError("read %d of %d bytes of %s" % (n, size, name))
    return seconds


def iperf3_point(site, nbytes, reverse):
    argv = ["iperf3", "-c", site.lab.addr_b, "-p", str(site.iperf3_port),
            "-n", str(nbytes), "-P", "1", "-J"] + (["-R"] if reverse else [])
    t = time.perf_counter()
    proc = site.lab.run("a", argv, timeout=120)
    wall = time.perf_counter() - t
    end = json.loads(proc.stdout)["end"]
    return {"MBps": end["sum_received"]["bits_per_second"] / 8e6,
            "wall_MBps": nbytes / wall / 1e6,
            "retransmits": end["sum_sent"].get("retransmits")}


def nfscp_point(site, src, nbytes, reverse):
    """nfs-cp of the local file ``src`` to the export, or (reverse) of
    the copy on the export back to ``src``.back (nfs-cp cannot write to
    /dev/null); MB/s from the wall clock.
    """
    url = site.url("nfs-cp.bin")
    dst = src + ".back"
    argv = ["nfs-cp", url, dst] if reverse else ["nfs-cp", src, url]
    t = time.perf_counter()
    try:
        proc = site.lab.run("a", argv, timeout=600, check=False)
        seconds = time.perf_counter() - t
        if reverse and os.path.getsize(dst) != nbytes:
            raise common.BenchError("nfs-cp read %d of %d bytes"
                                    % (os.path.getsize(dst), nbytes))
    finally:
        with contextlib.suppress(OSError):
            os.unlink(dst)
    if proc.returncode != 0 or "copied" not in proc.stdout:
        raise common.BenchError("%s failed: %s %s" % (
            " ".join(argv), proc.stdout, proc.stderr))
    with site.client():
        if site.backend.size("nfs-cp.bin") != nbytes:
            raise common.BenchError("nfs-cp left %s bytes" %
                                    site.backend.size("nfs-cp.bin"))
    return {"MBps": nbytes / seconds / 1e6, "seconds": seconds}


# ------------------------------------------------------------ the run

class Run:
    def __init__(self, args):
        self.args = args
        self.sites = {}
        self.pattern = Pattern()
        self.samples = {k: {} for k in args.series}
        self.sizes = {k: {} for k in args.series}
        self.peers = {}
        self.failures = []
        self.read_files = {}     # (mode, size) -> (name, sha512)
        self.src = None
        self.began = time.time()
        self.settings = {}
        self.loaded = None      # the JSON of an earlier run (--from-json)

    def load(self, data):
        """Take the samples of an earlier run's JSON (to redraw)."""
        self.loaded = data
        self.samples = {k: {int(bs): v for bs, v in s.items()}
                        for k, s in data["samples"].items()}
        self.sizes = {k: {bs: v[0]["bytes"] for bs, v in s.items()}
                      for k, s in self.samples.items()}
        self.peers = data["peers"]
        self.failures = data["failures"]
        self.settings = data["settings"]

    # -- sizes
    def size_for(self, key, bs):
        args = self.args
        if SERIES[key][4] == "prod":
            size = args.prod_size
        else:
            size = bs * args.blocks.get(key, 8192)
        size = min(size, args.max_size)
        return max(bs, size - size % bs)

    # -- setup / teardown
    def setup(self):
        args = self.args
        modes = sorted({SERIES[k][2] for k in args.series} |
                       (set(SERVERS) if args.peers else set()))
        for mode in modes:
            print("starting lab + ganesha (%s) ..." % mode, flush=True)
            self.sites[mode] = Site(mode, args)
            if "iperf3" in args.peers:
                self.sites[mode].start_iperf3()
        if "nfs-cp" in args.peers:
            self.src = os.path.join(args.src_dir,
                                    "dtnm-nfs-src-%d.bin" % os.getpid())
            with open(self.src, "wb") as f:
                f.writelines(self.pattern.chunks(MiB, args.prod_size))
        reads = [k for k in args.series if SERIES[k][1] == "read"]
        for key in reads:
            mode = SERIES[key][2]
            for bs in args.sizes:
                size = self.size_for(key, bs)
                if (mode, size) in self.read_files:
                    continue
                name = "read-%d.bin" % size
                site = self.sites[mode]
                with site.client():
                    r = copy.stage(site.backend, name,
                                   self.pattern.chunks(MiB, size), size)
                self.read_files[(mode, size)] = (name, r.sha512)
                print("read file %s on the %s server: %d bytes"
                      % (name, mode, size), flush=True)

    def close(self):
        errors = []
        for mode, site in self.sites.items():
            with contextlib.suppress(Exception):
                with site.client():
                    for (m, _), (name, _) in self.read_files.items():
                        if m == mode:
                            copy.cleanup(site.backend, name)
            errors += site.close()
        self.sites = {}
        if self.src:
            with contextlib.suppress(OSError):
                os.unlink(self.src)
        return errors

    # -- measuring
    def run(self):
        args = self.args
        for rep in range(args.reps):
            print("== repetition %d of %d" % (rep + 1, args.reps), flush=True)
            self.run_peers(rep)
            for i, bs in enumerate(args.sizes):
                order = list(args.series)
                shift = (rep + i) % len(order)
                for key in order[shift:] + order[:shift]:
                    self.point(key, bs, rep)
            self.save()

    def point(self, key, bs, rep):
        label, kind, mode, client_sync, block = SERIES[key]
        site = self.sites[mode]
        size = self.size_for(key, bs)
        self.sizes[key][bs] = size
        try:
            if kind == "write":
                name = "w-%s-%d-%d.bin" % (key, bs, rep)
                seconds = write_point(site, name, bs, size, self.pattern,
                                      client_sync, block)
            else:
                name, sha = self.read_files[(mode, size)]
                seconds = read_point(site, name, bs, size, sha, block)
        except (common.BenchError, staging.StagingError) as exc:
            self.failures.append({"series": key, "bs": bs, "rep": rep,
                                  "error": str(exc)})
            print("FAILED %s bs=%s: %s" % (key, size_label(bs), exc),
                  flush=True)
            return
        mbps = size / seconds / 1e6
        self.samples[key].setdefault(bs, []).append(
            {"bytes": size, "seconds": seconds, "MBps": mbps,
             "load1": os.getloadavg()[0]})
        print("%-11s bs=%-5s %7s in %6.2f s = %6.1f MB/s" % (
            key, size_label(bs), size_label(size), seconds, mbps),
            flush=True)

    def run_peers(self, rep):
        args = self.args
        for mode, site in self.sites.items():
            tests = []
            if "iperf3" in args.peers:
                tests += [("iperf3 a->b", lambda s=site: iperf3_point(
                    s, args.prod_size, False)),
                    ("iperf3 b->a", lambda s=site: iperf3_point(
                        s, args.prod_size, True))]
            if "nfs-cp" in args.peers:
                tests += [("nfs-cp write", lambda s=site: nfscp_point(
                    s, self.src, args.prod_size, False)),
                    ("nfs-cp read", lambda s=site: nfscp_point(
                        s, self.src, args.prod_size, True))]
            for name, fn in tests:
                try:
                    sample = fn()
                except (common.BenchError, OSError,
                        subprocess.SubprocessError, ValueError) as exc:
                    self.failures.append({"peer": name, "server": mode,
                                          "rep": rep, "error": str(exc)})
                    print("FAILED %s (%s): %s" % (name, mode, exc),
                          flush=True)
                    continue
                sample["load1"] = os.getloadavg()[0]
                self.peers.setdefault(mode, {}).setdefault(
                    name, []).append(sample)
                print("%-13s (server %s): %6.1f MB/s" % (
                    name, mode, sample["MBps"]), flush=True)
            if "nfs-cp" in args.peers:
                with site.client():
                    site.backend.remove("nfs-cp.bin")

    # -- results
    def line(self):
        return netns.parse_rate(self.args.rate) / 8e6 if self.args.rate \
            else None

    def ceiling(self, mode, kind):
        name = "iperf3 a->b" if kind == "write" else "iperf3 b->a"
        vals = [s["MBps"] for s in self.peers.get(mode, {}).get(name, [])]
        return report.summarize(vals)["median"]

    def summary(self):
        out = {}
        line = self.line()
        for key in self.args.series:
            kind, mode = SERIES[key][1], SERIES[key][2]
            ceiling = self.ceiling(mode, kind)
            out[key] = {}
            for bs, samples in self.samples[key].items():
                s = report.summarize([x["MBps"] for x in samples])
                s["of_line"] = report.ratio(s["median"], line)
                s["x_iperf3"] = report.ratio(s["median"], ceiling)
                s["bytes"] = self.sizes[key][bs]
                out[key][bs] = s
        return out

    def sync_ratios(self, summary):
        pairs = (("I/II", "I", "II"), ("III/II", "III", "II"),
                 ("I/II prod", "I-prod", "II-prod"),
                 ("III/II prod", "III-prod", "II-prod"))
        out = {}
        for bs in self.args.sizes:
            row = {}
            for name, a, b in pairs:
                va = summary.get(a, {}).get(bs, {}).get("median")
                vb = summary.get(b, {}).get(bs, {}).get("median")
                row[name] = report.ratio(va, vb)
            out[bs] = row
        return out, [p[0] for p in pairs]

    def peer_summary(self):
        line = self.line()
        out = {}
        for mode, tests in self.peers.items():
            for name, samples in tests.items():
                s = report.summarize([x["MBps"] for x in samples])
                s["of_line"] = report.ratio(s["median"], line)
                kind = "write" if ("a->b" in name or "write" in name) \
                    else "read"
                s["x_iperf3"] = report.ratio(s["median"],
                                             self.ceiling(mode, kind))
                out["%s (server %s)" % (name, mode)] = s
        return out

    def save(self, final=False):
        args = self.args
        summary = self.summary()
        ratios, ratio_names = self.sync_ratios(summary)
        peers = self.peer_summary()
        self.settings.update({
            "link": args.link, "rate": args.rate, "mtu": args.mtu,
            "tbf_burst": args.burst or (netns.tbf_burst(args.rate, args.mtu)
                                        if args.rate else None),
            "line_MBps": self.line(), "reps": args.reps,
            "sizes": args.sizes, "blocks": args.blocks,
            "max_size": args.max_size, "prod_size": args.prod_size,
            "series": {k: dict(zip(("label", "kind", "server",
                                    "client_file_sync", "engine_block"),
                                   SERIES[k])) for k in args.series},
            "copy_options": {
                k: v for k, v in vars(copycommon.CopyOptions()).items()
                if isinstance(v, (int, float, bool))},
            "peers": args.peers})
        out = args.out
        prefix = args.prefix
        loaded = self.loaded or {}
        path = report.write_json(os.path.join(out, prefix + ".json"), {
            "command": loaded.get("command", report.command_line()),
            "machine": loaded.get("machine", report.machine_info()),
            "settings": self.settings, "complete": final,
            "elapsed_seconds": loaded.get("elapsed_seconds",
                                          time.time() - self.began),
            "samples": {k: {str(bs): v for bs, v in s.items()}
                        for k, s in self.samples.items()},
            "peers": self.peers, "failures": self.failures,
            "summary": {k: {str(bs): v for bs, v in s.items()}
                        for k, s in summary.items()},
            "peer_summary": peers,
            "sync_ratios": {str(bs): v for bs, v in ratios.items()},
            "paper_MBps": PAPER})
        if not final:
            return 0

        def tables():
            self.write_tables(summary, ratios, ratio_names, peers)

        def figures():
            self.plot(summary, "write",
                      os.path.join(out, prefix + "-write.png"))
            self.plot(summary, "read", os.path.join(out, prefix + "-read.png"))
        return report.render(
            path, "python -m benchmarks.nfs --from-json %s --out %s"
            % (path, out), tables, figures)

    def write_tables(self, summary, ratios, ratio_names, peers):
        args = self.args
        headers = ["series", "block size", "bytes", "MB/s median (min–max)",
                   "of line", "× iperf3"]
        rows = []
        for key in args.series:
            for bs in args.sizes:
                s = summary[key].get(bs)
                if not s:
                    continue
                rows.append([SERIES[key][0], size_label(bs),
                             size_label(s["bytes"]), report.fmt_range(s),
                             report.fmt_pct(s["of_line"]),
                             report.fmt(s["x_iperf3"], 2)])
        for name, s in peers.items():
            rows.append([name, "1M", size_label(args.prod_size),
                         report.fmt_range(s), report.fmt_pct(s["of_line"]),
                         report.fmt(s["x_iperf3"], 2)])
        self.emit("throughput", headers, rows)
        headers = ["block size"] + ratio_names
        rows = [[size_label(bs)] + [report.fmt(ratios[bs][n], 2)
                                    for n in ratio_names]
                for bs in args.sizes]
        if any(v is not None for r in ratios.values() for v in r.values()):
            self.emit("sync-ratio", headers, rows)

    def emit(self, name, headers, rows):
        report.write_tables(os.path.join(
            self.args.out, "%s-%s" % (self.args.prefix, name)),
            (headers, rows))

    def plot(self, summary, kind, path):
        keys = [k for k in self.args.series if SERIES[k][1] == kind]
        if not keys or len(self.args.sizes) < 2:
            return
        fig, ax = report.pyplot().subplots(figsize=(6.4, 3.6))
        colors = {"I": report.PALETTE[0], "II": report.PALETTE[1],
                  "III": report.PALETTE[2], "R": report.PALETTE[0],
                  "R-sync": report.PALETTE[2]}
        markers = "os^DvP"
        for i, key in enumerate(keys):
            base = key.replace("-prod", "")
            prod = key.endswith("-prod")
            pts = sorted(summary.get(key, {}).items())
            if not pts:
                continue
            xs = [bs / KiB for bs, _ in pts]
            ys = [s["median"] for _, s in pts]
            lo = [s["median"] - s["min"] for _, s in pts]
            hi = [s["max"] - s["median"] for _, s in pts]
            ax.errorbar(xs, ys, yerr=[lo, hi], label=SERIES[key][0],
                        color=colors.get(base, report.PALETTE[i]),
                        marker=markers[i % len(markers)], markersize=3.5,
                        linestyle="--" if prod else "-", linewidth=1,
                        capsize=2, elinewidth=0.7,
                        markerfacecolor="white" if prod else None)
        line = self.line()
        if line:
            ax.axhline(line, color="black", linestyle=":", linewidth=0.8,
                       label="line rate (%.0f MB/s)" % line)
        ceilings = [self.ceiling(m, kind) for m in self.sites or SERVERS]
        ceilings = [c for c in ceilings if c]
        if ceilings:
            c = report.summarize(ceilings)["median"]
            ax.axhline(c, color="grey", linestyle="-.", linewidth=0.8,
                       label="iperf3 %s (%.0f MB/s)" % (
                           "a→b" if kind == "write" else "b→a", c))
        ax.set_xscale("log", base=2)
        ticks = [bs / KiB for bs in self.args.sizes]
        ax.set_xticks(ticks)
        ax.set_xticklabels([size_label(bs) for bs in self.args.sizes])
        ax.minorticks_off()
        ax.set_xlabel("block size (application %s size)" % kind)
        ax.set_ylabel("throughput (MB/s)")
        ax.set_ylim(0, (line or ax.get_ylim()[1]) * 1.08)
        ax.yaxis.grid(True, linestyle=":", linewidth=0.5)
        ax.set_title("NFS %s throughput, nfs-ganesha + libnfs, %s, MTU %d"
                     % (kind, self.args.link, self.args.mtu))
        ax.legend(frameon=False, loc="upper center", ncol=2,
                  bbox_to_anchor=(0.5, -0.18))
        report.save_figure(fig, path)


# ------------------------------------------------------------ main

def redraw(args):
    with open(args.from_json) as f:
        data = json.load(f)
    st = data["settings"]
    args.link, args.rate, args.mtu = st["link"], st["rate"], st["mtu"]
    args.series = list(st["series"])
    args.sizes = st["sizes"]
    args.reps, args.blocks = st["reps"], st["blocks"]
    args.max_size, args.prod_size = st["max_size"], st["prod_size"]
    args.peers = st["peers"]
    args.prefix = args.prefix or os.path.basename(
        args.from_json).rsplit(".", 1)[0]
    run = Run(args)
    run.load(data)
    return run.save(final=True)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.nfs",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--link", default="1gbit",
                   help="tc rate of the veth (e.g. 1gbit), or 'veth' for "
                        "no limit")
    p.add_argument("--mtu", type=int, default=1500)
    p.add_argument("--burst", type=workloads.parse_size, default=None,
                   help="tbf bucket in bytes (default: the lab's, 10 ms "
                        "of line rate)")
    p.add_argument("--reps", type=int, default=None,
                   help="repetitions (default 3; 1 with --quick)")
    p.add_argument("--sizes", type=parse_sizes, default=None,
                   help="block sizes (default %s)" % DEFAULT_SIZES)
    p.add_argument("--series", default=",".join(SERIES),
                   help="which series (default all: %s)" % ",".join(SERIES))
    p.add_argument("--blocks", type=parse_blocks, default=None,
                   help="N of the size rule bs x N, per series with bs "
                        "requests (default %s)" % DEFAULT_BLOCKS)
    p.add_argument("--max-size", type=workloads.parse_size,
                   default=512 * MiB, help="cap of a point's file size")
    p.add_argument("--prod-size", type=workloads.parse_size,
                   default=256 * MiB,
                   help="file size of production points and peers "
                        "(the paper: 256 MB)")
    p.add_argument("--peers", default="iperf3,nfs-cp",
                   help="side-by-side references ('' for none)")
    p.add_argument("--export-dir", default="/var/tmp",
                   help="where the exported directory lives (a disk, not "
                        "tmpfs)")
    p.add_argument("--src-dir", default="/dev/shm",
                   help="where nfs-cp's local source file lives")
    p.add_argument("--out", default=report.default_out("nfs"))
    p.add_argument("--prefix", default=None,
                   help="file name prefix (default nfs, or nfs-mtuN)")
    p.add_argument("--quick", action="store_true",
                   help="1 rep, sizes 1K,8K,64K,1M, files / 8")
    p.add_argument("--from-json", metavar="JSON",
                   help="measure nothing: redraw the tables and figures of "
                        "an earlier run's JSON into --out")
    args = p.parse_args(argv)
    if args.from_json:
        return redraw(args)
    args.rate = None if args.link in ("veth", "none") else args.link
    args.series = [s for s in args.series.split(",") if s]
    for s in args.series:
        if s not in SERIES:
            p.error("unknown series %r" % s)
    args.peers = [s for s in args.peers.split(",") if s]
    blocks = parse_blocks(DEFAULT_BLOCKS)
    blocks.update(args.blocks or {})
    args.blocks = blocks
    if args.sizes is None:
        args.sizes = parse_sizes("1K,8K,64K,1M" if args.quick
                                 else DEFAULT_SIZES)
    if args.quick:
        args.blocks = {k: max(64, v // 8) for k, v in args.blocks.items()}
        args.max_size //= 8
        args.prod_size //= 8
    if args.reps is None:
        args.reps = 1 if args.quick else 3
    args.prefix = args.prefix or (
        "nfs" if args.mtu == 1500 else "nfs-mtu%d" % args.mtu)

    ok, why = ganesha.available()
    if not ok:
        raise SystemExit("cannot run: %s" % why)
    for tool, pkg in (("iperf3", "iperf3"), ("nfs-cp", "libnfs-utils")):
        if tool in args.peers and shutil.which(tool) is None:
            print("%s is not installed (apt-get install %s); skipped"
                  % (tool, pkg), flush=True)
            args.peers.remove(tool)
    kind = fs_type(args.export_dir)
    if kind in ("tmpfs", "ramfs"):
        print("WARNING: %s is on %s: the server's sync hits no disk"
              % (args.export_dir, kind), flush=True)
    report.require_plotting()
    print("command:", report.command_line(), flush=True)
    common.exit_on_signals()
    run = Run(args)
    run.settings.update({
        "export_dir": args.export_dir, "export_fstype": kind,
        "ganesha": dpkg_version("nfs-ganesha"),
        "libnfs": dpkg_version("libnfs13"),
        "iperf3": report.tool_version(["iperf3", "--version"]),
        "paper": "Hong et al. 2018, Table 1 and Figs. 6-7"})
    began = time.monotonic()
    try:
        run.settings["disk_MBps"] = disk_probe(args.export_dir)
        print("export disk (%s): %s" % (kind, ", ".join(
            "%s %.0f MB/s" % kv for kv in
            run.settings["disk_MBps"].items())), flush=True)
        run.setup()
        run.run()
    finally:
        errors = run.close()
        if errors:
            print("cleanup errors: %s" % "; ".join(errors), flush=True)
    run.settings["runtime_seconds"] = time.monotonic() - began
    rc = run.save(final=True)
    print("runtime %.0f s; results in %s" % (
        run.settings["runtime_seconds"], args.out), flush=True)
    if run.failures:
        print("FAILED points: %d (see %s.json)" % (
            len(run.failures), args.prefix), flush=True)
        return 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
