"""Reproduction of FT-LADS' evaluation (Kasu et al., IEEE Access 2019).

Three experiments, each comparing settings in the same run:

``overhead``  transfer time with the object log off (``--logger none``)
              versus every logger mechanism x method (paper Figs. 5-6).
              Runs are interleaved round-robin and medians compared; the
              time the source spent inside the log is also measured
              directly (``log_seconds``), which the machine's noise does
              not blur.
``space``     bytes the log occupies on disk for each mechanism x method
              with every object of the workload recorded (paper Fig. 7).
``recovery``  recovery overhead ER_t = TBF + TAF - TT after a kill -9 of
              the source at 20/40/60/80 % of the transfer time (paper
              Figs. 8-10), with the default log and with none.

Usage (as root for the namespace link)::

    python -m benchmarks.ftlads overhead --link loopback --reps 3
    python -m benchmarks.ftlads space
    python -m benchmarks.ftlads recovery --link 1gbit
    python -m benchmarks.ftlads all --out DIR
    # a quick check of all three (about 2 min)
    python -m benchmarks.ftlads all --smoke
    # an experiment's table and figure again from its JSON
    python -m benchmarks.ftlads overhead --from-json DIR/ftlads-overhead.json

Objects are 1 MiB, as in the paper's evaluation.
"""

import argparse
import itertools
import json
import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from benchmarks._lab import netns
from benchmarks import common
from benchmarks import report
from benchmarks import workloads
from dtn_migrate.transfer import config
from dtn_migrate.transfer import objectlog

MiB = 1 << 20
EXE = os.path.join(os.path.dirname(sys.executable), "dtn-migrate-transfer")
MECHANISMS = ("file", "transaction", "universal")
METHODS = config.LOG_METHODS
OBJECT_SIZE = MiB


def workload(name, args):
    """big: 8 x 512 MiB; small: 4000 x 1 MiB (the issue's suggestion)."""
    if name == "big":
        ds = workloads.Dataset("small", args.data_dir,
                               small_count=args.big_files,
                               small_size=args.big_size)
    elif name == "small":
        ds = workloads.Dataset("small", args.data_dir,
                               small_count=args.small_count,
                               small_size=MiB)
    else:
        raise ValueError(name)
    ds.ensure(log=lambda *a: print(*a, flush=True))
    return ds


class Endpoints:
    """A sink (serve) and a way to run the source (send), on loopback or
    across the two namespaces of a rate-limited veth.
    """

    def __init__(self, link, workdir):
        self.workdir = workdir
        self.key = os.path.join(workdir, "key")
        with open(self.key, "w") as f:
            f.write(secrets.token_hex(32))
        self.lab = None
        self.addr = "127.0.0.1"
        if link != "loopback":
            ok, why = netns.available()
            if not ok:
                raise SystemExit("namespaces unavailable: %s" % why)
            self.lab = netns.Lab(rate=link)
            self.lab.start()
            self.addr = self.lab.addr_b
        self.port = None        # the sink's, new at every start
        self.dst = os.path.join(workdir, "dst")
        self.server = None

    def argv(self, ns, argv):
        return self.lab.argv(ns, argv) if self.lab else argv

    def start_sink(self):
        """A new sink on a port it takes itself (port 0, read back from
        its ``listening on HOST:PORT`` line).
        """
        self.stop_sink()
        shutil.rmtree(self.dst, ignore_errors=True)
        os.makedirs(self.dst)
        argv = self.argv("b", [EXE, "serve", "--root", self.dst, "--listen",
                               "%s:0" % self.addr,
                               "--key-file", self.key, "--object-size",
                               str(OBJECT_SIZE)])
        self.server = subprocess.Popen(argv, stdout=subprocess.PIPE,
                                       stderr=subprocess.DEVNULL,
                                       start_new_session=True, text=True)
        self.port = common.listening_port(self.server.stdout.readline())
        if self.port is None:
            raise SystemExit("sink did not start")

    def stop_sink(self):
        if self.server is not None:
            self.server.terminate()
            self.server.wait(30)
            self.server = None

    def send_argv(self, ds, state, tid, logger, method):
        return self.argv("a", [
            EXE, "send", "--peer", "%s:%d" % (self.addr, self.port),
            "--key-file", self.key, "--state-dir", state, "--root", ds.root,
            "--transfer-id", tid, "--json", "--no-verify", "--object-size",
            str(OBJECT_SIZE), "--logger", logger, "--log-method", method]
            + ds.files)

    def send(self, ds, state, tid, logger, method, kill_after=None):
        """Run the source; return (seconds, status or None if killed)."""
        argv = self.send_argv(ds, state, tid, logger, method)
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        if kill_after is not None:
            try:
                proc.wait(kill_after)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return time.perf_counter() - t0, None
        out, err = proc.communicate()
        seconds = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit("send failed (%d): %s" % (proc.returncode,
                                                       err[-2000:]))
        return seconds, json.loads(out.strip().splitlines()[-1])

    def close(self):
        self.stop_sink()
        if self.lab:
            self.lab.close()


