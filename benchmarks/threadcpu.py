"""Where the engines' and agents' CPU goes, thread by thread.

Runs ``benchmarks.migration`` with the arguments after ``--``, reads the
CPU time of every thread of every ``dtn-migrate-engine`` and
``dtn-migrate-agent`` from ``/proc/PID/task/TID/stat`` every
``--interval`` seconds, and charges each repetition (from the
benchmark's ``repetition N of M`` line to its result line) with what
each thread used meanwhile.  ``--dump-after`` seconds into every
repetition, ``py-spy dump`` names each process's threads (Python thread
names are not the kernel's) and shows what they run; threads that ended
before the dump, such as the export's, are grouped as such.

Threads of one pool (``sink-io_0`` .. ``sink-io_3``) are summed under
one name.  Unnamed threads (``Thread-3``) take the name of the first
frame of their stack from dtn-migrate, oslo or TaskFlow.

    .venv/bin/python -m benchmarks.threadcpu --out /tmp/threadcpu -- \\
        --size 4G --repeat 2 --modes pipelined

Needs ``py-spy`` (``pip install py-spy``) and what the migration
benchmark needs.
"""

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(_HERE)
if _REPO not in sys.path:
    sys.path.insert(0, _REPO)

from benchmarks import cpuprofile  # noqa: E402
from benchmarks import report  # noqa: E402

BEGIN = re.compile(r"repetition (\d+) of \d+: (\S+)")
END = re.compile(r"\] (\S+) +[\d.]+ s ")
THREAD = re.compile(r'^Thread (?:0x[0-9A-Fa-f]+ )?\(?(\d+)\)? \(\w+\): '
                    r'"([^"]*)"$')
FRAME = re.compile(r"^\s+(\S+) \(([^:)]+)")
ENDED = "(ended before the dump)"


def processes():
    """{pid: 'agent-a' ...} of the running engines and agents, named as
    in the migration benchmark's CPU table.
    """
    return {int(pid): re.sub(r"^dtn-", "agent-", name)
            for pid, name in cpuprofile.engines_and_agents().items()}


def thread_times(procs):
    """{(process, tid): CPU seconds} now."""
    tick = os.sysconf("SC_CLK_TCK")
    times = {}
    for pid, name in procs.items():
        try:
            tids = os.listdir("/proc/%d/task" % pid)
        except OSError:
            continue
        for tid in tids:
            try:
                with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                    stat = f.read()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            times[(name, int(tid))] = (int(fields[11]) +
                                       int(fields[12])) / tick
    return times


def _pool_name(name):
    """'sink-io_2' -> 'sink-io'; 'Thread-2 (_runner)' -> '_runner'."""
    m = re.match(r"Thread-\d+ \((\w+)\)$", name)
    if m:
        return m.group(1)
    return re.sub(r"[-_]?[0-9a-f]{8}(_\d+)?$|[-_]\d+$", "", name)


def thread_names(dump):
    """{tid: group name} from a ``py-spy dump``."""
    names, tid, name, frames = {}, None, None, []

    def done():
        if tid is None:
            return
        if re.match(r"Thread-\d+$", name) or not name:
            where = next((f for f, path in frames if re.search(
                r"dtn_migrate|oslo_|taskflow|futurist", path)), None)
            names[tid] = where or name
        else:
            names[tid] = _pool_name(name)
    for line in dump.splitlines():
        m = THREAD.match(line)
        if m:
            done()
            tid, name, frames = int(m.group(1)), m.group(2), []
            continue
        m = FRAME.match(line)
        if m and tid is not None:
            frames.append((m.group(1), m.group(2)))
    done()
    return names


