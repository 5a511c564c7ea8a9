"""Network-namespace fixtures for functional tests and benchmarks.

Two Linux network namespaces joined by a veth pair stand in for two Data
Transfer Nodes.  Everything here shells out to ``ip``/``tc``/``socat`` and
needs root; :func:`available` says whether it can work on this machine so
that tests can ``self.skipTest(reason)``.

Typical use::

    from devcloud import netns

    ok, why = netns.available()
    if not ok:
        raise unittest.SkipTest(why)
    with netns.Lab(rate='1gbit') as lab:
        lab.forward('a', 5672)                 # broker reachable in ns a
        srv = lab.popen('b', ['my-server', '--listen', lab.addr_b + ':9000'])
        lab.wait_port('a', lab.addr_b, 9000)
        lab.run('a', ['my-client', lab.addr_b + ':9000'])
        lab.link_down(); ...; lab.link_up()

Namespaces are named ``dtnm-<pid>-<n>-a`` / ``-b``; the veth ends are created
directly inside them (``veth-a`` in ns a, ``veth-b`` in ns b), so nothing is
left in the root namespace.  :meth:`Lab.close` (also run by ``__exit__``)
kills every process still inside the namespaces, the socat forwarders, and
deletes the namespaces, even after errors.  :func:`cleanup_stale` removes
leftovers of crashed runs (namespaces whose creating pid is gone).

Rate limiting uses ``tc qdisc add dev <veth> root tbf rate R burst B latency
20ms`` on both ends (there is no netem on these kernels: no delay, no loss).
The burst (bucket size) defaults to 10 ms worth of line rate, but never less
than 64 KiB + MTU: a tbf bucket must hold at least one (GSO) packet and at
least rate/HZ bytes, or tbf cannot reach the configured rate.  At 1gbit this
is 1.25 MB (close to the ``burst 1mb`` used in earlier trials), at 10gbit
12.5 MB.  The bucket lets at most that many bytes through above the rate at
the start of a transfer, i.e. < 0.2 % of a 1 GiB transfer.

Run ``python -m devcloud.netns`` for a self-check (needs root).
"""

import contextlib
import itertools
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

PREFIX = 'dtnm-'
_NAME_RE = re.compile(r'^dtnm-(\d+)-(\d+)-([ab])$')
_counter = itertools.count()
_counter_lock = threading.Lock()
_available = None

DEFAULT_ADDR_A = '192.0.2.1'
DEFAULT_ADDR_B = '192.0.2.2'
DEFAULT_PREFIXLEN = 24
TBF_LATENCY = '20ms'


class LabError(RuntimeError):
    pass


# ---------------------------------------------------------------- helpers

def _sh(argv, check=True, timeout=30, **kw):
    """Run a root-namespace command, capture output, raise LabError."""
    kw.setdefault('stdout', subprocess.PIPE)
    kw.setdefault('stderr', subprocess.PIPE)
    proc = subprocess.run(argv, timeout=timeout, text=True, **kw)
    if check and proc.returncode != 0:
        raise LabError('%s failed (rc=%d): %s' % (
            shlex.join(argv), proc.returncode,
            (proc.stderr or proc.stdout or '').strip()))
    return proc


def parse_rate(rate):
    """'1gbit' / '10gbit' / '500mbit' / '1e9' / 1000000000 -> bits per second.

    Follows tc's units: 'bit'/'kbit'/'mbit'/'gbit' (powers of 1000), and
    'bps'/'kbps'/'mbps'/'gbps' meaning BYTES per second (tc semantics).
    """
    if isinstance(rate, (int, float)):
        return int(rate)
    m = re.fullmatch(r'\s*([0-9.]+(?:e[0-9]+)?)\s*([kmgt]?)(bit|bps)?\s*',
                     str(rate).lower())
    if not m:
        raise ValueError('bad rate %r' % (rate,))
    num = float(m.group(1))
    mult = {'': 1, 'k': 1e3, 'm': 1e6, 'g': 1e9, 't': 1e12}[m.group(2)]
    unit = m.group(3) or 'bit'
    bits = num * mult * (8 if unit == 'bps' else 1)
    return int(bits)


def tbf_burst(rate, mtu=1500):
    """Bucket size in bytes for a tbf at ``rate``: 10 ms of line rate,
    at least 64 KiB + MTU (one GSO super-packet).
    """
    bps = parse_rate(rate)
    return max(int(bps / 8 * 0.010), 65536 + mtu)


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def list_namespaces():
    """Names of all network namespaces (``ip netns list``)."""
    proc = _sh(['ip', 'netns', 'list'], check=False)
    return [line.split()[0] for line in proc.stdout.splitlines()
            if line.strip()]


