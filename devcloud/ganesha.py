"""A real nfs-ganesha NFSv3 server for functional tests.

The server always runs in a network namespace of a :class:`netns.Lab`
(its own one unless a lab is passed) and in a private mount namespace in
which ``/run`` is a fresh tmpfs.  There it has its own ``rpcbind`` (NFSv3
ganesha refuses to start when it cannot register with a portmapper), its
own ``/run/rpcbind.sock`` and no D-Bus, so it never meets an rpcbind,
ganesha or D-Bus of the machine, and can use the standard ports 2049
(NFS) and 20048 (MOUNT).  Config, log, pid file, recovery directory and
the exported directory live in a temporary directory.  A tiny export
(``size=``) is a tmpfs mounted inside the private mount namespace, so
nothing is left mounted after a crash.

The client (the code under test) reaches the server by moving the
calling thread into a namespace with :func:`enter_netns` (``setns`` is
per thread for network namespaces)::

    from devcloud import ganesha

    ok, why = ganesha.available()
    if not ok:
        self.skipTest(why)
    with netns.Lab(rate='1gbit') as lab:
        srv = ganesha.Ganesha(lab=lab)        # server in ns 'b'
        srv.start()
        with srv.client():                    # this thread now in ns 'a'
            be = libnfs.LibnfsBackend(srv.url)  # nfs://192.0.2.2/export?..
            ...
        srv.close()

Without ``lab`` the fixture creates its own lab and ``url`` /
:meth:`client` are for a client in the server's own namespace over
127.0.0.1 (loopback).  :meth:`Ganesha.close` (also ``__exit__``) kills the
server, rpcbind, and the lab it created, and removes the temporary
directory; it is idempotent and safe after failures, so tests register it
with ``addCleanup`` right after construction.
"""

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

from devcloud import netns
from devcloud import relay

MiB = 1 << 20
NFS_PORT = 2049
MOUNT_PORT = 20048
GANESHA = 'ganesha.nfsd'
RPCBIND = 'rpcbind'
PSEUDO = '/export'
TMP_PREFIX = 'dtnm-ganesha-'
_FSAL_DIRS = ('/usr/lib/x86_64-linux-gnu/ganesha', '/usr/lib/ganesha',
              '/usr/lib64/ganesha', '/usr/local/lib/ganesha')
_CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


class GaneshaError(RuntimeError):
    pass


def available():
    """(True, '') when a ganesha NFSv3 server can run here, else
    (False, reason) for ``skipTest``.
    """
    if os.geteuid() != 0:
        return False, 'nfs-ganesha fixtures need root'
    for tool, pkg in ((GANESHA, 'nfs-ganesha'), (RPCBIND, 'rpcbind'),
                      ('nsenter', 'util-linux'), ('unshare', 'util-linux')):
        if _which(tool) is None:
            return False, '%s is not installed (%s)' % (tool, pkg)
    if not any(os.path.exists(os.path.join(d, 'libfsalvfs.so'))
               for d in _FSAL_DIRS):
        return False, 'the VFS FSAL is not installed (nfs-ganesha-vfs)'
    return netns.available()


def cleanup_stale(tmpdirs=(None, '/dev/shm', '/var/tmp')):
    """Remove what crashed test runs left: their namespaces (which kills
    their ganesha and rpcbind, see :func:`netns.cleanup_stale`) and their
    temporary directories.  Returns the directories removed.
    """
    netns.cleanup_stale()
    removed = []
    for base in tmpdirs:
        base = base or tempfile.gettempdir()
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in names:
            if not name.startswith(TMP_PREFIX):
                continue
            pid = name[len(TMP_PREFIX):].split('-', 1)[0]
            if pid.isdigit() and not os.path.exists('/proc/%s' % pid):
                shutil.rmtree(os.path.join(base, name), ignore_errors=True)
                removed.append(os.path.join(base, name))
    return removed


def _which(tool):
    return shutil.which(tool, path=os.environ.get('PATH', '') +
                        ':/usr/sbin:/sbin:/usr/bin:/bin')


def _setns(fd):
    if _libc.setns(fd, _CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, 'setns: %s' % os.strerror(err))