def configs():
    return [("none", "bit64")] + list(itertools.product(MECHANISMS, METHODS))


def label(logger, method):
    return "FT off" if logger == "none" else "%s/%s" % (logger, method)


# Experiment 1: overhead -------------------------------------------------

def overhead(args, out):
    results = {}
    work = tempfile.mkdtemp(prefix="dtnm-ft-", dir="/dev/shm")
    ep = Endpoints(args.link, work)
    try:
        for name in args.workloads:
            ds = workload(name, args)
            samples = {label(*c): [] for c in configs()}
            logs = {label(*c): [] for c in configs()}
            for rep in range(args.reps):
                order = configs()
                random.Random(rep).shuffle(order)
                for logger, method in order:
                    ep.start_sink()
                    state = os.path.join(work, "state")
                    shutil.rmtree(state, ignore_errors=True)
                    seconds, status = ep.send(ds, state, secrets.token_hex(16),
                                              logger, method)
                    key = label(logger, method)
                    samples[key].append(seconds)
                    logs[key].append(status["log_seconds"] /
                                     max(status["elapsed"], 1e-9))
                    print("%-6s rep %d %-22s %6.2f s  log %.4f %%" % (
                        name, rep + 1, key, seconds, 100 * logs[key][-1]),
                        flush=True)
            base = report.summarize(samples["FT off"])["median"]
            rows = {}
            for key in samples:
                s = report.summarize(samples[key])
                rows[key] = {"seconds": s, "overhead": report.ratio(
                    s["median"], base) - 1,
                    "log_fraction": report.summarize(logs[key])}
            results[name] = {"files": len(ds.files),
                             "bytes": ds.total_bytes, "rows": rows}
    finally:
        ep.close()
        shutil.rmtree(work, ignore_errors=True)
    return results


def overhead_table(results, link):
    headers = ["workload", "logger/method", "seconds median (min–max)",
               "overhead vs FT off", "time in log (median)"]
    table = []
    for name, r in results.items():
        for key, row in r["rows"].items():
            table.append([name, key, report.fmt_range(row["seconds"], 2),
                          "–" if key == "FT off" else
                          "%+.1f %%" % (100 * row["overhead"]),
                          "%.3f %%" % (100 * row["log_fraction"]["median"])])
    return headers, table


def overhead_figure(results, link, out):
    series = [k for k in results[next(iter(results))]["rows"]]
    report.grouped_bars(
        os.path.join(out, "ftlads-overhead.png"), list(results), series,
        {k: {w: results[w]["rows"][k]["seconds"] for w in results}
         for k in series},
        ylabel="transfer time (s)", title="FT mechanisms and methods vs "
        "FT off (%s)" % link, annotate=False, figsize=(9, 3.6))


# Experiment 2: space ------------------------------------------------------

