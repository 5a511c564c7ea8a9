"""Where a co-located process's time goes: running, or waiting for a CPU.

    runqueue.py sample OUT.json SECONDS
        every 0.5 s, for each Glance, dtn-migrate and RabbitMQ process:
        its CPU time (/proc/PID/stat, ended threads included) and the
        run-queue wait of its threads, summed (/proc/PID/task/TID/
        schedstat: ns runnable but waiting for a CPU)
    runqueue.py window OUT.json START END
        what each process used between two epoch times; a process some
        of whose threads ended in between has no wait ("-"): an ended
        thread's schedstat is gone
"""

import json
import os
import re
import sys
import time

WATCHED = re.compile(r"glance|dtn-migrate|dtn_migrate|beam|keystone|uwsgi")
TICK = os.sysconf("SC_CLK_TCK")
ROLE = re.compile(r"/(dtn-[ab]|engine-[ab]|glance-[ab])[-/]")


def snapshot():
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            if not WATCHED.search(cmd) or "runqueue.py" in cmd:
                continue
            with open("/proc/%s/stat" % pid) as f:
                stat = f.read().rsplit(")", 1)[1].split()
            cpu = (int(stat[11]) + int(stat[12])) / TICK
            wait, tids = 0, os.listdir("/proc/%s/task" % pid)
            for tid in tids:
                with open("/proc/%s/task/%s/schedstat" % (pid, tid)) as f:
                    wait += int(f.read().split()[1])
        except OSError:         # gone meanwhile
            continue
        found[pid] = (cmd, cpu, wait / 1e9, tids)
    return found


def sample(out, seconds):
    samples = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        samples.append((time.time(), snapshot()))
        time.sleep(0.5)
    with open(out, "w") as f:
        json.dump(samples, f)


def label(cmd):
    m = ROLE.search(cmd)
    if m:
        return m.group(1).replace("dtn-", "agent-")
    return "rabbitmq" if "beam" in cmd else cmd.split()[0]


def window(path, start, end):
    with open(path) as f:
        samples = json.load(f)
    first = min(samples, key=lambda s: abs(s[0] - start))
    last = min(samples, key=lambda s: abs(s[0] - end))
    print("window %.1f s (CPU-s and run-queue wait in s, summed over "
          "threads)" % (last[0] - first[0]))
    rows = []
    for pid, (cmd, cpu, wait, tids) in last[1].items():
        cpu0, wait0, tids0 = (first[1].get(pid) or (cmd, 0, 0, []))[1:]
        used = cpu - cpu0
        waited = wait - wait0 if set(tids0) <= set(tids) else None
        if used > 0.2 or (waited or 0) > 0.2:
            rows.append((used, pid, label(cmd), waited))
    for used, pid, name, waited in sorted(rows, reverse=True):
        print("%7.1f cpu %6s runq  %-8s %s" % (
            used, "-" if waited is None else "%.1f" % waited, pid, name))


if __name__ == "__main__":
    if sys.argv[1] == "sample":
        sample(sys.argv[2], float(sys.argv[3]))
    else:
        window(sys.argv[2], float(sys.argv[3]), float(sys.argv[4]))