def py_spy_dump(pid):
    exe = shutil.which("py-spy") or os.path.join(
        os.path.dirname(sys.executable), "py-spy")
    try:
        return subprocess.run([exe, "dump", "--nonblocking", "--pid",
                               str(pid)],
                              capture_output=True, text=True,
                              timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


class Sampler:
    def __init__(self, dump_after):
        self.dump_after = dump_after
        self.now = {}           # (process, tid) -> CPU seconds
        self.names = {}         # (process, tid) -> group name
        # The repetition under way: its number, mode, the threads' CPU
        # seconds when it began, and when to name them (None: done).
        self.rep = None
        self.reps = []

    def tick(self, lines):
        procs = processes()
        self.now.update(thread_times(procs))
        for line in lines:
            m = BEGIN.search(line)
            if m:
                self.rep = {"number": int(m.group(1)), "mode": m.group(2),
                            "start": dict(self.now),
                            "name_at": time.monotonic() + self.dump_after}
            if END.search(line) and self.rep is not None:
                self.close_rep()
        if self.rep is not None and self.rep["name_at"] is not None and \
                time.monotonic() >= self.rep["name_at"]:
            for pid, proc in procs.items():
                for tid, name in thread_names(py_spy_dump(pid)).items():
                    self.names[(proc, tid)] = name
            self.rep["name_at"] = None

    def close_rep(self):
        start = self.rep["start"]
        used = collections.Counter()
        for key, seconds in self.now.items():
            spent = seconds - start.get(key, 0.0)
            if spent > 0:
                used[(key[0], self.names.get(key, ENDED))] += spent
        self.reps.append({"repetition": self.rep["number"],
                          "mode": self.rep["mode"],
                          "threads": [[p, n, round(s, 2)] for (p, n), s in
                                      sorted(used.items())]})
        self.rep = None


def rows(reps):
    """The table: a header, then per process its total and its threads
    (those that used 0.1 CPU-s or more in some repetition), then the
    total of all four.
    """
    cols = ["%d %s" % (r["repetition"], r["mode"]) for r in reps]
    cells = collections.OrderedDict()
    totals = collections.defaultdict(dict)
    for i, r in enumerate(reps):
        for proc, name, sec in r["threads"]:
            cells.setdefault((proc, name), {})[i] = sec
            totals[proc][i] = totals[proc].get(i, 0.0) + sec
    out = [["process", "thread"] + cols]
    for proc in sorted(totals):
        out.append(["**%s**" % proc, "all"] + [
            "**%.1f**" % totals[proc].get(i, 0.0) for i in range(len(reps))])
        group = sorted(((k, v) for k, v in cells.items() if k[0] == proc),
                       key=lambda kv: -max(kv[1].values()))
        for (_, name), vals in group:
            if max(vals.values()) >= 0.1:
                out.append([proc, name] + ["%.1f" % vals.get(i, 0.0)
                                           for i in range(len(reps))])
    out.append(["**all four**", "–"] + ["**%.1f**" % sum(
        totals[p].get(i, 0.0) for p in totals) for i in range(len(reps))])
    return out


def table(reps):
    """Markdown: CPU-s per process and thread group, by repetition."""
    table_rows = rows(reps)
    lines = ["| " + " | ".join(table_rows[0]) + " |",
             "| --- | --- | " + " | ".join(
                 "---:" for _ in table_rows[0][2:]) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in table_rows[1:]]
    return "\n".join(lines) + "\n"


def table_rst(reps):
    """The same as an RST list-table."""
    lines = [".. list-table:: CPU-seconds by thread, per repetition",
             "   :header-rows: 1", ""]
    for row in rows(reps):
        lines.append("   * - " + row[0])
        lines += ["     - " + cell for cell in row[1:]]
    return "\n".join(lines) + "\n"


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--interval", type=float, default=0.3)
    ap.add_argument("--dump-after", type=float, default=15.0,
                    help="seconds into each repetition to name threads")
    ap.add_argument("--from-json", metavar="JSON",
                    help="measure nothing: write the tables of an "
                    "earlier run's results.json to --out")
    ap.add_argument("migration_args", nargs=argparse.REMAINDER,
                    help="after --: the arguments of benchmarks.migration")
    args = ap.parse_args(argv)
    if args.migration_args[:1] == ["--"]:
        args.migration_args = args.migration_args[1:]
    return args


def write_tables(out, reps):
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(table(reps))
    with open(os.path.join(out, "table.rst"), "w") as f:
        f.write(table_rst(reps))


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    if args.from_json:
        with open(args.from_json) as f:
            write_tables(args.out, json.load(f)["repetitions"])
        return 0
    out_args = ["--out", os.path.join(args.out, "migration")]
    cmd = [sys.executable, "-m", "benchmarks.migration"] + \
        args.migration_args + out_args
    print("command:", report.command_line(), flush=True)
    sampler = Sampler(args.dump_after)
    log_path = os.path.join(args.out, "migration.log")
    with open(log_path, "w") as log:
        bench = subprocess.Popen(cmd, cwd=_REPO, stdout=log,
                                 stderr=subprocess.STDOUT)
    with open(log_path) as log:
        while True:
            lines = log.readlines()
            sys.stdout.writelines(lines)
            sampler.tick(lines)
            if bench.poll() is not None and not lines:
                break
            time.sleep(args.interval)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"command": report.command_line(),
                   "migration_command": cmd, "repetitions": sampler.reps},
                  f, indent=1)
    write_tables(args.out, sampler.reps)
    print(table(sampler.reps), flush=True)
    return bench.returncode


if __name__ == "__main__":
    sys.exit(main())