@contextlib.contextmanager
def enter_netns(name):
    """Move the calling thread into network namespace ``name`` (a name
    under /run/netns; None stays put) and back afterwards.  Sockets made
    inside stay in that namespace.
    """
    if name is None:
        yield
        return
    with open('/proc/thread-self/ns/net') as here, \
            open(os.path.join('/run/netns', name)) as there:
        _setns(there.fileno())
        try:
            yield
        finally:
            _setns(here.fileno())


def in_netns(name, fn, *args, **kw):
    """Run ``fn`` in a new thread inside namespace ``name``; its result."""
    box = {}

    def run():
        try:
            with enter_netns(name):
                box['result'] = fn(*args, **kw)
        except BaseException as exc:  # noqa: B902 - re-raised below
            box['error'] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join()
    if 'error' in box:
        raise box['error']
    return box.get('result')


def _port_open(host, port):
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _kill(proc, sig, timeout=10.0):
    """Signal a Popen and reap it; SIGKILL when it outlives timeout."""
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(sig)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait(10)


class Ganesha:
    """One nfs-ganesha NFSv3 server exporting one directory.

    :param lab: a started :class:`netns.Lab`; None creates a private one
        and makes the URL a loopback one.
    :param ns: the lab namespace the server runs in ('b').
    :param commit: ``NFS_Commit = true``: the server makes every write
        stable (knfsd's ``sync``).
    :param read_only: ``Access_Type = RO``.
    :param max_io: MaxRead/MaxWrite/PrefRead/PrefWrite in bytes.
    :param size: bytes of a tmpfs for the export (None: a plain directory
        in the temporary directory).
    :param squash: ganesha ``Squash`` (the client is uid 0).
    """

    def __init__(self, lab=None, ns='b', commit=False, read_only=False,
                 max_io=MiB, size=None, squash='No_Root_Squash',
                 nfsport=NFS_PORT, mountport=MOUNT_PORT,
                 log_level='NIV_EVENT', tmpdir=None):
        self.own_lab = lab is None
        self.lab = lab
        self.ns = ns
        self.commit = commit
        self.read_only = read_only
        self.max_io = int(max_io)
        self.size = size
        self.squash = squash
        self.nfsport = nfsport
        self.mountport = mountport
        self.log_level = log_level
        self.dir = tempfile.mkdtemp(prefix='%s%d-' % (TMP_PREFIX, os.getpid()),
                                    dir=tmpdir)
        os.chmod(self.dir, 0o755)
        self.export_dir = os.path.join(self.dir, 'export')
        self.conf = os.path.join(self.dir, 'ganesha.conf')
        self.log = os.path.join(self.dir, 'ganesha.log')
        self.pidfile = os.path.join(self.dir, 'ganesha.pid')
        self.recovery = os.path.join(self.dir, 'recovery')
        self.holder = None      # rpcbind, owner of the private mount ns
        self.proc = None        # ganesha.nfsd
        self.starts = 0
        self._closed = False

    # -- lifecycle
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self):
        return self.proc.pid if self.running else None

    def start(self, timeout=20.0):
        """Start rpcbind (once) and ganesha; return when the NFS and
        MOUNT ports accept connections.
        """
        if self._closed:
            raise GaneshaError('fixture is closed')
        if self.running:
            return self
        try:
            if self.lab is None:
                self.lab = netns.Lab()
                self.lab.start()
            if self.holder is None or self.holder.poll() is not None:
                self._start_holder(timeout)
            self._write_config()
            with open(self.log, 'ab') as f:
                f.write(b'---- start %d\n' % self.starts)
            self.starts += 1
            argv = ['nsenter', '-t', str(self.holder.pid), '-m', '-n',
                    _which(GANESHA), '-F', '-f', self.conf, '-L', self.log,
                    '-p', self.pidfile, '-N', self.log_level]
            with open(os.path.join(self.dir, 'stderr'), 'ab') as err:
                self.proc = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=err,
                    start_new_session=True)
            self._wait_ready(timeout)
        except BaseException:
            self.close()
            raise
        return self

    def _start_holder(self, timeout):
        for d in (self.export_dir, self.recovery):
            os.makedirs(d, exist_ok=True)
        os.chmod(self.export_dir, 0o755)
        script = 'mount -t tmpfs -o mode=755 tmpfs /run'
        if self.size:
            script += (' && mount -t tmpfs -o size=%d,mode=755 tmpfs "$1"'
                       % int(self.size))
        script += ' && exec "$0" -f'
        with open(os.path.join(self.dir, 'rpcbind.err'), 'ab') as err:
            self.holder = self.lab.popen(
                self.ns, ['unshare', '-m', '--propagation', 'private', 'sh',
                          '-c', script, _which(RPCBIND), self.export_dir],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=err)
        sock = '/proc/%d/root/run/rpcbind.sock' % self.holder.pid
        deadline = time.monotonic() + timeout
        while not os.path.exists(sock):
            if self.holder.poll() is not None or \
                    time.monotonic() > deadline:
                raise GaneshaError('rpcbind did not start: %s' % (
                    self._tail(os.path.join(self.dir, 'rpcbind.err'))))
            time.sleep(0.02)

    def _wait_ready(self, timeout):
        ns = self.lab.ns(self.ns)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise GaneshaError('ganesha exited with %s:\n%s' % (
                    self.proc.returncode, self._tail(self.log)))
            if in_netns(ns, lambda: all(
                    _port_open('127.0.0.1', p)
                    for p in (self.nfsport, self.mountport))):
                return
            if time.monotonic() > deadline:
                raise GaneshaError('ganesha did not open ports %d/%d in '
                                   '%.0f s:\n%s' % (
                                       self.nfsport, self.mountport,
                                       timeout, self._tail(self.log)))
            time.sleep(0.05)

    def stop(self, kill=True, timeout=15.0):
        """Stop ganesha: SIGKILL (a crash) or SIGTERM (clean).  rpcbind
        and a tiny export's tmpfs stay, so :meth:`start` resumes with the
        same data.
        """
        if self.proc is not None:
            _kill(self.proc, signal.SIGKILL if kill else signal.SIGTERM,
                  timeout)
            self.proc = None

    def restart(self, kill=True, new_export=False, timeout=20.0):
        """Stop and start again.  ``new_export`` also replaces rpcbind and
        the private mount namespace: a tiny export gets a fresh, empty
        tmpfs, so file handles issued before are stale.
        """
        self.stop(kill=kill)
        if new_export:
            _kill(self.holder, signal.SIGKILL)
            self.holder = None
        return self.start(timeout=timeout)

    def close(self):
        """Kill everything this fixture started; remove its files."""
        if self._closed:
            return
        self._closed = True
        errors = []
        for proc in (self.proc, self.holder):
            try:
                _kill(proc, signal.SIGKILL)
            except Exception as exc:  # noqa: B902 - report, go on
                errors.append(str(exc))
        if self.holder is not None and self.lab is not None and \
                not self.own_lab:
            with contextlib.suppress(ValueError):
                self.lab.stop(self.holder)
        self.proc = self.holder = None
        if self.own_lab and self.lab is not None:
            try:
                self.lab.close()
            except Exception as exc:  # noqa: B902 - report, go on
                errors.append(str(exc))
        shutil.rmtree(self.dir, ignore_errors=True)
        if errors:
            raise GaneshaError('; '.join(errors))

    # -- client side
    @property
    def client_ns(self):
        """Lab namespace the :attr:`url` is meant for."""
        if self.lab is None:
            raise GaneshaError('not started')
        return self.ns if self.own_lab else self.lab.peer(self.ns)

    def url_for(self, ns, path='', **query):
        """NFS URL of the export (plus ``path``) as seen from lab
        namespace ``ns`` (the server's own namespace: 127.0.0.1).
        Extra keyword arguments become query parameters.
        """
        if self.lab.ns(ns) == self.lab.ns(self.ns):
            host = '127.0.0.1'
        else:
            host = self.lab.addr(self.ns)
        q = {'nfsport': self.nfsport, 'mountport': self.mountport}
        q.update(query)
        path = path.strip('/')
        return 'nfs://%s%s%s?%s' % (
            host, PSEUDO, '/' + path if path else '',
            '&'.join('%s=%s' % kv for kv in q.items()))

    @property
    def url(self):
        return self.url_for(self.client_ns)

    def client(self, ns=None):
        """Context manager: run the calling thread in the client's
        namespace (``ns`` or :attr:`client_ns`).
        """
        return enter_netns(self.lab.ns(ns or self.client_ns))

    def local(self, *parts):
        """Path of the exported data as seen from this (root) mount
        namespace, also for a tmpfs export (through /proc/PID/root).
        """
        base = self.export_dir
        if self.size:
            if self.holder is None or self.holder.poll() is not None:
                raise GaneshaError('tiny export is not mounted')
            base = '/proc/%d/root%s' % (self.holder.pid, self.export_dir)
        return os.path.join(base, *parts)

    def log_text(self):
        try:
            with open(self.log, errors='replace') as f:
                return f.read()
        except OSError:
            return ''

    # -- internals
    @staticmethod
    def _tail(path, n=25):
        try:
            with open(path, errors='replace') as f:
                return ''.join(f.readlines()[-n:])
        except OSError as exc:
            return '(no log: %s)' % exc

    def _write_config(self):
        conf = """\
NFS_CORE_PARAM {
    Protocols = 3;
    NFS_Port = %(nfsport)d;
    MNT_Port = %(mountport)d;
    Enable_NLM = false;
    Enable_RQUOTA = false;
    Enable_UDP = false;
    mount_path_pseudo = true;
}
NFS_KRB5 {
    Active_krb5 = false;
}
NFSV4 {
    Graceless = true;
    RecoveryRoot = "%(recovery)s";
}
EXPORT {
    Export_Id = 1;
    Path = "%(path)s";
    Pseudo = "%(pseudo)s";
    Access_Type = %(access)s;
    Squash = %(squash)s;
    Protocols = 3;
    Transports = TCP;
    SecType = sys;
    MaxRead = %(max_io)d;
    MaxWrite = %(max_io)d;
    PrefRead = %(max_io)d;
    PrefWrite = %(max_io)d;
    NFS_Commit = %(commit)s;
    FSAL {
        Name = VFS;
    }
}
""" % {'nfsport': self.nfsport, 'mountport': self.mountport,
            'recovery': self.recovery,
            'path': self.export_dir, 'pseudo': PSEUDO,
            'access': 'RO' if self.read_only else 'RW',
            'squash': self.squash, 'max_io': self.max_io,
            'commit': 'true' if self.commit else 'false'}
        with open(self.conf, 'w') as f:
            f.write(conf)