def space(args, out):
    """Record every object of each workload, in BLOCK_SYNC-sized batches
    in the out-of-order way they arrive, and measure the log on disk
    before files complete (completion removes or collapses logs).
    """
    shapes = {"big (8 x 512 MiB)": [512] * 8,
              "small (4000 x 1 MiB)": [1] * 4000}
    results = {}
    rng = random.Random(7)
    for shape, sizes in shapes.items():
        files = [objectlog.LogFile(i, "f%06d.bin" % i, n)
                 for i, n in enumerate(sizes)]
        objects = [(f.file_id, i) for f in files for i in range(f.nobjects)]
        # Out of order within a window of 64 objects, batches of 1-16.
        order = []
        for start in range(0, len(objects), 64):
            chunk = objects[start:start + 64]
            rng.shuffle(chunk)
            order.extend(chunk)
        results[shape] = {}
        for mech, method in itertools.product(MECHANISMS, METHODS):
            d = tempfile.mkdtemp(prefix="dtnm-logspace-")
            log = objectlog.open_log(os.path.join(d, "log"), mech, method,
                                     files, 4)
            pos = 0
            while pos < len(order):
                n = rng.randint(1, 16)
                log.record(order[pos:pos + n])
                pos += n
            results[shape]["%s/%s" % (mech, method)] = log.space()
            log.close()
            shutil.rmtree(d)
    return results


def space_table(results, link):
    shapes = list(results)
    headers = ["mechanism/method"] + shapes
    table = [[k] + [str(results[s][k]) for s in shapes]
             for k in results[shapes[0]]]
    return headers, table


def space_figure(results, link, out):
    for shape in results:
        # As the paper's Fig. 7: methods along x, one bar per mechanism.
        report.grouped_bars(
            os.path.join(out, "ftlads-space-%s.png" % shape.split()[0]),
            list(METHODS), list(MECHANISMS),
            {m: {meth: results[shape]["%s/%s" % (m, meth)] / 1024.0
                 for meth in METHODS} for m in MECHANISMS},
            ylabel="log size (KiB, log scale)", log=True, digits=1,
            title="Object log space, %s" % shape, figsize=(7, 3.4))


# Experiment 3: recovery ---------------------------------------------------

def recovery(args, out):
    results = {}
    work = tempfile.mkdtemp(prefix="dtnm-ftrec-", dir="/dev/shm")
    ep = Endpoints(args.link, work)
    points = [int(p) for p in args.points.split(",")]
    loggers = [("universal", "bit64"), ("none", "bit64")]
    try:
        for name in args.workloads:
            ds = workload(name, args)
            results[name] = {}
            for logger, method in loggers:
                key = label(logger, method)
                tts = []
                for _ in range(args.reps):
                    ep.start_sink()
                    state = os.path.join(work, "state")
                    shutil.rmtree(state, ignore_errors=True)
                    tts.append(ep.send(ds, state, secrets.token_hex(16),
                                       logger, method)[0])
                tt = report.summarize(tts)["median"]
                rows = {}
                for p in points:
                    ers = []
                    for _ in range(args.reps):
                        ep.start_sink()
                        state = os.path.join(work, "state")
                        shutil.rmtree(state, ignore_errors=True)
                        tid = secrets.token_hex(16)
                        tbf, _ = ep.send(ds, state, tid, logger, method,
                                         kill_after=tt * p / 100.0)
                        taf, status = ep.send(ds, state, tid, logger, method)
                        ers.append((tbf + taf - tt) / tt)
                        print("%-6s %-18s fault %d %%: TBF %.2f TAF %.2f TT "
                              "%.2f -> ER %.2f %% (resumed %d bytes)" % (
                                  name, key, p, tbf, taf, tt,
                                  100 * ers[-1], status["resumed_bytes"]),
                              flush=True)
                    # A string key, as in the JSON the report is drawn
                    # from.
                    rows[str(p)] = report.summarize(ers)
                results[name][key] = {"TT": report.summarize(tts),
                                      "ER": rows}
    finally:
        ep.close()
        shutil.rmtree(work, ignore_errors=True)
    return results


