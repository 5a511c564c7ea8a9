"""Bytes on the emulated DTN link, and the disk space of copies.

The lab's veth pair (``benchmarks._lab.netns``) is the only path
between namespaces ``a`` and ``b``, so its interface counters are the
bytes a transfer put on the "WAN": every frame, TCP/IP headers and
control messages included.  ``counters(lab)`` reads them with
``ip -n NS -s -j link show dev DEV`` (no /sys of the namespace needed)::

    before = linkstats.counters(lab)
    ... transfer ...
    moved = linkstats.delta(before, linkstats.counters(lab))
    moved['a_to_b'], moved['b_to_a'], moved['total']   # bytes

:func:`allocated_bytes` is the disk space of files (a sparse source
should stay sparse at the sink).
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


def allocated_bytes(paths):
    """Disk bytes allocated to the files (st_blocks), summed."""
    total = 0
    for p in paths:
        try:
            total += os.stat(p).st_blocks * 512
        except FileNotFoundError:
            pass
    return total
