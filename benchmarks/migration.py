"""Whole migrations between two local clouds over a 1 gbit DTN link.

One image (4 GiB of pseudo-random raw data by default) moves from Glance
A to Glance B in four ways, round-robin within each repetition:

``pipelined``        dtn-migrate's default: export, staging, transfer and
                     import overlap, following each other's watermarks.
``serial``           dtn-migrate with ``{"mode": "serial"}``: each stage
                     waits for the previous one (the paper's fork-and-wait
                     baseline).
``glance-download``  Glance's own import method: Glance B pulls the image
                     from Glance A over the same veth (catalog region
                     ``RegionA-link``, see ``benchmarks/_clouds.py``).
``stages``           each stage of dtn-migrate alone, one after another:
                     *export* (Glance A download into A's staging
                     directory with ``copy.stage``), *transfer* (agent A
                     to agent B of the staged file) and *import* (B's
                     staged file into Glance B with ``open_staged`` and
                     ``ImageService.upload``).

A migration's time runs from the engine's ``migrate`` RPC until the
source engine's ``dtn_migrate.migration.end`` notification arrives;
glance-download's from the image's creation in Glance B until it is
``active`` (polled every 0.2 s by ``devcloud.wait_image``, through
``benchmarks/_clouds.py``).  Every
result is checked: the image in Glance B is active, with the source's
size and sha512.  The setup
(``benchmarks/_clouds.py``): one Keystone, two Glances, RabbitMQ vhosts
and engines in the root namespace, the DTN agents in namespaces ``a``
and ``b`` joined by a tbf-limited veth, staging on local disk.

Also measured in every run: the CPU seconds of each process group (the
clouds' services, RabbitMQ, this process, the machine) and the peak
resident memory of each engine and agent (VmHWM, started afresh before
each run); with ``--page-cost N``, before the clouds start, what writing
1 GiB of new file data costs this machine (:func:`page_cost`).

Usage (root)::

    python -m benchmarks.migration [--size 4G] [--repeat 2] [--warmup 1]
        [--rate 1gbit] [--modes pipelined,serial,glance-download,stages]
        [--data-dir /var/tmp] [--page-cost 3] [--out DIR]
    python -m benchmarks.migration --from-json DIR/results.json --out DIR

The second form redraws the tables and the figures without measuring.
``--warmup N`` first runs every mode N times on the new clouds and keeps
those runs apart (``warmup_samples`` in results.json): the first
migrations after the clouds start pay for cold caches and workers.
"""

import argparse
import datetime
import hashlib
import inspect
import json
import mmap
import os
import shutil
import sys
import tempfile
import time
import traceback
import uuid

import oslo_messaging as messaging

from benchmarks import _clouds
from benchmarks._lab import netns
from benchmarks import common
from benchmarks import linkstats
from benchmarks import report
from benchmarks import workloads
from dtn_migrate.conf import engine as engine_opts
from dtn_migrate import context
from dtn_migrate.staging import copy
from dtn_migrate.staging import stream as staging_stream

#: The context of the benchmark's requests to engine A over the bus.
CTXT = context.get_service_context("dtn-migrate-benchmarks").to_dict()

MiB = 1 << 20
MODES = ("pipelined", "serial", "glance-download", "stages")
STAGES = ("export", "transfer", "import")
WHOLE = ("pipelined", "serial", "glance-download")
LABELS = {"pipelined": "dtn-migrate pipelined",
          "serial": "dtn-migrate serial",
          "glance-download": "Glance glance-download",
          "export": "export alone", "transfer": "transfer alone",
          "import": "import alone"}
TARGET = 1.15
#: Issue 13: glance-download / pipelined >= 2, and dtn-migrate's own
#: processes (both engines and both agents) <= 5 CPU-s per GiB.
TARGET_GLANCE = 2.0
TARGET_CPU_GIB = 5.0
#: Issue 13: each agent's peak resident memory <= 300 MiB, whatever the
#: image's size (its buffer pool is bounded by [transfer]
#: buffer_pool_bytes).
TARGET_RSS = 300 * MiB
AGENTS = ["agent-a", "agent-b"]
#: --page-cost: what writing 1 GiB of new file data costs this machine,
#: in these cases (see page_cost()), and the seconds with nothing of
#: the run cached before a "reported" or "O_DIRECT" write.
PAGE_COST_CASES = ("reported", "recycled", "O_DIRECT", "memcpy")
PAGE_COST_SETTLE = 10.0
#: --smoke: the options of a quick check.
SMOKE = {"size": 256 * MiB, "repeat": 1}
DTN = ["engine-a", "agent-a", "agent-b", "engine-b"]
#: Process groups of the clouds (the benchmark process runs the stages
#: export and import alone, and the relay of glance-download).
OWN = ["glance-a", "engine-a", "agent-a", "agent-b", "engine-b", "glance-b",
       "benchmark process", "keystone"]
#: Overrides of the functional tests' engine settings (poll 0.2 s,
#: progress 1 s, reconcile 5 s): more patience on a loaded machine.
ENGINE = {"engine": {"stall_timeout": 300}}
#: Engine options the functional tests set shorter than their defaults
#: (``--settings tests`` keeps them so; ``shipped`` puts them back).
TEST_TUNED = ("poll_interval", "progress_interval", "reconcile_interval")
#: --settings: the engines' and agents' as shipped, or the tests'.
SETTINGS = ("shipped", "tests")
SETTINGS_HELP = ("what the engines and agents run with: the options' "
                 "defaults without debug logs (shipped), or the functional "
                 "tests' quicker polls, progress writes and 16 MiB commits "
                 "with debug logs (tests, what runs before 2026-11-28 used)")
#: What the transfer alone sends as the migration descriptor: the peer
#: engine, told of the transfer, rejects it at once instead of waiting
#: for a descriptor until its stall timeout.
NOT_A_MIGRATION = json.dumps({"version": 0, "note": "dtn-migrate benchmark: "
                              "a transfer alone, not a migration"}).encode()
FINAL = common.FINAL
#: Longest wait for the engines to remove a migration's staged files.
REMOVAL_WAIT = 120.0
#: Seconds between polls of a migration whose notifications are late.
POLL = 5.0


def engine_conf(args):
    """Sections the engines' configuration gets on top of the test
    clouds': ENGINE, engine A's export hashing (``--export-sha512``)
    and, with ``--settings shipped``, :func:`shipped_engine`.
    """
    conf = {section: dict(values) for section, values in ENGINE.items()}
    if args.settings == "shipped":
        for section, values in shipped_engine().items():
            conf.setdefault(section, {}).update(values)
    conf.setdefault("staging", {})["export_sha512"] = args.export_sha512
    return conf


