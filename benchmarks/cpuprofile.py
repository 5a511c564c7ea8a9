"""Where dtn-migrate's CPU goes: ``perf`` samples of every engine and
agent during a benchmark, grouped by what the CPU was doing.

Runs a benchmark command (by default one pipelined 2 GiB migration of
``benchmarks.migration``) under ``perf record -a`` at ``--frequency``
Hz, notes the process id of every ``dtn-migrate-engine`` and
``dtn-migrate-agent`` as they appear, and of the two Glances' uwsgi
processes (``glance-a``, ``glance-b``: what the import and the export
cost the clouds beside them), and sorts each process's samples by the
function the CPU was in:

``write into page cache``
    ``copy_folio_from_iter_atomic``: the kernel copying written bytes
    into page-cache pages (see ``benchmarks.pagecache`` for why this is
    dear on this machine).
``socket copies``
    ``_copy_to_iter`` / ``_copy_from_iter``: bytes copied to or from
    socket buffers (HTTP, the DTN link).
``libcrypto``
    OpenSSL: sha512 and Poly1305.
``xxh3``, ``zstd``
    per-object checksums and compression.
``Python``
    the interpreter itself.
``other kernel``, ``other``
    the rest.

    .venv/bin/python -m benchmarks.cpuprofile \\
        --out doc/source/benchmarks/cpuprofile

Needs root and ``perf`` (Debian ``linux-perf``).
"""

import argparse
import collections
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

from benchmarks import report

DEFAULT = [sys.executable, "-m", "benchmarks.migration", "--size", "2G",
           "--repeat", "1", "--modes", "pipelined",
           "--out", "/tmp/bench-cpuprofile/migration"]
PROCESS = re.compile(r"bin/dtn-migrate-(engine|agent)\b.*?"
                     r"([^/\s]+)/(?:engine|agent)\.conf")
# The dev clouds' Glance: a uwsgi master and its workers, one ini each.
GLANCE = re.compile(r"\buwsgi\b.*?/(glance-[ab])/uwsgi\.ini\b")
KINDS = ("write into page cache", "socket copies", "libcrypto", "xxh3",
         "zstd", "Python", "other kernel", "other")


def kind(symbol, dso):
    """The group of one sample's leaf function."""
    if symbol.startswith("copy_folio_from_iter"):
        return "write into page cache"
    if symbol in ("_copy_to_iter", "_copy_from_iter"):
        return "socket copies"
    if dso.startswith("libcrypto"):
        return "libcrypto"
    if "xxhash" in dso:
        return "xxh3"
    if "zstd" in symbol.lower() or dso.startswith("backend_c"):
        return "zstd"
    if dso.startswith(("python3", "libpython3")):
        return "Python"
    if dso == "[kernel.kallsyms]":
        return "other kernel"
    return "other"


def _name(cmdline, glance=False):
    """'engine-a' and the like, from a process's command line; with
    ``glance``, 'glance-a' or 'glance-b' for the Glances' uwsgi.
    """
    m = PROCESS.search(cmdline)
    if m:
        # Without the run's random suffix: engine-a, dtn-b.
        return re.sub(r"-[0-9a-f]{4}$", "", m.group(2))
    m = GLANCE.search(cmdline) if glance else None
    return m.group(1) if m else None


def engines_and_agents(known=(), glance=False):
    """{pid (a string): name} of the engines and agents running now
    (with ``glance``, and the Glances' processes), but for the pids in
    ``known``.
    """
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or pid in known:
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(
                    "utf-8", "replace")
        except OSError:
            continue
        name = _name(cmd, glance)
        if name:
            found[pid] = name
    return found


class Watcher(threading.Thread):
    """Notes the engines, agents and Glances (pid -> name) while the run
    lasts.
    """

    def __init__(self):
        super().__init__(daemon=True)
        self.pids = {}
        self.done = threading.Event()

    def run(self):
        while not self.done.wait(0.5):
            self.pids.update(engines_and_agents(self.pids, glance=True))


def parse(lines, pids):
    """{process name: Counter(kind -> samples)} from ``perf script -F
    pid,ip,sym,dso`` output (the first frame of each sample is its leaf).
    """
    out = collections.defaultdict(collections.Counter)
    pid, leaf = None, True
    for line in lines:
        s = line.strip()
        if not s:
            pid = None
            continue
        if pid is None:
            pid, leaf = s.split()[0], True
            continue
        if not leaf:
            continue
        leaf = False
        name = pids.get(pid)
        if name is None:
            continue
        m = re.match(r"\S+ (.*) \((.*)\)$", s)
        symbol, dso = (m.group(1), os.path.basename(m.group(2))) if m \
            else (s, "?")
        out[name][kind(symbol, dso)] += 1
    return out


def emit(out, counts, frequency, command, returncode):
    headers = ["process", "CPU-s sampled"] + list(KINDS)
    rows = []
    for name in sorted(counts):
        c = counts[name]
        total = sum(c.values())
        rows.append([name, "%.1f" % (total / frequency)] +
                    [report.fmt_pct(c[k] / total if total else None)
                     for k in KINDS])
    text = [report.rst_table(headers, rows,
                             title="Samples of each process, by leaf "
                                   "function"),
            "", "Command (the benchmark's exit status: %d)::" % returncode,
            "", "    " + command, ""]
    os.makedirs(out, exist_ok=True)
    report.write_text(os.path.join(out, "table.rst"), "\n".join(text))
    report.write_json(os.path.join(out, "results.json"), {
        "command": command, "frequency": frequency,
        "returncode": returncode,
        "samples": {n: dict(c) for n, c in counts.items()},
        "machine": report.machine_info()})
    print(report.text_table(headers, rows))


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.cpuprofile",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--frequency", type=int, default=299,
                   help="samples per second per CPU (default 299)")
    p.add_argument("--out", default="doc/source/benchmarks/cpuprofile")
    p.add_argument("command", nargs=argparse.REMAINDER,
                   help="the benchmark to run (default: %s)"
                   % " ".join(DEFAULT[1:]))
    args = p.parse_args(argv)
    perf = shutil.which("perf")
    if perf is None:
        raise SystemExit("cannot run: no perf (apt-get install linux-perf)")
    if os.geteuid() != 0:
        raise SystemExit("cannot run: perf record -a needs root")
    command = args.command or DEFAULT
    if command and command[0] == "--":
        command = command[1:]
    work = tempfile.mkdtemp(prefix="dtnm-cpuprofile-")
    data = os.path.join(work, "perf.data")
    watcher = Watcher()
    watcher.start()
    rec = subprocess.Popen([perf, "record", "-q", "-a", "-g", "-F",
                            str(args.frequency), "-o", data],
                           stdout=subprocess.DEVNULL)
    try:
        rc = subprocess.call(command)
    finally:
        rec.send_signal(signal.SIGINT)
        rec.wait(timeout=120)
        watcher.done.set()
        watcher.join()
    script = subprocess.run([perf, "script", "-i", data,
                             "-F", "pid,ip,sym,dso"],
                            capture_output=True, text=True, check=True)
    counts = parse(script.stdout.splitlines(), watcher.pids)
    shutil.rmtree(work, ignore_errors=True)
    emit(args.out, counts, args.frequency,
         report.command_line() + (" (runs: %s)" % " ".join(command[1:])
                                  if not args.command else ""), rc)
    return rc


if __name__ == "__main__":
    sys.exit(main())