def _ns_pids(ns):
    proc = _sh(['ip', 'netns', 'pids', ns], check=False)
    return [int(p) for p in proc.stdout.split() if p.isdigit()]


def _kill_pids(pids, timeout=3.0):
    pids = [p for p in pids if p != os.getpid()]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pids = [p for p in pids if _pid_alive(p) and not _is_zombie(p)]
            if not pids:
                return
            time.sleep(0.05)


def _is_zombie(pid):
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().rsplit(')', 1)[1].split()[0] == 'Z'
    except OSError:
        return True


def _delete_namespace(ns):
    _kill_pids(_ns_pids(ns))
    for _ in range(20):
        proc = _sh(['ip', 'netns', 'delete', ns], check=False)
        if proc.returncode == 0 or ns not in list_namespaces():
            return
        time.sleep(0.1)
    raise LabError('could not delete namespace %s: %s' % (ns, proc.stderr))


def cleanup_stale(force=False):
    """Remove ``dtnm-*`` namespaces (and forwarder sockets) left by crashed
    runs: those whose creating pid no longer exists.  With ``force=True``
    remove every ``dtnm-*`` namespace, including ones of live processes.
    Returns the list of namespaces removed.
    """
    removed = []
    for ns in list_namespaces():
        m = _NAME_RE.match(ns)
        if not ns.startswith(PREFIX):
            continue
        if not force and m and _pid_alive(int(m.group(1))):
            continue
        _delete_namespace(ns)
        removed.append(ns)
    tmp = tempfile.gettempdir()
    for name in os.listdir(tmp):
        m = re.match(r'^dtnm-(\d+)-\d+-fwd', name)
        if m and (force or not _pid_alive(int(m.group(1)))):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(tmp, name))
    return removed


def available():
    """(True, '') if namespaces + veth + tbf can be used here, else
    (False, reason).  The result is cached.
    """
    global _available
    if _available is not None:
        return _available
    _available = _probe()
    return _available


def _probe():
    if sys.platform != 'linux':
        return False, 'network namespaces need Linux'
    if os.geteuid() != 0:
        return False, 'network namespaces need root'
    for tool in ('ip', 'tc'):
        if shutil.which(tool) is None:
            return False, '%s (iproute2) is not installed' % tool
    try:
        with Lab(rate='1gbit', _probe=True):
            pass
    except Exception as exc:  # noqa: BLE001 - any failure means "no"
        return False, 'cannot create namespaces/veth/tbf: %s' % exc
    return True, ''


