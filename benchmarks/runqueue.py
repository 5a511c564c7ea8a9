"""Where a co-located process's time goes: running, or waiting for a CPU.

On the 2-core testbed both clouds' Glances, the engines and the agents
share the cores.  This samples, every 0.5 s, each of those processes
(named as ``benchmarks.cpuprofile`` names them) for its CPU time
(``/proc/PID/stat``, ended threads included) and the run-queue wait of
its threads, summed (``/proc/PID/task/TID/schedstat``: time runnable
but waiting for a CPU), and reports what each used between two times::

    .venv/bin/python -m benchmarks.runqueue sample OUT.json SECONDS
    .venv/bin/python -m benchmarks.runqueue window OUT.json START END

(START and END in seconds since the epoch, for example read from a kept
migration's logs).  A process some of whose threads ended in between
has no wait figure ("-"): an ended thread's schedstat is gone.
"""

import argparse
import json
import os
import time

from benchmarks import cpuprofile

TICK = os.sysconf("SC_CLK_TCK")


def snapshot(pids):
    """{pid: [name, CPU-s, run-queue wait s, thread ids]} of ``pids``
    ({pid: name}) still running.
    """
    found = {}
    for pid, name in pids.items():
        try:
            with open("/proc/%s/stat" % pid) as f:
                stat = f.read().rsplit(")", 1)[1].split()
            cpu = (int(stat[11]) + int(stat[12])) / TICK
            wait, tids = 0, os.listdir("/proc/%s/task" % pid)
            for tid in tids:
                with open("/proc/%s/task/%s/schedstat" % (pid, tid)) as f:
                    wait += int(f.read().split()[1])
        except OSError:         # gone meanwhile
            continue
        found[pid] = [name, cpu, wait / 1e9, tids]
    return found


def sample(out, seconds, interval=0.5):
    samples, pids = [], {}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pids.update(cpuprofile.engines_and_agents(pids, glance=True))
        samples.append((time.time(), snapshot(pids)))
        time.sleep(interval)
    with open(out, "w") as f:
        json.dump(samples, f)


def window(samples, start, end):
    """(seconds between the samples nearest ``start`` and ``end``, rows
    of (CPU-s, wait s or None, pid, name)), busiest first.
    """
    first = min(samples, key=lambda s: abs(s[0] - start))
    last = min(samples, key=lambda s: abs(s[0] - end))
    rows = []
    for pid, (name, cpu, wait, tids) in last[1].items():
        _, cpu0, wait0, tids0 = first[1].get(pid) or (name, 0, 0, [])
        waited = wait - wait0 if set(tids0) <= set(tids) else None
        if cpu - cpu0 > 0.2 or (waited or 0) > 0.2:
            rows.append((cpu - cpu0, waited, pid, name))
    return last[0] - first[0], sorted(rows, reverse=True)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.runqueue",
                                description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    s = sub.add_parser("sample")
    s.add_argument("out")
    s.add_argument("seconds", type=float)
    w = sub.add_parser("window")
    w.add_argument("samples")
    w.add_argument("start", type=float)
    w.add_argument("end", type=float)
    args = p.parse_args(argv)
    if args.what == "sample":
        sample(args.out, args.seconds)
        return
    with open(args.samples) as f:
        seconds, rows = window(json.load(f), args.start, args.end)
    print("window %.1f s (CPU-s and run-queue wait in s, summed over "
          "threads)" % seconds)
    for cpu, waited, pid, name in rows:
        print("%7.1f cpu %6s runq  %-8s %s" % (
            cpu, "-" if waited is None else "%.1f" % waited, pid, name))


if __name__ == "__main__":
    main()