def shipped_engine():
    """The engine options that the functional tests quicken
    (:data:`TEST_TUNED`), at their defaults, and no debug logging.
    """
    defaults = {o.name: o.default for o in engine_opts.engine_opts}
    return {"DEFAULT": {"debug": "false"},
            "engine": {name: defaults[name] for name in TEST_TUNED}}


def agent_conf(args):
    """Sections the agents' configuration gets: with ``--settings
    shipped``, no debug logging (their other options are the defaults
    already); then each ``--agent-option SECTION.KEY=VALUE``.
    """
    sections = {"DEFAULT": {"debug": "false"}} \
        if args.settings == "shipped" else {}
    for option in getattr(args, "agent_option", None) or ():
        section, key, value = _split_agent_option(option)
        sections.setdefault(section, {})[key] = value
    return sections


def _split_agent_option(text):
    """SECTION.KEY=VALUE as (section, key, value); no section is
    DEFAULT.  ArgumentTypeError without a key or an ``=``.
    """
    name, eq, value = text.partition("=")
    section, _, key = name.rpartition(".")
    if not eq or not key:
        raise argparse.ArgumentTypeError(
            "expected SECTION.KEY=VALUE, got %r" % text)
    return section or "DEFAULT", key, value


def _agent_option(text):
    """argparse type of ``--agent-option``: checked, kept as given."""
    _split_agent_option(text)
    return text


def commit_interval(args):
    """The engines' ``[staging] commit_interval_bytes``: the default
    (None) with ``--settings shipped``, else the functional tests' 16 MiB.
    """
    return None if args.settings == "shipped" else \
        _clouds.TESTS_COMMIT_INTERVAL


def size_label(n):
    """'4 GiB', '512 MiB'."""
    if n >= 1 << 30:
        return "%g GiB" % (n / (1 << 30))
    return "%g MiB" % (n / MiB)


def _iso_seconds(start, end):
    try:
        a = datetime.datetime.fromisoformat(start)
        b = datetime.datetime.fromisoformat(end)
    except (TypeError, ValueError):
        return None
    return (b - a).total_seconds()


def _epoch(iso):
    """The engine's naive UTC ISO time as seconds since the epoch."""
    when = datetime.datetime.fromisoformat(iso)
    return when.replace(tzinfo=datetime.timezone.utc).timestamp()


def finished_after(record, t0_wall):
    """Seconds from ``t0_wall`` (epoch) to the record's ``finished_at``."""
    return _epoch(record["finished_at"]) - t0_wall


def payload_share(mtu):
    """Share of a tbf-limited veth's rate that TCP carries as payload:
    each full segment is ``mtu`` bytes of IPv4 (20) and TCP with
    timestamps (32) headers and payload, and tbf counts it with its
    14-byte Ethernet header.
    """
    return (mtu - 52) / (mtu + 14)


def engine_timeline(events, t0_wall):
    """Seconds from ``t0_wall`` (epoch) to the first ``<stage> started``
    and ``<stage> finished`` event of the migration's record (the
    engine's database rows, microsecond times), for the stages of
    STAGES.
    """
    out = {}
    for ev in events or ():
        if ev.get("stage") not in STAGES or \
                ev.get("event") not in ("started", "finished"):
            continue
        try:
            at = _epoch(ev["created_at"])
        except (KeyError, TypeError, ValueError):
            continue
        out.setdefault("%s %s" % (ev["stage"], ev["event"]), at - t0_wall)
    return out


def _rabbitmq_pgid():
    """Process group of the RabbitMQ server (beam.smp running rabbit)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"beam.smp") and b"rabbit" in argv:
            return os.getpgid(int(pid))
    return None


class CpuMeter:
    """CPU seconds of the services' process groups, of this process and
    of the whole machine (``/proc/stat``), between two snapshots.
    """

    def __init__(self, groups):
        self.groups = groups            # {name: process group id}
        self.tick = common.TICK

    def snapshot(self):
        stats = common.proc_stats()
        out = {name: common.group_cpu(pgid, stats)
               for name, pgid in self.groups.items()}
        times = os.times()
        out["benchmark process"] = times.user + times.system
        with open("/proc/stat") as f:
            cpu = [int(x) for x in f.readline().split()[1:]]
        # user, nice, system, irq, softirq; steal (time the hypervisor
        # gave to other guests) is not work done on this machine.
        out["machine busy"] = (sum(cpu[:3]) + sum(cpu[5:7])) / self.tick
        out["steal"] = cpu[7] / self.tick
        out["wall"] = time.monotonic()
        return out

    @staticmethod
    def delta(before, after):
        return {k: round(after[k] - before[k], 2) for k in before}


def _write_new(path, block, size, flags=0):
    """System CPU-s of writing ``size`` bytes of ``block`` to a new file
    at ``path`` (left there); with ``os.O_DIRECT`` in ``flags``, its
    ``fdatasync`` included.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | flags,
                 0o600)
    try:
        before = os.times()
        for offset in range(0, size, len(block)):
            os.pwrite(fd, block, offset)
        if flags:
            os.fdatasync(fd)
        after = os.times()
    finally:
        os.close(fd)
    return after.system - before.system