class NamespaceRelay(relay.Relay):
    """127.0.0.1:<port> here -> ``host:port`` inside namespace ``ns``:
    the engines of the test clouds live in the root namespace, next to
    RabbitMQ and Glance, while nfs-ganesha runs in a lab namespace of its
    own; the socket each connection dials is made by a thread that
    entered that namespace.
    """

    def __init__(self, ns, host, port):
        self.ns = ns
        super().__init__((host, port))

    def _dial(self):
        return in_netns(self.ns, socket.create_connection, self.upstream,
                        10)


def nfs_url(server, path="", add_cleanup=None):
    """A libnfs URL reaching ``server`` (a started ganesha.Ganesha) from
    the root namespace through two relays; returns (url, relays).

    ``add_cleanup`` (a test's ``addCleanup``) is given each relay's
    ``close`` as soon as the relay listens.  Without it, a relay made
    before a failure is closed here before the error goes on.
    """
    ns = server.lab.ns(server.ns)
    relays = []
    try:
        for port in (server.nfsport, server.mountport):
            relays.append(NamespaceRelay(ns, "127.0.0.1", port))
            if add_cleanup is not None:
                add_cleanup(relays[-1].close)
        url = server.url_for(server.ns, path)
    except BaseException:
        if add_cleanup is None:
            for r in relays:
                r.close()
        raise
    base = url.split("?", 1)[0]
    return ("%s?nfsport=%d&mountport=%d" % (base, relays[0].port,
                                            relays[1].port), relays)
