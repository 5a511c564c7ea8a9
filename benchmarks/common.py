"""What the benchmarks share beside their reports: their error, the CPU
and memory of processes, and servers that bind a port of their own.

Processes (from /proc; the benchmarks run as root, or as the owner of
what they measure)::

    common.tree_cpu(pid)        # CPU-s of a process and all below it
    common.group_cpu(pgid)      # CPU-s of the live members of a group
    common.peak_rss(pid)        # VmHWM in bytes; reset_peak_rss(pid)

Servers: a dtn-migrate server is told to listen on port 0 and says
which port it took (:func:`listening_port`).  A third-party one
(iperf3, GridFTP, the rsync daemon, xrootd) cannot, so
:func:`on_own_port` starts it on a port and, when the port was taken
meanwhile ("Address already in use"), again on another;
:func:`wait_listening` tells a server that listens from one that lost
the port to another process (whose socket accepts too)::

    def start(port):
        proc = popen([..., '--port', str(port)])
        common.wait_listening(proc, port, log_path)
        return proc
    proc, port = common.on_own_port(start, first=5201)
"""

import os
import random
import signal
import time

MiB = 1 << 20
TICK = os.sysconf('SC_CLK_TCK')
#: Candidates of :func:`on_own_port`: below Linux's ephemeral range
#: (32768-60999), where no outgoing connection takes one.
PORTS = (20000, 32000)
#: Final states of a migration and of a transfer.
FINAL = ('complete', 'failed', 'cancelled')
#: How a server says that its port was taken (errno 98), as iperf3,
#: globus-gridftp-server, rsync, xrootd and Python print it.
IN_USE = ('address already in use', 'eaddrinuse', 'errno 98')


class BenchError(RuntimeError):
    """A run of a benchmark went wrong (recorded, or the run stops)."""


class ServerError(BenchError):
    """A server did not start (it exited, or never listened)."""


class AddressInUse(ServerError):
    """A server could not bind its port: another process holds it."""


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


# ---------------------------------------------------------------- ports

def listening_port(line):
    """The port of a dtn-migrate server's ``listening on HOST:PORT``
    line (it was told port 0), or None for another line.
    """
    words = (line or '').split()
    if 'listening' not in words or ':' not in words[-1]:
        return None
    try:
        return int(words[-1].rsplit(':', 1)[1])
    except ValueError:
        return None


def _listen_inodes(pid, port):
    """Inodes of the TCP sockets listening on ``port`` in the network
    namespace of ``pid``.
    """
    found = set()
    for name in ('tcp', 'tcp6'):
        try:
            with open('/proc/%d/net/%s' % (pid, name)) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    # local address HEX:PORT, state 0A (LISTEN), inode.
                    if parts[3] == '0A' and \
                            int(parts[1].rsplit(':', 1)[1], 16) == port:
                        found.add(parts[9])
        except (OSError, StopIteration):
            continue
    return found


def listens(pid, port):
    """True when ``pid`` or a process below it holds a socket listening
    on ``port`` (in its own network namespace); None when its file
    descriptors cannot be read (another user's process).
    """
    inodes = _listen_inodes(pid, port)
    if not inodes:
        return False
    unreadable = False
    for p in tree(pid):
        try:
            fds = os.listdir('/proc/%d/fd' % p)
        except OSError:
            unreadable = True
            continue
        for fd in fds:
            try:
                target = os.readlink('/proc/%d/fd/%s' % (p, fd))
            except OSError:
                continue
            if target.startswith('socket:[') and target[8:-1] in inodes:
                return True
    return None if unreadable else False


def said_in_use(text):
    """True when a server's output says its port was taken."""
    text = (text or '').lower()
    return any(word in text for word in IN_USE)


def wait_listening(proc, port, log_path=None, timeout=15.0, name='server'):
    """Wait until ``proc`` (a Popen) itself listens on ``port``.

    Raises :class:`AddressInUse` when its log (``log_path``, or a list
    of them) says the port was taken, also while another process's
    socket accepts on it (the caller then stops the server);
    :class:`ServerError` when it exits or does not listen within
    ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    logs = [log_path] if isinstance(log_path, str) else list(log_path or ())
    while True:
        log = ''.join(tail(p) for p in logs)
        if said_in_use(log):
            raise AddressInUse('%s: port %d already in use:\n%s'
                               % (name, port, log))
        if proc.poll() is not None:
            raise ServerError('%s exited (rc=%s):\n%s'
                              % (name, proc.returncode, log))
        ours = listens(proc.pid, port)
        if ours or (ours is None and _listen_inodes(proc.pid, port)):
            return
        if time.monotonic() > deadline:
            raise ServerError('%s does not listen on port %d after %.0f s:'
                              '\n%s' % (name, port, timeout, log))
        time.sleep(0.05)


def on_own_port(start, first=None, attempts=8, rng=random):
    """``(start(port), port)``: ``start`` runs a server on ``port`` and
    returns once it listens, or raises :class:`AddressInUse`; it is
    called again with another port as long as it does (at most
    ``attempts`` times).  ``first``: the port to try first (a tool's
    usual port inside a lab's namespace), else a random one of
    :data:`PORTS`.
    """
    port = first or rng.randrange(*PORTS)
    for attempt in range(attempts):
        try:
            return start(port), port
        except AddressInUse:
            if attempt == attempts - 1:
                raise
            port = rng.randrange(*PORTS)
