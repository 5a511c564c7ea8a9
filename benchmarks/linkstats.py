"""Bytes on the emulated DTN link, and CPU seconds of process trees.

The lab's veth pair (``tests/functional/netns.py``) is the only path
between namespaces ``a`` and ``b``, so its interface counters are the
bytes a transfer put on the "WAN": every frame, TCP/IP headers and
control messages included.  ``counters(lab)`` reads them with
``ip -n NS -s -j link show dev DEV`` (no /sys of the namespace needed)::

    before = linkstats.counters(lab)
    ... transfer ...
    moved = linkstats.delta(before, linkstats.counters(lab))
    moved['a_to_b'], moved['b_to_a'], moved['total']   # bytes

CPU: :func:`tree_cpu` sums utime+stime (and the reaped children's
cutime+cstime) of a process and every live process below it, from
/proc; :func:`group_cpu` does the same for a process group.
"""

import json
import os
import subprocess


def _dev_stats(ns, dev):
    out = subprocess.run(['ip', '-n', ns, '-s', '-j', 'link', 'show', 'dev',
                          dev], capture_output=True, text=True, check=True,
                         timeout=30).stdout
    [link] = json.loads(out)
    st = link.get('stats64') or link['stats']
    return {'tx_bytes': st['tx']['bytes'], 'rx_bytes': st['rx']['bytes'],
            'tx_packets': st['tx']['packets'],
            'rx_packets': st['rx']['packets']}


def counters(lab):
    """Interface counters of both veth ends of ``lab``; None without a
    lab (loopback has no link to count).
    """
    if lab is None:
        return None
    return {'a': _dev_stats(lab.ns('a'), lab.dev('a')),
            'b': _dev_stats(lab.ns('b'), lab.dev('b'))}


def delta(before, after):
    """Bytes and packets sent each way between two :func:`counters`."""
    if before is None or after is None:
        return None
    a_tx = after['a']['tx_bytes'] - before['a']['tx_bytes']
    b_tx = after['b']['tx_bytes'] - before['b']['tx_bytes']
    return {'a_to_b': a_tx, 'b_to_a': b_tx, 'total': a_tx + b_tx,
            'a_to_b_packets': (after['a']['tx_packets']
                               - before['a']['tx_packets']),
            'b_to_a_packets': (after['b']['tx_packets']
                               - before['b']['tx_packets'])}


def proc_stats():
    """{pid: (ppid, pgid, CPU ticks of it and of its reaped children)}."""
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
                            sum(int(x) for x in fields[11:15]))
    return stats


def tree_cpu(pid, stats=None):
    """CPU seconds of ``pid``, every live process below it and the
    children they reaped; None if ``pid`` is gone.
    """
    stats = proc_stats() if stats is None else stats
    if pid not in stats:
        return None
    tree = {pid}
    grew = True
    while grew:
        grew = False
        for p, (ppid, _, _) in stats.items():
            if ppid in tree and p not in tree:
                tree.add(p)
                grew = True
    return sum(stats[p][2] for p in tree) / os.sysconf('SC_CLK_TCK')


def allocated_bytes(paths):
    """Disk bytes allocated to the files (st_blocks), summed."""
    total = 0
    for p in paths:
        try:
            total += os.stat(p).st_blocks * 512
        except FileNotFoundError:
            pass
    return total
