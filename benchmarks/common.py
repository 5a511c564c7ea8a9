"""What the benchmarks share beside their reports: their error, and the
CPU and memory of processes.

Processes (from /proc; the benchmarks run as root, or as the owner of
what they measure)::

    common.tree_cpu(pid)        # CPU-s of a process and all below it
    common.group_cpu(pgid)      # CPU-s of the live members of a group
    common.peak_rss(pid)        # VmHWM in bytes; reset_peak_rss(pid)
"""

import os
import signal

MiB = 1 << 20
TICK = os.sysconf('SC_CLK_TCK')
#: Final states of a migration and of a transfer.
FINAL = ('complete', 'failed', 'cancelled')


class BenchError(RuntimeError):
    """A run of a benchmark went wrong (recorded, or the run stops)."""


# ---------------------------------------------------------------- processes

def proc_stats():
    """{pid: (ppid, pgid, own CPU ticks, ticks of its reaped children)}
    of every process now.
    """
    stats = {}
    for name in os.listdir('/proc'):
        if not name.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % name) as f:
                fields = f.read().rsplit(')', 1)[1].split()
        except OSError:
            continue
        # After "pid (comm)": state, ppid, pgrp, ..., utime, stime,
        # cutime, cstime are fields 2, 3, 12, 13, 14, 15 (1-based).
        stats[int(name)] = (int(fields[1]), int(fields[2]),
                            int(fields[11]) + int(fields[12]),
                            int(fields[13]) + int(fields[14]))
    return stats


def tree(pid, stats=None):
    """``pid`` and every live process below it (a set; empty if gone)."""
    stats = proc_stats() if stats is None else stats
    if pid not in stats:
        return set()
    found, grew = {pid}, True
    while grew:
        grew = False
        for p, (ppid, _, _, _) in stats.items():
            if ppid in found and p not in found:
                found.add(p)
                grew = True
    return found


def tree_cpu(pid, stats=None):
    """CPU seconds of ``pid``, every live process below it and the
    children they reaped (a GridFTP server forks one per session, a
    namespace wrapper execs the server below it); None if ``pid`` is gone.
    """
    stats = proc_stats() if stats is None else stats
    members = tree(pid, stats)
    if not members:
        return None
    return sum(stats[p][2] + stats[p][3] for p in members) / TICK


def group_cpu(pgid, stats=None):
    """CPU seconds (user + system) of the live processes of group
    ``pgid`` (a service and its workers).
    """
    stats = proc_stats() if stats is None else stats
    return sum(own for _, group, own, _ in stats.values()
               if group == pgid) / TICK


def peak_rss(pid):
    """Peak resident memory (VmHWM) of ``pid`` in bytes; None if gone."""
    try:
        with open('/proc/%d/status' % pid) as f:
            for line in f:
                if line.startswith('VmHWM:'):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def reset_peak_rss(pid):
    """Start ``pid``'s peak resident memory again from its current RSS
    (``5`` to /proc/PID/clear_refs, Linux 4.0); False if not allowed.
    """
    try:
        with open('/proc/%d/clear_refs' % pid, 'w') as f:
            f.write('5')
    except OSError:
        return False
    return True


def tail(path, n=40):
    """The last ``n`` lines of a log ('' if it cannot be read)."""
    try:
        with open(path, errors='replace') as f:
            return ''.join(f.readlines()[-n:])
    except OSError:
        return ''


def exit_on_signals(*signums):
    """SIGTERM and SIGHUP (or ``signums``) end the run as SystemExit
    (128 + signal), so that its ``finally`` blocks stop what it started.
    """
    def handler(signum, frame):
        raise SystemExit(128 + signum)
    for signum in signums or (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, handler)