def _points(results):
    """The fault points of recovery results, in order."""
    per = next(iter(next(iter(results.values())).values()))
    return sorted(per["ER"], key=int)


def recovery_table(results, link):
    points = _points(results)
    headers = ["workload", "log", "TT (s)"] + [
        "ER at %s %%" % p for p in points]
    table = []
    for name, per in results.items():
        for key, r in per.items():
            table.append([name, key, report.fmt(r["TT"]["median"], 2)] + [
                "%.1f %%" % (100 * r["ER"][p]["median"]) for p in points])
    return headers, table


def recovery_figure(results, link, out):
    points = _points(results)
    series = ["%s %s" % (w, k) for w in results for k in results[w]]
    report.grouped_bars(
        os.path.join(out, "ftlads-recovery.png"),
        ["%s %%" % p for p in points], series,
        {"%s %s" % (w, k): {"%s %%" % p: tuple(
            100 * results[w][k]["ER"][p][m] for m in ("median", "min", "max"))
            for p in points} for w in results for k in results[w]},
        ylabel="ER_t (% of TT)", xlabel="fault point",
        title="Recovery overhead after kill -9 of the source (%s)"
        % link, digits=1, figsize=(8, 3.6))


#: experiment: (measure, table, figure).
EXPERIMENTS = {"space": (space, space_table, space_figure),
               "overhead": (overhead, overhead_table, overhead_figure),
               "recovery": (recovery, recovery_table, recovery_figure)}


def write(name, out, data):
    """ftlads-NAME.json (``data``: the command, machine, link and
    results), then the table and figure drawn from it: 0, or
    report.RENDER_FAILED (the results are safe).
    """
    _, table, figure = EXPERIMENTS[name]
    results, link = data["results"], data.get("link")
    path = report.write_json(os.path.join(out, "ftlads-%s.json" % name),
                             data)

    def tables():
        report.write_tables(os.path.join(out, "ftlads-%s" % name),
                            table(results, link))

    def figures():
        figure(results, link, out)
    return report.render(path, "python -m benchmarks.ftlads %s --from-json "
                         "%s --out %s" % (name, path, out), tables, figures)


#: --smoke: the options of a quick check (those given win).
SMOKE = {"reps": 1, "points": "50", "big_files": 2, "big_size": 16 * MiB,
         "small_count": 64}


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.ftlads",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("experiment", choices=tuple(EXPERIMENTS) + ("all",))
    p.add_argument("--link", default="loopback",
                   help="loopback, or a tc rate such as 1gbit")
    p.add_argument("--workloads", default="big,small",
                   type=lambda s: s.split(","))
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--points", default="20,40,60,80")
    p.add_argument("--data-dir", default="/dev/shm/dtnm-bench/data")
    p.add_argument("--big-files", type=int, default=8)
    p.add_argument("--big-size", type=workloads.parse_size,
                   default=512 * MiB)
    p.add_argument("--small-count", type=int, default=4000)
    p.add_argument("--out", default=report.default_out("ftlads"))
    p.add_argument("--from-json", metavar="JSON",
                   help="measure nothing: the experiment's table and "
                   "figure again from its ftlads-EXPERIMENT.json")
    report.add_smoke(p, "ftlads", SMOKE, "about 2 min")
    args = p.parse_args(argv)
    names = list(EXPERIMENTS) if args.experiment == "all" \
        else [args.experiment]
    if args.from_json:
        if len(names) != 1:
            p.error("--from-json: name the experiment of the JSON")
        with open(args.from_json) as f:
            return write(names[0], args.out, json.load(f))
    report.apply_smoke(args, p, "ftlads", SMOKE)
    report.require_plotting()
    print("command:", report.command_line(), flush=True)
    rc = 0
    for name in names:
        results = EXPERIMENTS[name][0](args, args.out)
        rc = max(rc, write(name, args.out, {
            "command": report.command_line(),
            "machine": report.machine_info(), "link": args.link,
            "results": results}))
    return rc


if __name__ == "__main__":
    sys.exit(main())