def _memcpy(size):
    """CPU-s (user + system) of copying ``size`` bytes between two
    resident buffers in user space.
    """
    n = min(size, 64 * MiB)
    src, dst = mmap.mmap(-1, n), mmap.mmap(-1, n)
    src.write(os.urandom(len(src)))
    dst.write(bytes(len(dst)))           # both resident before timing
    view_s, view_d = memoryview(src), memoryview(dst)
    before = os.times()
    for _ in range(max(1, size // len(src))):
        view_d[:] = view_s
    after = os.times()
    view_s.release()
    view_d.release()
    src.close()
    dst.close()
    return (after.user - before.user) + (after.system - before.system)


def page_cost(directory, reps, settle=PAGE_COST_SETTLE, size=1 << 30,
              log=print):
    """What writing new file data costs this machine (``--page-cost``):
    {case: [CPU-s per GiB, one per repetition]}, interleaved.

    Every stage of a migration writes a new file, and the kernel copies
    each byte into a page-cache page it has just taken.  On a VM whose
    free memory goes back to the host (free page reporting), a page free
    for a while is backed by the host again when next used, and the
    writer pays for it inside that copy.  The cases of
    :data:`PAGE_COST_CASES`: ``reported`` (a new file after ``settle``
    seconds with nothing of the run cached), ``recycled`` (right after
    a file as large was deleted: its pages are taken again before they
    are reported), ``O_DIRECT`` (past the page cache, after ``settle``
    seconds) and ``memcpy`` (the copy alone, between resident buffers).
    """
    block = mmap.mmap(-1, MiB)          # page-aligned, for O_DIRECT
    block.write(os.urandom(MiB))
    path = os.path.join(directory, "dtnm-page-cost-%d" % os.getpid())
    old = path + ".old"
    out = {case: [] for case in PAGE_COST_CASES}
    per_gib = (1 << 30) / size
    try:
        for rep in range(reps):
            for p in (path, old):
                if os.path.exists(p):
                    os.unlink(p)
            time.sleep(settle)
            out["reported"].append(_write_new(path, block, size) * per_gib)
            os.rename(path, old)
            os.unlink(old)
            out["recycled"].append(_write_new(path, block, size) * per_gib)
            os.unlink(path)
            time.sleep(settle)
            out["O_DIRECT"].append(
                _write_new(path, block, size, os.O_DIRECT) * per_gib)
            out["memcpy"].append(_memcpy(size) * per_gib)
            log("page cost, repetition %d: %s (CPU-s per GiB)" % (
                rep + 1, ", ".join("%s %.2f" % (c, out[c][-1])
                                   for c in PAGE_COST_CASES)))
    finally:
        for p in (path, old):
            if os.path.exists(p):
                os.unlink(p)
        block.close()
    return out


def page_cost_table(cost):
    """The page-cost table of a run's settings["page_cost"]."""
    rows = []
    for case in PAGE_COST_CASES:
        values = cost["cpu_s_per_GiB"][case]
        rows.append([case, report.fmt_range(report.summarize(values), 2),
                     " ".join("%.2f" % v for v in values)])
    return ["writing 1 GiB of new file data", "CPU-s per GiB: median "
            "(min–max)", "each repetition"], rows


class Bench:
    def __init__(self, args):
        self.args = args
        self.samples = []
        self.warmup_samples = []
        self.failures = []
        self.settings = {}
        self.source = {}
        self.clouds = None
        self.workdir = None
        self.began = time.time()
        self.loaded = None

    # ------------------------------------------------------------ setup

    def log(self, text):
        print("[%s] %s" % (time.strftime("%H:%M:%S"), text), flush=True)

    def setup(self):
        args = self.args
        os.makedirs(args.data_dir, exist_ok=True)
        self.workdir = tempfile.mkdtemp(prefix="dtnm-bench-migration-",
                                        dir=args.data_dir)
        self.log("work directory %s" % self.workdir)
        self.clouds = _clouds.Clouds(self.workdir, rate=args.rate,
                                     mtu=args.mtu, engine=engine_conf(args),
                                     agent=agent_conf(args),
                                     commit_interval_bytes=commit_interval(
                                         args),
                                     direct_io=args.direct_io,
                                     log=self.log).start()
        groups = {"keystone": self.clouds.keystone.proc.pid}
        for c in (self.clouds.a, self.clouds.b):
            groups.update({"glance-%s" % c.name: c.glance.proc.pid,
                           "engine-%s" % c.name: c.engine.proc.pid,
                           "agent-%s" % c.name: c.agent.proc.pid})
        rabbit = _rabbitmq_pgid()
        if rabbit:
            groups["rabbitmq (shared)"] = rabbit
        self.cpu = CpuMeter(groups)
        self.upload_source()

    def upload_source(self):
        args = self.args
        images = self.clouds.a.images()
        image = images.create({"name": "bench-%s" % workloads.format_size(
            args.size), "disk_format": "raw", "container_format": "bare"})
        hashes = []

        def open_stream():
            hashes.append(hashlib.sha512())
            return workloads.image_chunks(args.size, seed=args.seed,
                                          hasher=hashes[-1])

        self.log("uploading the %s source image to Glance A"
                 % workloads.format_size(args.size))
        t0 = time.monotonic()
        image = images.upload(image["id"], open_stream, args.size)
        seconds = time.monotonic() - t0
        sha = hashes[-1].hexdigest()
        if image.get("os_hash_value") != sha or image["size"] != args.size:
            raise common.BenchError(
                "Glance A stored the source image wrongly: %s" % image)
        self.source = {"image_id": image["id"], "size": args.size,
                       "sha512": sha, "upload_seconds": seconds,
                       "seed": args.seed}
        self.log("source image %s uploaded in %.1f s" % (image["id"],
                                                         seconds))

    # ------------------------------------------------------------ checks

    def check_peer_image(self, image_id):
        image = self.clouds.b.images().get(image_id)
        if image.get("status") != "active" or \
                image.get("size") != self.source["size"] or \
                image.get("os_hash_value") != self.source["sha512"]:
            raise common.BenchError(
                "image %s in Glance B is %s, %s bytes, sha512 "
                "%s...: not the source" % (
                    image_id, image.get("status"), image.get("size"),
                    (image.get("os_hash_value") or "")[:16]))
        return image

    def tidy(self):
        """Remove every image of Glance B and every staged file."""
        client = self.clouds.b.client()
        for image in list(client.images.list()):
            if image["status"] == "deleted":
                # Half-deleted by Glance (see _clouds.wait_import_end):
                # no delete can end it, and it holds no other run back.
                continue
            client.images.delete(image["id"])
        for c in (self.clouds.a, self.clouds.b):
            for entry in os.listdir(c.staging_dir):
                path = os.path.join(c.staging_dir, entry)
                if os.path.isdir(path) and not entry.startswith("."):
                    shutil.rmtree(path, ignore_errors=True)
        os.sync()               # no write-back of one run in the next

    def await_removal(self, transfer_id):
        """Seconds, after the migration ended, until both engines removed
        its staged files (they do so after saving the outcome): the CPU
        they spend on it is counted in the migration's, not in the next
        run's or left to tidy().
        """
        t0 = time.monotonic()
        deadline = t0 + REMOVAL_WAIT
        dirs = [os.path.join(c.staging_dir, transfer_id)
                for c in (self.clouds.a, self.clouds.b)]
        while any(os.path.exists(d) for d in dirs):
            if time.monotonic() > deadline:
                raise common.BenchError(
                    "the staged files of transfer %s are still there %.0f s "
                    "after the migration ended" % (transfer_id, REMOVAL_WAIT))
            time.sleep(0.02)
        return time.monotonic() - t0

    def deadline(self):
        return time.monotonic() + self.args.timeout

    # ------------------------------------------------------------ modes

    def run_migration(self, mode):
        """One migration, followed through the source engine's
        notifications (progress every second, then end or error), with
        a slow poll in case one is lost.
        """
        a, b = self.clouds.a, self.clouds.b
        seen = len(a.events)
        t0, t0_wall = time.monotonic(), time.time()
        req = a.bus.engine.migrate(CTXT, b.agent_name,
                                   images=[self.source["image_id"]],
                                   options={"mode": mode, "force": True})
        [m] = req["migrations"]
        mid = m["migration_id"]
        timeline = {"queued": time.monotonic() - t0}
        rec, end, polled = None, None, t0
        deadline = self.deadline()
        while end is None and time.monotonic() < deadline:
            time.sleep(0.02)
            events, seen = a.events[seen:], len(a.events)
            for when, event, payload in events:
                if payload.get("migration_id") != mid:
                    continue
                self.note_stages(payload, timeline, when - t0)
                if payload.get("state") in FINAL:
                    rec, end = payload, when
            if end is None and time.monotonic() - polled > POLL:
                polled = time.monotonic()
                try:
                    got = a.bus.engine.get_migration(CTXT, mid)
                except messaging.MessagingTimeout:
                    continue
                if got["state"] in FINAL:
                    # The engine's own finish time, not when the poll
                    # happened to see it.
                    rec, end = got, t0 + finished_after(got, t0_wall)
                    timeline["missed notification"] = True
        if end is None:
            try:
                a.bus.engine.cancel_migration(CTXT, mid)
            except Exception as exc:  # noqa: B902 - reported below
                self.log("cancel of %s failed: %s" % (mid, exc))
            raise common.BenchError("migration %s not done in %.0f s"
                                    % (mid, self.args.timeout))
        seconds = end - t0
        if rec["state"] != "complete":
            raise common.BenchError("migration %s %s: %s" % (
                mid, rec["state"], rec.get("error")))
        self.check_peer_image(rec["peer_image"]["image_id"])
        stages = {k: {f: v.get(f) for f in ("rate", "done", "state")}
                  for k, v in (rec.get("stages") or {}).items()}
        # The record's stage events, for the exact timeline.
        events = a.bus.engine.get_migration(CTXT, mid).get("events")
        return [(mode, seconds, {
            "migration_id": rec["migration_id"],
            "transfer_id": rec["transfer_id"],
            "engine_seconds": _iso_seconds(rec.get("created_at"),
                                           rec.get("finished_at")),
            "engine_stages": stages, "timeline": timeline,
            "engine_timeline": engine_timeline(events, t0_wall)})]

    def note_stages(self, rec, timeline, now):
        """First time (s after the request) each stage was seen running
        (``<stage> began``: some bytes done) and done (all bytes).
        """
        size = self.source["size"]
        for name, st in (rec.get("stages") or {}).items():
            done = st.get("done") or 0
            if done > 0:
                timeline.setdefault("%s began" % name, now)
            if done >= size or st.get("state") in ("complete", "active"):
                timeline.setdefault("%s done" % name, now)

    def run_glance_download(self):
        client = self.clouds.b.client()
        t0 = time.monotonic()
        image = client.images.create(name="bench-glance-download",
                                     disk_format="raw",
                                     container_format="bare")
        client.images.image_import(
            image["id"], method="glance-download",
            remote_region=_clouds.LINK_REGION,
            remote_image_id=self.source["image_id"])
        _clouds.wait_image(client, image["id"], timeout=self.args.timeout)
        seconds = time.monotonic() - t0
        self.check_peer_image(image["id"])
        # Not counted: Glance finishes the import after the image went
        # active, and tidy() must not delete it before then.
        _clouds.wait_import_end(client, image["id"])
        return [("glance-download", seconds, {
            "remote_region": _clouds.LINK_REGION,
            "link_endpoint": self.clouds.link_endpoint})]

    def run_stages(self):
        a, b = self.clouds.a, self.clouds.b
        size, sha = self.source["size"], self.source["sha512"]
        image_id = self.source["image_id"]
        tid = uuid.uuid4().hex
        data, desc = "%s/image.data" % tid, "%s/image.json" % tid
        stall = ENGINE["engine"]["stall_timeout"]
        out = []

        # Export: Glance A -> A's staging directory, as StageImage does.
        images_a, backend_a = a.images(), a.backend()
        cpu = self.cpu.snapshot()
        t0 = time.monotonic()
        result = copy.stage(
            backend_a, data, lambda offset: images_a.open_download(
                image_id, offset),
            size, options=a.copy_options(stall), **self.export_hashing(sha))
        out.append(("export", time.monotonic() - t0,
                    {"rate_MBps": result.rate / 1e6,
                     "cpu_seconds": self.cpu.delta(cpu,
                                                   self.cpu.snapshot())}))
        os.sync()

        # Transfer: agent A -> agent B over the veth, the staged file.
        backend_a.write_small(desc, NOT_A_MIGRATION)
        api = a.agent_api()
        files = [{"path": desc, "name": desc},
                 {"path": data, "name": data, "size": size, "sha512": sha}]
        cpu = self.cpu.snapshot()
        t0 = time.monotonic()
        status = api.start_transfer({}, a.agent_name, b.agent_name, files,
                                    transfer_id=tid)
        deadline = self.deadline()
        while status.get("state") not in FINAL:
            if time.monotonic() > deadline:
                raise common.BenchError("transfer %s not done in time: %s"
                                        % (tid, status))
            time.sleep(0.1)
            try:
                status = api.get_transfer({}, a.agent_name, tid)
            except messaging.MessagingTimeout:
                pass
        seconds = time.monotonic() - t0
        if status["state"] != "complete":
            raise common.BenchError("transfer %s %s: %s" % (
                tid, status["state"], status.get("error")))
        backend_b = b.backend()
        if backend_b.size(data) != size:
            raise common.BenchError("transfer %s: B staged %s of %d bytes"
                                    % (tid, backend_b.size(data), size))
        out.append(("transfer", seconds, {
            "transfer_id": tid, "agent_rate": status.get("rate"),
            "cpu_seconds": self.cpu.delta(cpu, self.cpu.snapshot())}))
        os.sync()

        # Import: B's staged file -> Glance B, as UploadImage does.
        images_b = b.images()
        opts = b.copy_options(stall)
        cpu = self.cpu.snapshot()
        t0 = time.monotonic()
        image = images_b.create({"name": "bench-import-alone",
                                 "disk_format": "raw",
                                 "container_format": "bare"})
        image = images_b.upload(
            image["id"], lambda: staging_stream.open_staged(
                backend_b, data, size, options=opts,
                **self.import_hashing(sha)), size)
        out.append(("import", time.monotonic() - t0, {
            "cpu_seconds": self.cpu.delta(cpu, self.cpu.snapshot())}))
        self.check_peer_image(image["id"])
        return out

    def export_hashing(self, sha):
        """copy.stage's hashing arguments for the export alone, as engine
        A's export does with ``--export-sha512`` (auto: no sha512 pass,
        the transfer's sink checks every byte; always: hashed and
        compared with os_hash_value while staged).
        """
        if getattr(self.args, "export_sha512", "always") == "always" or \
                "digest" not in inspect.signature(copy.stage).parameters:
            return {"expected_sha512": sha}
        return {"expected_sha512": None, "digest": False}

    def import_hashing(self, sha):
        """open_staged's hashing arguments for the import alone: as the
        engine's import does (``--import-sha512 auto``: no sha512 pass of
        its own when open_staged can skip it, since Glance B computes
        os_hash_value, which check_peer_image compares), or always
        (``on``: the import before issue 13).
        """
        mode = getattr(self.args, "import_sha512", "auto")
        can_skip = "digest" in inspect.signature(
            staging_stream.open_staged).parameters
        if mode == "on" or not can_skip:
            return {"expected_sha512": sha}
        return {"expected_sha512": None, "digest": False}

    def run_mode(self, mode):
        before = linkstats.counters(self.clouds.lab)
        rss_reset = self.reset_peak_rss()
        if mode == "stages":
            results = self.run_stages()
        else:
            cpu = self.cpu.snapshot()
            if mode == "glance-download":
                results = self.run_glance_download()
            else:
                results = self.run_migration(mode)
                results[0][2]["removal_seconds"] = self.await_removal(
                    results[0][2]["transfer_id"])
            results[0][2]["cpu_seconds"] = self.cpu.delta(
                cpu, self.cpu.snapshot())
        link = linkstats.delta(before, linkstats.counters(self.clouds.lab))
        rss = self.peak_rss()
        for _name, _seconds, extra in results:
            extra["mode_link_bytes"] = link
            extra["peak_rss_bytes"] = rss
            extra["peak_rss_reset"] = rss_reset
        return results

    def _members(self, names):
        """{name: [pids of its process group]} of the named services."""
        stats = common.proc_stats()
        return {name: [pid for pid, (_, pgid, _, _) in stats.items()
                       if pgid == self.cpu.groups[name]]
                for name in names if name in self.cpu.groups}

    def reset_peak_rss(self):
        """Start the engines' and agents' peak memory afresh (True), or
        leave it the peak since they started (False: not allowed here).
        """
        return all([common.reset_peak_rss(pid) for pids in
                    self._members(DTN).values() for pid in pids])

    def peak_rss(self):
        """{engine or agent: the largest peak RSS of its processes} in
        bytes, since reset_peak_rss().
        """
        return {name: max([common.peak_rss(p) or 0 for p in pids] or [0])
                for name, pids in self._members(DTN).items()}

    # ------------------------------------------------------------ loop

    def run(self):
        modes = list(self.args.modes)
        self.warm_up(modes)
        for rep in range(self.args.repeat):
            k = rep % len(modes)
            order = modes[k:] + modes[:k]
            self.log("repetition %d of %d: %s" % (rep + 1, self.args.repeat,
                                                  ", ".join(order)))
            for position, mode in enumerate(order):
                self.one(rep, position, mode)
                self.save()

    def warm_up(self, modes):
        """Run every mode ``--warmup`` times; keep the samples apart
        (rep -1, -2, ...), out of every summary and ratio.
        """
        measured, self.samples = self.samples, []
        try:
            for w in range(self.args.warmup):
                self.log("warm-up round %d of %d: %s" % (
                    w + 1, self.args.warmup, ", ".join(modes)))
                for position, mode in enumerate(modes):
                    self.one(-1 - w, position, mode)
        finally:
            self.warmup_samples += self.samples
            self.samples = measured

    def one(self, rep, position, mode):
        load = list(os.getloadavg())
        began = time.time()
        try:
            self.tidy()
            results = self.run_mode(mode)
        except Exception as exc:  # noqa: B902 - recorded, next mode runs
            self.log("%s FAILED: %s" % (mode, exc))
            self.failures.append({
                "rep": rep, "mode": mode, "error": str(exc),
                "traceback": traceback.format_exc(),
                "logs": {k: common.tail(v) for k, v in
                         self.clouds.logs().items()}})
            results = []
        for name, seconds, extra in results:
            mbps = self.source["size"] / seconds / 1e6
            self.log("%-16s %7.1f s  %6.1f MB/s" % (name, seconds, mbps))
            self.samples.append({
                "rep": rep, "position": position, "mode": mode,
                "what": name, "seconds": seconds, "MBps": mbps,
                "started": began, "loadavg": load, "extra": extra})
        try:
            self.tidy()
        except Exception as exc:  # noqa: B902 - the next run tidies too
            self.log("tidying after %s failed: %s" % (mode, exc))

    def close(self):
        errors = []
        if self.clouds is not None:
            errors += self.clouds.close()
        if self.workdir and not self.args.keep:
            shutil.rmtree(self.workdir, ignore_errors=True)
            if os.path.exists(self.workdir):
                errors.append("could not remove %s" % self.workdir)
        return errors

    # ------------------------------------------------------------ results

    def seconds(self, what, rep=None):
        return [s["seconds"] for s in self.samples
                if s["what"] == what and (rep is None or s["rep"] == rep)]

    def summary(self):
        out = {}
        for what in WHOLE + STAGES:
            s = report.summarize(self.seconds(what))
            if s["n"]:
                s["MBps"] = self.source["size"] / s["median"] / 1e6
                out[what] = s
        return out

    def ratios(self, summary):
        med = {k: v["median"] for k, v in summary.items()}
        stages = [k for k in STAGES if k in med]
        slowest = max(stages, key=lambda k: med[k]) if stages else None
        line = self.line_seconds()
        out = {"slowest_stage": slowest}

        def pair(name, a, b):
            per_rep = []
            for rep in range(self.settings.get("repeat", 0)):
                x, y = a(rep), b(rep)
                per_rep.append(report.ratio(x, y))
            out[name] = {"median": report.ratio(a(None), b(None)),
                         "per_rep": per_rep}

        def one(what):
            def get(rep):
                if rep is None:
                    return med.get(what)
                v = self.seconds(what, rep)
                return v[0] if v else None
            return get

        def slow(rep):
            if rep is None:
                return med.get(slowest)
            v = [self.seconds(k, rep) for k in STAGES]
            return max(x[0] for x in v) if all(v) else None

        def total(rep):
            if rep is None:
                return sum(med[k] for k in STAGES) \
                    if len(stages) == 3 else None
            v = [self.seconds(k, rep) for k in STAGES]
            return sum(x[0] for x in v) if all(v) else None

        pair("pipelined/slowest_stage", one("pipelined"), slow)
        pair("serial/pipelined", one("serial"), one("pipelined"))
        pair("glance-download/pipelined", one("glance-download"),
             one("pipelined"))
        pair("serial/sum_of_stages", one("serial"), total)
        pair("transfer/line", one("transfer"), lambda rep: line)
        payload = self.payload_seconds()
        pair("pipelined/payload", one("pipelined"), lambda rep: payload)
        pair("glance-download/payload", one("glance-download"),
             lambda rep: payload)
        cores = (self.loaded or {}).get("machine", {}).get("cpus") or \
            os.cpu_count()

        def floor(rep):
            v = self.own_cpu("pipelined", rep)
            return (report.summarize(v)["median"] / cores) if v else None
        pair("pipelined/cpu_floor", one("pipelined"), floor)
        out["cores"] = cores
        out["target"] = TARGET
        return out

    def line_seconds(self):
        rate = self.settings.get("rate")
        if not rate or not self.source:
            return None
        return self.source["size"] * 8 / netns.parse_rate(rate)

    def payload_seconds(self):
        """The image's time on the link as TCP payload: no migration of
        incompressible data over one TCP path ends sooner.
        """
        line, mtu = self.line_seconds(), self.settings.get("mtu")
        return line / payload_share(mtu) if line and mtu else None

    def save(self, final=False):
        """Write results.json; once the run is over (``final``), the
        tables and figures drawn from it: 0, or report.RENDER_FAILED
        when one of them could not be written (the results are safe).
        """
        args = self.args
        summary = self.summary()
        ratios = self.ratios(summary)
        loaded = self.loaded or {}
        path = os.path.join(args.out, "results.json")
        report.write_json(path, {
            "command": loaded.get("command", report.command_line()),
            "machine": loaded.get("machine", report.machine_info()),
            "settings": self.settings, "source": self.source,
            "complete": final,
            "elapsed_seconds": loaded.get("elapsed_seconds",
                                          time.time() - self.began),
            "samples": self.samples, "failures": self.failures,
            "warmup_samples": self.warmup_samples,
            "summary": summary, "ratios": ratios})
        if not final:
            return 0
        command = loaded.get("command", report.command_line())

        def tables():
            self.write_tables(summary, ratios, command)

        def figures():
            self.plot(summary, os.path.join(args.out, "migration.png"))
            self.plot_cpu(os.path.join(args.out, "cpu.png"))
        return report.render(
            path, "python -m benchmarks.migration --from-json %s --out %s"
            % (path, args.out), tables, figures)

    def write_tables(self, summary, ratios, command):
        out = self.args.out
        pipelined = (summary.get("pipelined") or {}).get("median")
        headers = ["run", "seconds: median (min–max)", "MB/s", "× pipelined",
                   "each repetition (s)"]
        rows = []
        for what in WHOLE + STAGES:
            s = summary.get(what)
            if not s:
                continue
            each = ", ".join(report.fmt(v) for v in self.seconds(what))
            rows.append([LABELS[what], report.fmt_range(s),
                         report.fmt(s["MBps"]),
                         report.fmt(report.ratio(s["median"], pipelined), 2),
                         each])
        rheaders = ["ratio", "of medians", "each repetition"]
        got = (ratios.get("pipelined/slowest_stage") or {}).get("median")
        verdict = "not measured" if got is None else \
            "met" if got <= TARGET else "NOT met"
        rrows = []
        names = {
            "pipelined/slowest_stage": "pipelined / slowest stage alone "
                                       "(%s; target ≤ %.2f: %s)" % (
                                           ratios.get("slowest_stage"),
                                           TARGET, verdict),
            "serial/pipelined": "serial / pipelined",
            "glance-download/pipelined": "glance-download / pipelined",
            "serial/sum_of_stages": "serial / sum of the stages alone",
            "transfer/line": "transfer alone / line-rate time (%.1f s)" % (
                self.line_seconds() or 0),
            "pipelined/payload": "pipelined / the image's time as TCP "
                                 "payload (%.1f s)" % (
                                     self.payload_seconds() or 0),
            "glance-download/payload": "glance-download / the image's "
                                       "time as TCP payload",
            "pipelined/cpu_floor": "pipelined / (its own CPU seconds ÷ "
                                   "%d cores)" % ratios.get("cores", 0)}
        for key, label in names.items():
            r = ratios.get(key) or {}
            if r.get("median") is None:
                continue
            rrows.append([label, report.fmt(r.get("median"), 2),
                          ", ".join(report.fmt(v, 2)
                                    for v in r.get("per_rep", ()))])
        report.write_tables(os.path.join(out, "results"),
                            (headers, rows), (rheaders, rrows),
                            command=command)
        report.write_tables(os.path.join(out, "targets"),
                            self.targets_table(ratios))
        report.write_tables(os.path.join(out, "cpu"), self.cpu_table())
        report.write_tables(os.path.join(out, "timeline"),
                            self.timeline_table())
        if self.settings.get("page_cost"):
            report.write_tables(os.path.join(out, "page-cost"),
                                page_cost_table(self.settings["page_cost"]))

    def timeline_table(self):
        """Medians of when each stage of a migration started and
        finished, in seconds after the request: from the record's stage
        events (the engine's rows), or, in the runs before they were
        kept, from the source engine's progress notifications (one every
        progress interval: ``began``, some bytes done, and ``done``).
        """
        key, names = "engine_timeline", ("started", "finished")
        if not any(key in s["extra"] for s in self.samples):
            key, names = "timeline", ("began", "done")
        events = ["%s %s" % (st, ev) for st in STAGES for ev in names]
        headers = ["run"] + events + ["complete"]
        rows = []
        for what in ("pipelined", "serial"):
            runs = [s for s in self.samples if s["what"] == what and
                    key in s["extra"]]
            if not runs:
                continue
            cells = []
            for ev in events:
                cells.append(report.fmt(report.summarize(
                    [s["extra"][key].get(ev) for s in runs])["median"]))
            cells.append(report.fmt(report.summarize(
                [s["seconds"] for s in runs])["median"]))
            rows.append([LABELS[what]] + cells)
        return headers, rows

    def cpu_table(self):
        """Median CPU seconds per component and run, their sum, and the
        cores the whole machine kept busy (other jobs included).
        """
        headers = ["run"] + OWN + ["own total", "rabbitmq (shared)",
                                   "other", "cores busy",
                                   "dtn-migrate (engines + agents)",
                                   "dtn-migrate CPU-s/GiB"]
        rows = []
        gib = (self.source.get("size") or 0) / (1 << 30)
        for what in WHOLE + STAGES:
            cpus = [s["extra"]["cpu_seconds"] for s in self.samples
                    if s["what"] == what and "cpu_seconds" in s["extra"]]
            if not cpus:
                continue

            def med(values):
                return report.summarize(values)["median"]

            cells = [med([c.get(n) for c in cpus]) for n in OWN]
            own = med([sum(c.get(n, 0) for n in OWN) for c in cpus])
            rabbit = med([c.get("rabbitmq (shared)") for c in cpus])
            other = med([c["machine busy"] - sum(c.get(n, 0) for n in OWN)
                         - c.get("rabbitmq (shared)", 0) for c in cpus])
            busy = med([c["machine busy"] / c["wall"] for c in cpus
                        if c["wall"]])
            dtn = med([sum(c.get(n, 0) for n in DTN) for c in cpus])
            rows.append([LABELS[what]] + [report.fmt(v) for v in cells] +
                        [report.fmt(own), report.fmt(rabbit),
                         report.fmt(other), report.fmt(busy, 2),
                         report.fmt(dtn),
                         report.fmt(dtn / gib if gib and dtn is not None
                                    else None, 2)])
        return headers, rows

    def dtn_cpu_per_gib(self, what="pipelined"):
        """Median CPU-s per GiB of dtn-migrate's own processes."""
        gib = (self.source.get("size") or 0) / (1 << 30)
        vals = [sum(s["extra"]["cpu_seconds"].get(n, 0) for n in DTN) / gib
                for s in self.samples if s["what"] == what and
                "cpu_seconds" in s["extra"]] if gib else []
        return report.summarize(vals)

    def targets_table(self, ratios):
        """Issue 13's whole-migration targets and whether they hold, by
        the median and in how many repetitions (report.verdict).  A
        ratio's value is the ratio of the medians; the CPU's, the median.
        """
        rows = []

        def add(label, value, values, ok):
            rows.append([label, report.fmt_spread(value, values),
                         report.verdict(value, values, ok)])

        def ratio(key):
            # The ratio of the medians (as results.rst gives it), and the
            # repetitions' own ratios.
            r = ratios.get(key) or {}
            return r.get("median"), r.get("per_rep")

        add("pipelined ≤ %.2f × slowest stage alone" % TARGET,
            *ratio("pipelined/slowest_stage"), lambda v: v <= TARGET)
        add("glance-download ≥ %.1f × pipelined" % TARGET_GLANCE,
            *ratio("glance-download/pipelined"),
            lambda v: v >= TARGET_GLANCE)
        cpu = self.dtn_cpu_per_gib()
        add("engines + agents ≤ %.1f CPU-s/GiB (pipelined)"
            % TARGET_CPU_GIB, cpu["median"], cpu["values"],
            lambda v: v <= TARGET_CPU_GIB)
        rss = self.agents_peak_rss_mib()
        if rss["n"]:
            add("each agent's peak RSS ≤ %d MiB (pipelined, MiB)"
                % (TARGET_RSS // MiB), rss["median"], rss["values"],
                lambda v: v <= TARGET_RSS / MiB)
        return ["target", "value (repetitions' min–max)", "verdict"], rows

    def agents_peak_rss_mib(self, what="pipelined"):
        """The larger agent's peak RSS (MiB) of each run of ``what``."""
        return report.summarize([
            max(s["extra"]["peak_rss_bytes"].get(n, 0) for n in AGENTS) / MiB
            for s in self.samples if s["what"] == what and
            s["extra"].get("peak_rss_bytes")])

    def own_cpu(self, what, rep=None):
        """CPU seconds of the clouds' own processes in a run."""
        return [sum(s["extra"]["cpu_seconds"].get(n, 0) for n in OWN)
                for s in self.samples if s["what"] == what and
                (rep is None or s["rep"] == rep) and
                "cpu_seconds" in s["extra"]]

    def plot(self, summary, path):
        if not summary:
            return
        fig, ax = report.pyplot().subplots(figsize=(6.4, 3.4))
        labels = []
        x = 0
        for i, what in enumerate(WHOLE):
            s = summary.get(what)
            if not s:
                continue
            report.range_bar(ax, x, s, i)
            labels.append(LABELS[what].replace(" ", "\n", 1))
            x += 1
        if all(k in summary for k in STAGES):
            bottom = 0.0
            for j, what in enumerate(STAGES):
                m = summary[what]["median"]
                report.range_bar(ax, x, summary[what], 3 + j, text=None,
                                 bottom=bottom,
                                 label="%s alone (%.1f s)" % (what, m))
                bottom += m
            ax.annotate("%.1f s" % bottom, (x, bottom), ha="center",
                        va="bottom", fontsize=7, xytext=(0, 2),
                        textcoords="offset points")
            labels.append("stages alone\n(stacked)")
            slowest = max(STAGES, key=lambda k: summary[k]["median"])
            y = summary[slowest]["median"]
            ax.axhline(y, color="black", linestyle="--", linewidth=0.8,
                       zorder=4, label="slowest stage alone (%s)" % slowest)
            ax.axhline(y * TARGET, color="grey", linestyle=":",
                       linewidth=0.8, zorder=4,
                       label="target: %.2f × slowest" % TARGET)
            x += 1
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels)
        ax.set_ylabel("time (s)")
        ax.set_ylim(0, ax.get_ylim()[1] * 1.1)
        ax.yaxis.grid(True, linestyle=":", linewidth=0.5, zorder=0)
        ax.set_title("%s image, Glance A → Glance B, %s DTN link" % (
            size_label(self.source["size"]),
            self.settings.get("rate") or "unlimited"))
        ax.legend(frameon=False, fontsize=7, loc="upper center", ncol=2,
                  bbox_to_anchor=(0.5, -0.2))
        report.save_figure(fig, path)

    def plot_cpu(self, path):
        """Stacked bars: median CPU seconds of each process per run."""
        runs = [w for w in WHOLE + STAGES if any(
            s["what"] == w and "cpu_seconds" in s["extra"]
            for s in self.samples)]
        if not runs:
            return
        fig, ax = report.pyplot().subplots(figsize=(6.4, 3.4))
        bottoms = [0.0] * len(runs)
        for j, name in enumerate(OWN):
            vals = []
            for w in runs:
                v = report.summarize(
                    [s["extra"]["cpu_seconds"].get(name) for s in
                     self.samples if s["what"] == w and
                     "cpu_seconds" in s["extra"]])["median"]
                vals.append(v or 0.0)
            if not any(vals):
                continue
            ax.bar(range(len(runs)), vals, 0.6, bottom=bottoms,
                   color=report.PALETTE[j % len(report.PALETTE)],
                   hatch=report.HATCHES[j % len(report.HATCHES)],
                   edgecolor="black", linewidth=0.5, zorder=2, label=name)
            bottoms = [b + v for b, v in zip(bottoms, vals)]
        for x, y in enumerate(bottoms):
            ax.annotate("%.1f" % y, (x, y), ha="center", va="bottom",
                        fontsize=7, xytext=(0, 2), textcoords="offset points")
        ax.set_xticks(range(len(runs)))
        ax.set_xticklabels([LABELS[w].replace(" ", "\n", 1) for w in runs],
                           fontsize=7)
        ax.set_ylabel("CPU seconds (median)")
        ax.set_ylim(0, max(bottoms) * 1.15 or 1)
        ax.yaxis.grid(True, linestyle=":", linewidth=0.5, zorder=0)
        ax.set_title("CPU seconds per process, %s image" % size_label(
            self.source["size"]))
        ax.legend(frameon=False, fontsize=6, loc="upper center", ncol=4,
                  bbox_to_anchor=(0.5, -0.22))
        report.save_figure(fig, path)

    def load(self, data):
        self.loaded = data
        self.settings = data["settings"]
        self.source = data["source"]
        self.samples = data["samples"]
        self.warmup_samples = data.get("warmup_samples", [])
        self.failures = data.get("failures", [])


# ---------------------------------------------------------------- main

def _page_reporting():
    """The kernel command line's word on free page reporting, if any."""
    try:
        with open("/proc/cmdline") as f:
            words = f.read().split()
    except OSError:
        return None
    return " ".join(w for w in words if w.startswith("page_reporting")) \
        or None


def redraw(args):
    with open(args.from_json) as f:
        data = json.load(f)
    bench = Bench(args)
    bench.load(data)
    return bench.save(final=True)


def parser():
    """The command line's options (``parser().parse_args([])``: every
    option at its default, for a benchmark that runs this one).
    """
    p = argparse.ArgumentParser(prog="python -m benchmarks.migration",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=workloads.parse_size, default="4G",
                   help="image size (default 4G)")
    p.add_argument("--repeat", type=int, default=2,
                   help="repetitions (default 2); modes round-robin")
    p.add_argument("--warmup", type=int, default=0,
                   help="rounds of every mode run first and kept out of "
                        "the results (default 0, as the documented runs "
                        "before it had; 1 is enough to take the new "
                        "clouds' first touch off the first repetition)")
    p.add_argument("--modes", default=",".join(MODES),
                   help="default %s" % ",".join(MODES))
    p.add_argument("--rate", default="1gbit",
                   help="tc rate of the DTN link, or 'none'")
    p.add_argument("--mtu", type=int, default=1500)
    p.add_argument("--seed", type=int, default=workloads.DEFAULT_SEED)
    p.add_argument("--data-dir", default="/var/tmp",
                   help="where Glance stores and staging directories live "
                        "(a disk with room for about 5 x --size)")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds per run (default max(900, size at "
                        "5 MB/s))")
    p.add_argument("--out", default=report.default_out("migration"),
                   help="where the results go (default %(default)s)")
    p.add_argument("--no-direct-io", dest="direct_io", action="store_false",
                   help="stage, send, receive and import through the page "
                        "cache ([staging] and [transfer] direct_io = "
                        "false), for a side-by-side run")
    p.add_argument("--keep", action="store_true",
                   help="keep the work directory (logs, stores)")
    p.add_argument("--import-sha512", choices=("auto", "on"),
                   default="auto",
                   help="the import alone hashes like the engine (auto: no "
                        "own sha512 pass when open_staged can skip it) or "
                        "always (on)")
    p.add_argument("--export-sha512", choices=("auto", "always"),
                   default="auto",
                   help="[staging] export_sha512 of the engines, and how "
                        "the export alone hashes (auto: no sha512 pass on "
                        "the source host, the sink checks; always: the "
                        "export hashes too, as before issue 13's export "
                        "change), for a side-by-side run")
    p.add_argument("--settings", choices=SETTINGS, default=SETTINGS[0],
                   help=SETTINGS_HELP)
    p.add_argument("--agent-option", action="append", type=_agent_option,
                   metavar="SECTION.KEY=VALUE",
                   help="an option of both agents' configuration, over "
                        "the --settings ones (repeatable); for example "
                        "transfer.direct_io=false")
    p.add_argument("--page-cost", type=int, default=0, metavar="REPS",
                   help="first measure, REPS times, what writing 1 GiB of "
                        "new file data into --data-dir costs this machine "
                        "(page cache against O_DIRECT: about 20 s each; "
                        "default 0, not measured)")
    p.add_argument("--from-json", metavar="JSON",
                   help="measure nothing: redraw from an earlier run")
    report.add_smoke(p, "migration", SMOKE,
                     "about 4 min, 2 of them the clouds' start")
    return p


def main(argv=None):
    p = parser()
    args = p.parse_args(argv)
    report.apply_smoke(args, p, "migration", SMOKE)
    if args.from_json:
        return redraw(args)
    report.require_plotting()
    args.modes = [m for m in args.modes.split(",") if m]
    for m in args.modes:
        if m not in MODES:
            p.error("unknown mode %r (known: %s)" % (m, ", ".join(MODES)))
    if args.rate in ("none", ""):
        args.rate = None
    if args.timeout is None:
        args.timeout = max(900.0, args.size / 5e6)
    why = _clouds.check()
    if why:
        raise SystemExit("cannot run: %s" % why)
    free = shutil.disk_usage(args.data_dir if os.path.isdir(args.data_dir)
                             else os.path.dirname(args.data_dir)).free
    if free < 5 * args.size:
        raise SystemExit("%s has %.1f GB free; about 5 x %s are needed"
                         % (args.data_dir, free / 1e9,
                            workloads.format_size(args.size)))
    print("command:", report.command_line(), flush=True)
    common.exit_on_signals()
    bench = Bench(args)
    bench.settings = {
        "size": args.size, "repeat": args.repeat, "modes": args.modes,
        "warmup": args.warmup,
        "rate": args.rate, "mtu": args.mtu,
        "tbf_burst": netns.tbf_burst(args.rate, args.mtu)
        if args.rate else None,
        "data_dir": args.data_dir, "engine": engine_conf(args),
        "agent": agent_conf(args), "settings": args.settings,
        "commit_interval_bytes": commit_interval(args),
        "import_sha512": args.import_sha512, "direct_io": args.direct_io,
        "export_sha512": args.export_sha512,
        "link_region": _clouds.LINK_REGION,
        "glance": report.tool_version([os.path.join(
            _clouds.clouds_venv(), "bin", "python"), "-c",
            "import importlib.metadata as m; print('glance', "
            "m.version('glance'), 'keystone', m.version('keystone'))"])}
    t0 = time.monotonic()
    if args.page_cost:
        bench.settings["page_cost"] = {
            "reps": args.page_cost, "settle_seconds": PAGE_COST_SETTLE,
            "page_reporting": _page_reporting(),
            "cpu_s_per_GiB": page_cost(args.data_dir, args.page_cost,
                                       log=bench.log)}
    try:
        bench.setup()
        bench.run()
    finally:
        errors = bench.close()
        if errors:
            print("cleanup errors: %s" % "; ".join(errors), flush=True)
    bench.settings["runtime_seconds"] = time.monotonic() - t0
    rc = bench.save(final=True)
    print("runtime %.0f s; results in %s" % (
        bench.settings["runtime_seconds"], args.out), flush=True)
    if bench.failures:
        print("FAILED runs: %d (see results.json)" % len(bench.failures),
              flush=True)
        return 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