def wait_port(host, port, timeout=10.0, interval=0.05):
    """Wait until host:port accepts TCP connections in THIS namespace."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=1):
                return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(interval)


def free_port(host='127.0.0.1'):
    """A TCP port free right now on host (in this namespace)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def hosts_argv(argv, hosts, tmpdir=None):
    """Wrap ``argv`` so that it runs with a private /etc/hosts.

    ``hosts`` maps hostname -> address (or is a ready list of lines).  The
    command runs in a new private mount namespace (``unshare -m``) in which a
    temporary hosts file is bind-mounted over /etc/hosts; nothing outside
    sees it.  Returns (wrapped_argv, hosts_file_path); delete the file after
    the process ends (the lab does this for you).
    """
    lines = ['127.0.0.1\tlocalhost', '::1\tlocalhost ip6-localhost']
    if isinstance(hosts, dict):
        lines += ['%s\t%s' % (addr, name) for name, addr in hosts.items()]
    else:
        lines += list(hosts)
    fd, path = tempfile.mkstemp(prefix='dtnm-hosts-', suffix='.txt',
                                dir=tmpdir)
    with os.fdopen(fd, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    os.chmod(path, 0o644)
    wrapped = ['unshare', '-m', '--propagation', 'private', 'sh', '-c',
               'mount --bind "$0" /etc/hosts && exec "$@"', path] + list(argv)
    return wrapped, path


# ---------------------------------------------------------------- the lab

class Lab:
    """Two namespaces ``a`` and ``b`` joined by a veth pair.

    :param rate: None (unlimited) or a tc rate such as '1gbit', '10gbit'.
    :param mtu: veth MTU (1500 default; 9000 for jumbo frames).
    :param addr_a, addr_b, prefixlen: IPv4 addresses of the two ends.
    :param burst: tbf bucket in bytes (default :func:`tbf_burst`).

    ``ns`` arguments of the methods accept 'a', 'b', a full namespace name,
    or None for the root namespace.
    """

    def __init__(self, rate=None, mtu=1500, addr_a=DEFAULT_ADDR_A,
                 addr_b=DEFAULT_ADDR_B, prefixlen=DEFAULT_PREFIXLEN,
                 burst=None, latency=TBF_LATENCY, _probe=False):
        with _counter_lock:
            n = next(_counter)
        base = '%s%d-%d' % (PREFIX, os.getpid(), n)
        self.name = base
        self.ns_a = base + '-a'
        self.ns_b = base + '-b'
        self.dev_a = 'veth-a'
        self.dev_b = 'veth-b'
        self.addr_a = addr_a
        self.addr_b = addr_b
        self.prefixlen = prefixlen
        self.mtu = int(mtu)
        self.rate = rate
        self.burst = burst
        self.latency = latency
        self._probe = _probe
        self._procs = []
        self._tmpfiles = []
        self._forwards = []
        self._fwd_counter = itertools.count()
        self._started = False
        self._closed = False

    # -- lifecycle
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def start(self):
        if self._started:
            return self
        self._started = True
        try:
            _sh(['ip', 'netns', 'add', self.ns_a])
            _sh(['ip', 'netns', 'add', self.ns_b])
            _sh(['ip', 'link', 'add', self.dev_a, 'netns', self.ns_a,
                 'type', 'veth', 'peer', 'name', self.dev_b,
                 'netns', self.ns_b])
            for ns, dev, addr in ((self.ns_a, self.dev_a, self.addr_a),
                                  (self.ns_b, self.dev_b, self.addr_b)):
                _sh(['ip', '-n', ns, 'link', 'set', 'lo', 'up'])
                _sh(['ip', '-n', ns, 'link', 'set', dev, 'mtu',
                     str(self.mtu)])
                _sh(['ip', '-n', ns, 'addr', 'add',
                     '%s/%d' % (addr, self.prefixlen), 'dev', dev])
                _sh(['ip', '-n', ns, 'link', 'set', dev, 'up'])
            if self.rate:
                self.set_rate(self.rate)
        except BaseException:
            self.close()
            raise
        return self

    def close(self):
        """Kill everything we started or that runs inside our namespaces,
        remove forwarders, temp files and the namespaces.  Idempotent.
        """
        if self._closed:
            return
        self._closed = True
        for proc in reversed(self._procs):
            _terminate(proc)
        for fwd in self._forwards:
            for proc in fwd['procs']:
                _terminate(proc)
            with contextlib.suppress(OSError):
                os.unlink(fwd['sock'])
        errors = []
        for ns in (self.ns_a, self.ns_b):
            if ns in list_namespaces():
                try:
                    _delete_namespace(ns)
                except LabError as exc:
                    errors.append(str(exc))
        for path in self._tmpfiles:
            with contextlib.suppress(OSError):
                os.unlink(path)
        if errors:
            raise LabError('; '.join(errors))

    # -- addressing
    def ns(self, ns):
        """Resolve 'a'/'b'/full name/None to a namespace name (or None)."""
        if ns in (None, '', 'root'):
            return None
        if ns in ('a', 'A'):
            return self.ns_a
        if ns in ('b', 'B'):
            return self.ns_b
        if ns in (self.ns_a, self.ns_b):
            return ns
        raise ValueError('unknown namespace %r' % (ns,))

    def addr(self, ns):
        """IPv4 address of namespace 'a' or 'b'."""
        name = self.ns(ns)
        if name == self.ns_a:
            return self.addr_a
        if name == self.ns_b:
            return self.addr_b
        return '127.0.0.1'

    def dev(self, ns):
        return self.dev_a if self.ns(ns) == self.ns_a else self.dev_b

    def peer(self, ns):
        """The other side: peer('a') == 'b'."""
        return 'b' if self.ns(ns) == self.ns_a else 'a'

    # -- running things
    def argv(self, ns, argv, hosts=None):
        """The argv that runs ``argv`` inside ``ns`` (and with a private
        /etc/hosts when ``hosts`` is given, see :func:`hosts_argv`).
        """
        argv = [str(a) for a in argv]
        if hosts:
            argv, path = hosts_argv(argv, hosts)
            self._tmpfiles.append(path)
        name = self.ns(ns)
        if name is None:
            return argv
        return ['ip', 'netns', 'exec', name] + argv

    def run(self, ns, argv, hosts=None, check=True, timeout=None, **kw):
        """subprocess.run inside ``ns``; text mode and captured output by
        default.  Raises CalledProcessError when check and rc != 0.
        """
        kw.setdefault('stdout', subprocess.PIPE)
        kw.setdefault('stderr', subprocess.PIPE)
        kw.setdefault('text', True)
        return subprocess.run(self.argv(ns, argv, hosts), check=check,
                              timeout=timeout, **kw)

    def popen(self, ns, argv, hosts=None, **kw):
        """subprocess.Popen inside ``ns`` in its own session (process group),
        tracked so that :meth:`close` kills it.  ``ip netns exec`` and
        ``unshare`` exec the command, so ``proc.pid`` is the command.
        """
        kw.setdefault('start_new_session', True)
        proc = subprocess.Popen(self.argv(ns, argv, hosts), **kw)
        self._procs.append(proc)
        return proc

    def stop(self, proc, timeout=5.0):
        """Terminate a process started with :meth:`popen` (whole group)."""
        _terminate(proc, timeout)
        with contextlib.suppress(ValueError):
            self._procs.remove(proc)

    def wait_port(self, ns, host, port, timeout=10.0):
        """Wait until host:port accepts TCP connections from inside ns."""
        deadline = time.monotonic() + timeout
        code = ('import socket,sys\n'
                'socket.create_connection((sys.argv[1], int(sys.argv[2])),'
                ' timeout=1).close()\n')
        while True:
            proc = self.run(ns, [sys.executable, '-c', code, host, str(port)],
                            check=False, timeout=15)
            if proc.returncode == 0:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)

    def reachable(self, ns, host, port=9, timeout=1.0):
        """True if ``host`` answers from inside ``ns`` at the IP level: a TCP
        connect to ``port`` either succeeds or is refused (RST) within
        ``timeout``.  (No ping binary is needed.)
        """
        code = ('import socket,sys\n'
                'try:\n'
                '    socket.create_connection((sys.argv[1], int(sys.argv[2])),'
                ' timeout=float(sys.argv[3])).close()\n'
                'except ConnectionRefusedError:\n'
                '    pass\n'
                'except OSError:\n'
                '    sys.exit(1)\n')
        proc = self.run(ns, [sys.executable, '-c', code, host, str(port),
                             str(timeout)], check=False, timeout=timeout + 10)
        return proc.returncode == 0

    # -- link control
    def link_down(self):
        for ns, dev in ((self.ns_a, self.dev_a), (self.ns_b, self.dev_b)):
            _sh(['ip', '-n', ns, 'link', 'set', dev, 'down'])

    def link_up(self):
        for ns, dev in ((self.ns_a, self.dev_a), (self.ns_b, self.dev_b)):
            _sh(['ip', '-n', ns, 'link', 'set', dev, 'up'])
        # veth carrier comes back immediately; wait for the kernel to agree
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            out = _sh(['ip', '-n', self.ns_a, '-o', 'link', 'show',
                       self.dev_a]).stdout
            if 'LOWER_UP' in out and 'state UP' in out:
                break
            time.sleep(0.02)

    def set_rate(self, rate, burst=None):
        """Apply (or with rate=None remove) a tbf rate limit on both ends."""
        for ns, dev in ((self.ns_a, self.dev_a), (self.ns_b, self.dev_b)):
            _sh(['tc', '-n', ns, 'qdisc', 'del', 'dev', dev, 'root'],
                check=False)
            if rate:
                b = burst or self.burst or tbf_burst(rate, self.mtu)
                _sh(['tc', '-n', ns, 'qdisc', 'add', 'dev', dev, 'root',
                     'tbf', 'rate', str(rate), 'burst', str(int(b)),
                     'latency', self.latency])
        self.rate = rate

    def qdisc(self, ns):
        """``tc qdisc show`` of the veth in ns (for diagnostics)."""
        return _sh(['tc', '-n', self.ns(ns), '-s', 'qdisc', 'show', 'dev',
                    self.dev(ns)]).stdout

    # -- bridge to services of the root namespace
    def forward(self, ns, port, target_host='127.0.0.1', target_port=None,
                listen_host='127.0.0.1', timeout=10.0, check=True):
        """Make ``listen_host:port`` inside ``ns`` reach
        ``target_host:target_port`` of the ROOT namespace (e.g. RabbitMQ on
        127.0.0.1:5672), through socat and a UNIX socket::

            root: socat UNIX-LISTEN:/tmp/dtnm-..-fwd-N.sock,fork TCP:host:port
            ns:   socat TCP-LISTEN:port,bind=127.0.0.1,fork,reuseaddr \\
                        UNIX-CONNECT:/tmp/dtnm-..-fwd-N.sock

        Returns the socket path.  With ``check`` (default) it waits until
        the forwarder accepts a TCP connection inside ``ns`` (a connection is
        made end to end, so the target must be listening).
        """
        if shutil.which('socat') is None:
            raise LabError('socat is not installed (apt-get install socat)')
        target_port = int(target_port or port)
        name = self.ns(ns)
        sock = os.path.join(tempfile.gettempdir(), '%s-fwd%d.sock' % (
            self.name, next(self._fwd_counter)))
        with contextlib.suppress(OSError):
            os.unlink(sock)
        root = subprocess.Popen(
            ['socat', 'UNIX-LISTEN:%s,fork,unlink-early,mode=600' % sock,
             'TCP:%s:%d' % (target_host, target_port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        fwd = {'sock': sock, 'procs': [root], 'ns': name, 'port': port}
        self._forwards.append(fwd)
        deadline = time.monotonic() + timeout
        while not os.path.exists(sock):
            if root.poll() is not None or time.monotonic() > deadline:
                raise LabError('socat UNIX-LISTEN %s did not start' % sock)
            time.sleep(0.02)
        inner = subprocess.Popen(
            self.argv(name, ['socat',
                             'TCP-LISTEN:%d,bind=%s,fork,reuseaddr' % (
                                 port, listen_host),
                             'UNIX-CONNECT:%s' % sock]),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        fwd['procs'].append(inner)
        if check and not self.wait_port(name, listen_host, port,
                                        max(0.1, deadline - time.monotonic())):
            raise LabError('forward %s:%d in %s -> %s:%d does not answer' % (
                listen_host, port, name, target_host, target_port))
        return sock


def _terminate(proc, timeout=5.0):
    """SIGTERM the process group of proc, then SIGKILL; reap it."""
    if proc.poll() is not None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        except PermissionError:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)
        try:
            proc.wait(timeout)
            return
        except subprocess.TimeoutExpired:
            continue


# ---------------------------------------------------------------- self-check

def _selfcheck():
    """Exercise everything once; exit status 0 when all is well."""
    ok, why = available()
    print('available:', ok, why)
    if not ok:
        return 77
    removed = cleanup_stale()
    if removed:
        print('removed stale namespaces:', removed)
    with Lab(rate='1gbit') as lab:
        print('namespaces:', lab.ns_a, lab.ns_b)
        assert lab.reachable('a', lab.addr_b), 'b not reachable from a'
        print('a -> b reachable')
        print(lab.qdisc('a').splitlines()[0])
        lab.link_down()
        assert not lab.reachable('a', lab.addr_b), 'reachable while down'
        lab.link_up()
        assert lab.reachable('a', lab.addr_b), 'not reachable after up'
        lab.set_rate('10gbit')
        assert 'rate 10Gbit' in lab.qdisc('b'), lab.qdisc('b')
        print('link_down/link_up ok')
        # hosts helper
        out = lab.run('b', ['getent', 'hosts', 'dtnm-sink'],
                      hosts={'dtnm-sink': lab.addr_b}).stdout
        assert lab.addr_b in out, out
        print('private /etc/hosts ok:', out.strip())
        # forward: to RabbitMQ when it runs, else to a local listener
        target = 5672
        if not wait_port('127.0.0.1', target, timeout=0.5):
            srv = socket.socket()
            srv.bind(('127.0.0.1', 0))
            srv.listen(1)
            target = srv.getsockname()[1]
            threading.Thread(
                target=lambda: srv.accept()[0].sendall(b'\x01hello'),
                daemon=True).start()
            print('RabbitMQ not running; forwarding to a test listener')
        lab.forward('a', 5672, '127.0.0.1', target, check=False)
        code = ('import socket,sys\n'
                's = socket.create_connection(("127.0.0.1", 5672),'
                ' timeout=5)\n'
                's.sendall(b"AMQP\\x00\\x00\\x09\\x01")\n'
                'd = s.recv(7)\n'
                'sys.exit(0 if d[:1] == b"\\x01" else 1)\n')
        for _ in range(50):
            proc = lab.run('a', [sys.executable, '-c', code], check=False)
            if proc.returncode == 0:
                break
            time.sleep(0.1)
        assert proc.returncode == 0, 'forward failed: %s' % proc.stderr
        print('forward 127.0.0.1:5672 in ns a -> root 127.0.0.1:%d ok '
              '(got an AMQP/test frame)' % target)
    assert not [n for n in list_namespaces() if n.startswith(lab.name)]
    print('cleanup ok')
    return 0


if __name__ == '__main__':
    sys.exit(_selfcheck())
