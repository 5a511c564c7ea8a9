"""Transfer tools to compare against, and a runner for dtn-migrate itself.

Every runner has the same life cycle::

    peer = make_peer('gridftp')
    peer.setup(lab, src_dir, dst_dir)   # lab: netns.Lab, or None = loopback
    try:
        seconds = peer.run(files)       # relpaths under src_dir
        print(peer.last)                # command line, bytes, MB/s, extras
    finally:
        peer.teardown()

* The server (sink) runs in namespace ``b`` of the lab, the client (source)
  in namespace ``a``.  With ``lab=None`` both run in the root namespace and
  talk over 127.0.0.1.
* Every server binds a port of its own: ``dtn-migrate-transfer serve``
  port 0 (it prints the port it took), the others their usual port in
  the lab's namespace, a random one on loopback, and another when that
  one was taken meanwhile (:func:`benchmarks.common.on_own_port`).
* ``run`` empties the destination, optionally "warms" the destination
  memory (see :attr:`Peer.warm_bytes`), then times ONLY the client command
  (wall clock, ``time.perf_counter`` around the process), then checks the
  result: every destination file has the right size and a few random 1 MiB
  windows are equal to the source (:func:`verify_copy`), and finally empties
  the destination again so that tmpfs memory is given back.
* ``teardown`` stops the server and removes work files.  Servers run in
  their own process group and are killed with it.

Peers and the exact commands (``ADDR`` = sink address, ``PORT`` its port):

iperf3 (memory to memory, the network ceiling; no files are written)
    server ``iperf3 -s -B ADDR -p PORT``;
    client ``iperf3 -c ADDR -p PORT -n TOTAL_BYTES -P 4 -J``
    (``-n`` counts the bytes of all streams together).
gridftp
    server ``globus-gridftp-server -p PORT -control-interface ADDR
    -data-interface ADDR -aa -anonymous-user root -allow-root`` started
    through ``unshare -m`` with a private /etc/hosts that maps the machine's
    host name to ADDR (the server resolves its own name for PASV replies);
    client ``globus-url-copy -nodcau -p 4 -bs 4M -pp -fast`` and, for one
    file, ``file:///SRC/f ftp://ADDR:PORT/DST/f``; for a whole directory,
    ``-cd -r file:///SRC/ ftp://ADDR:PORT/DST/`` (one invocation; ``-cc N``
    if ``concurrency`` > 1); for a subset, a URL-pair list with ``-f``.
rsync
    daemon ``rsync --daemon --no-detach --address ADDR --port PORT --config
    CONF`` with one writable module ``dst`` (``use chroot = false``, ``uid =
    root``, ``reverse lookup = no``); client ``rsync -a --whole-file
    --inplace SRC/ rsync://ADDR:PORT/dst/`` (``--whole-file``: no delta
    algorithm, there is nothing to diff against in a fresh destination;
    ``--inplace``: no temporary file and rename; no compression).  rsync
    still computes its whole-file checksum, which it always does.
xrdcp
    server ``xrootd -R nobody -c CONF -l LOG -n NAME`` (xrootd refuses to
    run as root) with ``all.export DST``; DST is chowned to nobody; client
    ``xrdcp -f -s [-S streams] SRC root://ADDR:PORT/DST/f`` per file, and for
    many files one invocation ``xrdcp -f -s --parallel 4 SRC/f1 ... SRC/fN
    root://ADDR:PORT/DST/``.
cp (optional reference, no network)
    ``cp -r --reflink=never SRC/. DST/`` in the sink namespace: the rate at
    which this machine can fill the destination file system at all.
dtn-migrate, dtn-migrate-hash
    see :class:`DtnMigrate`.
"""

import contextlib
import json
import os
import pwd
import random
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(_HERE)
if _REPO not in sys.path:
    sys.path.insert(0, _REPO)

from benchmarks._lab import netns  # noqa: E402
from benchmarks import common  # noqa: E402

MiB = 1 << 20
SOURCE, SINK = 'a', 'b'
DEBIAN_PACKAGES = ('globus-gridftp-server-progs globus-gass-copy-progs rsync '
                   'xrootd-server xrootd-client iperf3 mbuffer socat')
DTN_MIGRATE_EXE = os.path.join(_REPO, '.venv', 'bin', 'dtn-migrate-transfer')


class PeerError(RuntimeError):
    """A peer failed (server did not start, client failed, bad copy)."""


class PeerUnavailable(PeerError):
    """The peer cannot run here (not installed); skip it."""


class VerifyError(PeerError):
    pass


class PortInUse(PeerError, common.AddressInUse):
    """The server's port was taken: start it again on another."""


# ----------------------------------------------------------------- helpers

def verify_copy(src_dir, dst_dir, files, windows=8, window=MiB, rng=None):
    """Check a copy: all sizes equal, and ``windows`` random windows of
    ``window`` bytes equal (plus the first and last window of one big file).
    Returns the number of bytes compared.  Raises VerifyError.
    """
    rng = rng or random.Random()
    sizes = {}
    for rel in files:
        s = os.path.join(src_dir, rel)
        d = os.path.join(dst_dir, rel)
        try:
            dsize = os.stat(d).st_size
        except FileNotFoundError:
            raise VerifyError('missing at destination: %s' % rel) from None
        ssize = os.stat(s).st_size
        if dsize != ssize:
            raise VerifyError('%s: size %d at destination, %d at source' % (
                rel, dsize, ssize))
        sizes[rel] = ssize
    if not files:
        return 0
    checks = []
    biggest = max(files, key=lambda r: sizes[r])
    if sizes[biggest]:
        checks.append((biggest, 0))
        checks.append((biggest, max(0, sizes[biggest] - window)))
    for _ in range(windows):
        rel = rng.choice(files)
        if sizes[rel]:
            off = rng.randrange(0, max(1, sizes[rel] - window + 1))
            checks.append((rel, off))
    compared = 0
    for rel, off in checks:
        with open(os.path.join(src_dir, rel), 'rb') as fs, \
                open(os.path.join(dst_dir, rel), 'rb') as fd:
            fs.seek(off)
            fd.seek(off)
            a = fs.read(window)
            b = fd.read(window)
            if a != b:
                raise VerifyError('%s: content differs in [%d, %d)' % (
                    rel, off, off + len(a)))
            compared += len(a)
    return compared


def abbreviate(argv, keep=24):
    """argv as strings, with a long run of file arguments elided."""
    argv = [str(a) for a in argv]
    if len(argv) <= keep + 4:
        return argv
    return (argv[:keep] + ['... (%d more arguments)' % (len(argv) - keep - 2)]
            + argv[-2:])


def empty_dir(path):
    """Remove everything inside path (keep path itself)."""
    if not os.path.isdir(path):
        return
    for name in os.listdir(path):
        p = os.path.join(path, name)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(p)


def warm_memory(directory, nbytes, chunk=64 * MiB):
    """Write ``nbytes`` into a scratch file in ``directory`` and delete it.

    On a VM that hands free memory back to the host (virtio-balloon free page
    reporting, as on these machines), the first write to a fresh tmpfs page
    costs a host page fault: writing to fresh tmpfs memory runs at
    ~0.2-0.7 GB/s instead of 2+ GB/s.  Writing and freeing a ballast just
    before a run leaves recently-backed pages on the free lists so that the
    tool under test mostly gets those.  It reduces, but does not remove,
    that effect; see README.  Returns seconds spent.
    """
    if nbytes <= 0:
        return 0.0
    t0 = time.perf_counter()
    path = os.path.join(directory, '.dtnm-warm-%d' % os.getpid())
    buf = b'\x5a' * chunk
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        left = nbytes
        while left > 0:
            left -= os.write(fd, buf[:min(chunk, left)])
    finally:
        os.close(fd)
        os.unlink(path)
    return time.perf_counter() - t0


def missing_tools(peers):
    """[(peer name, executable)] of peers whose executables are missing."""
    out = []
    for name in peers:
        cls = PEERS.get(name)
        if cls is None:
            continue
        for exe in getattr(cls, 'executables', ()):
            if shutil.which(exe) is None:
                out.append((name, exe))
    return out


def apt_hint():
    return 'apt-get install -y ' + DEBIAN_PACKAGES


def _kill_group(proc, timeout=5.0):
    if proc is None or proc.poll() is not None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout)
            return
        except subprocess.TimeoutExpired:
            pass


# ----------------------------------------------------------------- base

class Peer:
    """Base class; subclasses fill in :meth:`start_server` and
    :meth:`client_argv`.

    :ivar warm_bytes: bytes of ballast written+deleted in dst_dir just
        before each timed run (0 = off); see :func:`warm_memory`.
    :ivar last: details of the last run (argv, seconds, bytes, MBps, ...).
    """

    name = 'base'
    executables = ()
    default_port = 0
    writes_files = True
    uses_network = True

    def __init__(self, timeout=None, warm_bytes=0, verify_windows=8,
                 **options):
        self.timeout = timeout
        self.warm_bytes = warm_bytes
        self.verify_windows = verify_windows
        self.options = options
        self.lab = None
        self.src_dir = self.dst_dir = None
        self.workdir = None
        self.server = None
        self.addr = None
        self.port = None
        self.last = {}
        self._created_dst = False

    # -- availability
    @classmethod
    def check(cls):
        """(ok, reason) - are the executables installed?"""
        for exe in cls.executables:
            if shutil.which(exe) is None:
                return False, '%s not found (%s)' % (exe, apt_hint())
        return True, ''

    # -- life cycle
    def setup(self, lab, src_dir, dst_dir):
        ok, why = self.check()
        if not ok:
            raise PeerUnavailable('%s: %s' % (self.name, why))
        self.lab = lab
        self.src_dir = os.path.abspath(src_dir)
        self.dst_dir = os.path.abspath(dst_dir)
        if not os.path.isdir(self.dst_dir):
            os.makedirs(self.dst_dir)
            self._created_dst = True
        empty_dir(self.dst_dir)
        self.workdir = tempfile.mkdtemp(prefix='dtnm-bench-%s-' % self.name)
        os.chmod(self.workdir, 0o755)
        self.addr = lab.addr(SINK) if lab else '127.0.0.1'
        try:
            _, self.port = common.on_own_port(
                self._start_on, first=self.default_port if lab else None)
        except BaseException:
            self.teardown()
            raise
        return self

    def _start_on(self, port):
        """start_server() on ``port``; stopped again if the port was
        taken (PortInUse, for on_own_port to try another).
        """
        self.port = port
        try:
            self.start_server()
        except PortInUse:
            self.stop_server()
            # The next server's logs must not say this one's "in use".
            for name in os.listdir(self.workdir):
                if name.endswith('.log'):
                    os.unlink(os.path.join(self.workdir, name))
            raise

    def teardown(self):
        self.stop_server()
        if self.dst_dir:
            empty_dir(self.dst_dir)
            if self._created_dst:
                with contextlib.suppress(OSError):
                    os.rmdir(self.dst_dir)
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def start_server(self):
        pass

    def stop_server(self):
        if self.server is not None:
            if self.lab:
                self.lab.stop(self.server)
            else:
                _kill_group(self.server)
            self.server = None

    # -- running things
    def _argv(self, side, argv, hosts=None):
        if self.lab:
            return self.lab.argv(side, argv, hosts=hosts)
        argv = [str(a) for a in argv]
        if hosts:
            argv, path = netns.hosts_argv(argv, hosts, tmpdir=self.workdir)
        return argv

    def spawn_server(self, argv, hosts=None, log_name='server.log', cwd=None,
                     **kw):
        log = open(os.path.join(self.workdir, log_name), 'ab')
        full = self._argv(SINK, argv, hosts)
        self.server_argv = [str(a) for a in argv]
        try:
            self.server = subprocess.Popen(
                full, stdout=kw.pop('stdout', log), stderr=subprocess.STDOUT,
                cwd=cwd or self.workdir, start_new_session=True, **kw)
        finally:
            log.close()
        if self.lab:
            self.lab._procs.append(self.server)
        return self.server

    def wait_server(self, timeout=15.0, logs=('server.log',)):
        """Until the server itself listens on its port (its ``logs`` in
        the work dir say why not): PortInUse when the port was taken,
        PeerError when it exited or does not listen.
        """
        try:
            common.wait_listening(
                self.server, self.port,
                [os.path.join(self.workdir, n) for n in logs], timeout,
                '%s server on %s:%d' % (self.name, self.addr, self.port))
        except common.AddressInUse as exc:
            raise PortInUse(str(exc)) from None
        except common.ServerError as exc:
            raise PeerError(str(exc)) from None

    def timed_client(self, argv, timeout, env=None, cwd=None):
        """Run the client in the source namespace; return (seconds, proc).
        Only this is timed.
        """
        full = self._argv(SOURCE, argv)
        out = os.path.join(self.workdir, 'client.out')
        err = os.path.join(self.workdir, 'client.err')
        run_env = dict(os.environ, **(env or {}))
        with open(out, 'wb') as fo, open(err, 'wb') as fe:
            t0 = time.perf_counter()
            proc = subprocess.Popen(full, stdout=fo, stderr=fe, env=run_env,
                                    cwd=cwd or self.workdir,
                                    start_new_session=True)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                raise PeerError('%s client timed out after %.0f s: %s\n%s' % (
                    self.name, timeout, shlex.join(map(str, argv)),
                    common.tail(err, 20))) from None
            seconds = time.perf_counter() - t0
        with open(out, errors='replace') as f:
            stdout = f.read()
        with open(err, errors='replace') as f:
            stderr = f.read()
        if proc.returncode != 0:
            raise PeerError('%s client failed (rc=%d): %s\n%s\n%s' % (
                self.name, proc.returncode, shlex.join(map(str, argv)),
                stdout[-2000:], stderr[-2000:]))
        done = subprocess.CompletedProcess(full, proc.returncode, stdout,
                                           stderr)
        return seconds, done

    def run(self, files, manifest=None):
        """Copy ``files`` (relpaths under src_dir) to dst_dir; return the
        wall-clock seconds of the client command.
        """
        files = list(files)
        nbytes = sum(os.stat(os.path.join(self.src_dir, f)).st_size
                     for f in files)
        timeout = self.timeout or max(300.0, nbytes / 10e6)
        self.before_run(files)
        empty_dir(self.dst_dir)
        warm_s = warm_memory(self.dst_dir, self.warm_bytes) \
            if self.writes_files else 0.0
        argv, env = self.client_argv(files, nbytes, manifest)
        seconds, proc = self.timed_client(argv, timeout, env=env)
        self.last = {'tool': self.name, 'argv': abbreviate(argv),
                     'env': env or {}, 'seconds': seconds, 'bytes': nbytes,
                     'files': len(files), 'MBps': nbytes / seconds / 1e6,
                     'warm_s': warm_s, 'uses_network': self.uses_network,
                     'server_argv': getattr(self, 'server_argv', None)}
        self.last.update(self.after_run(proc, files, nbytes) or {})
        if self.writes_files:
            self.last['verified_bytes'] = verify_copy(
                self.src_dir, self.dst_dir, files, self.verify_windows)
        empty_dir(self.dst_dir)
        return seconds

    def before_run(self, files):
        pass

    def after_run(self, proc, files, nbytes):
        return {}

    def client_argv(self, files, nbytes, manifest):
        raise NotImplementedError

    def all_files(self, files):
        """True when ``files`` is every regular file under src_dir, i.e. a
        directory copy is equivalent.
        """
        have = set()
        for root, _dirs, names in os.walk(self.src_dir):
            for n in names:
                have.add(os.path.relpath(os.path.join(root, n), self.src_dir))
        return have == set(files)

    def describe(self):
        """Human-readable settings, for reports."""
        return self.name


# ----------------------------------------------------------------- peers

class Iperf3(Peer):
    """Memory-to-memory TCP ceiling: the same number of bytes, 4 streams."""

    name = 'iperf3'
    executables = ('iperf3',)
    default_port = 5201
    writes_files = False

    def start_server(self):
        self.spawn_server(['iperf3', '-s', '-B', self.addr, '-p', self.port])
        self.wait_server()

    def client_argv(self, files, nbytes, manifest):
        streams = self.options.get('streams', 4)
        return ['iperf3', '-c', self.addr, '-p', self.port, '-n', nbytes,
                '-P', streams, '-J'], None

    def after_run(self, proc, files, nbytes):
        try:
            end = json.loads(proc.stdout)['end']
            sent = end['sum_sent']['bytes']
            return {'iperf3_bytes': sent,
                    'iperf3_seconds': end['sum_sent']['seconds'],
                    'iperf3_MBps':
                        end['sum_received']['bits_per_second'] / 8e6,
                    'retransmits': end['sum_sent'].get('retransmits')}
        except (ValueError, KeyError) as exc:
            raise PeerError('iperf3: bad JSON output: %s' % exc) from None

    def describe(self):
        return 'iperf3 -P %d -n BYTES' % self.options.get('streams', 4)


class GridFTP(Peer):
    name = 'gridftp'
    executables = ('globus-gridftp-server', 'globus-url-copy')
    default_port = 2811

    def start_server(self):
        hosts = None
        if self.lab:
            # the server resolves the machine's host name to build PASV
            # replies; inside a namespace that name must map to ADDR
            hosts = {socket.gethostname(): self.addr, 'dtnm-sink': self.addr}
        self.spawn_server(
            ['globus-gridftp-server', '-p', self.port,
             '-control-interface', self.addr, '-data-interface', self.addr,
             '-aa', '-anonymous-user', 'root', '-allow-root',
             '-d', 'error'], hosts=hosts)
        self.wait_server()

    def _base(self):
        o = self.options
        argv = ['globus-url-copy', '-nodcau', '-p', o.get('parallel', 4),
                '-bs', o.get('block_size', '4M')]
        if o.get('pipeline', True):
            argv += ['-pp', '-fast']
        cc = o.get('concurrency', 1)
        if cc and cc > 1:
            argv += ['-cc', cc]
        return argv

    def _url(self, path):
        return 'ftp://%s:%d%s' % (self.addr, self.port, path)

    def client_argv(self, files, nbytes, manifest):
        argv = self._base()
        if len(files) == 1:
            rel = files[0]
            return argv + ['file://' + os.path.join(self.src_dir, rel),
                           self._url(os.path.join(self.dst_dir, rel))], None
        if self.all_files(files):
            return argv + ['-cd', '-r', 'file://' + self.src_dir + '/',
                           self._url(self.dst_dir + '/')], None
        listfile = os.path.join(self.workdir, 'urls.txt')
        with open(listfile, 'w') as f:
            for rel in files:
                f.write('file://%s %s\n' % (
                    os.path.join(self.src_dir, rel),
                    self._url(os.path.join(self.dst_dir, rel))))
        return argv + ['-cd', '-f', listfile], None

    def describe(self):
        return shlex.join(map(str, self._base()))


class GridFTPVerified(GridFTP):
    """globus-url-copy in its verified mode: after each file, the client
    checksums the source and the server the copy (``-verify-checksum``),
    and a mismatch fails the transfer.  ``checksum`` is the algorithm,
    SHA512 by default: the whole-file hash dtn-migrate checks too.
    """
    name = 'gridftp-verify'

    def _base(self):
        return super()._base() + [
            '-verify-checksum', '-checksum-alg',
            self.options.get('checksum', 'SHA512')]


class Rsync(Peer):
    name = 'rsync'
    executables = ('rsync',)
    default_port = 873

    def start_server(self):
        conf = os.path.join(self.workdir, 'rsyncd.conf')
        with open(conf, 'w') as f:
            f.write('pid file = %s\nuse chroot = false\nreverse lookup = no\n'
                    'max connections = 0\n\n[dst]\n  path = %s\n'
                    '  read only = false\n  uid = root\n  gid = root\n' % (
                        os.path.join(self.workdir, 'rsyncd.pid'),
                        self.dst_dir))
        self.spawn_server(['rsync', '--daemon', '--no-detach', '--address',
                           self.addr, '--port', self.port, '--config', conf,
                           '--log-file', os.path.join(self.workdir,
                                                      'rsyncd.log')])
        self.wait_server(logs=('server.log', 'rsyncd.log'))

    def _base(self):
        return ['rsync'] + list(self.options.get(
            'flags', ['-a', '--whole-file', '--inplace']))

    def client_argv(self, files, nbytes, manifest):
        url = 'rsync://%s:%d/dst/' % (self.addr, self.port)
        argv = self._base()
        if self.all_files(files):
            return argv + [self.src_dir + '/', url], None
        listfile = os.path.join(self.workdir, 'files.txt')
        with open(listfile, 'w') as f:
            f.write('\n'.join(files) + '\n')
        return argv + ['--files-from=' + listfile, self.src_dir + '/',
                       url], None

    def describe(self):
        return shlex.join(self._base())


class Xrdcp(Peer):
    name = 'xrdcp'
    executables = ('xrootd', 'xrdcp')
    default_port = 1094

    def start_server(self):
        nobody = pwd.getpwnam('nobody')
        os.chown(self.workdir, nobody.pw_uid, nobody.pw_gid)
        os.chown(self.dst_dir, nobody.pw_uid, nobody.pw_gid)
        admin = os.path.join(self.workdir, 'admin')
        os.makedirs(admin)
        os.chown(admin, nobody.pw_uid, nobody.pw_gid)
        conf = os.path.join(self.workdir, 'xrootd.cf')
        with open(conf, 'w') as f:
            f.write('all.export %s\nxrd.port %d\nall.adminpath %s\n'
                    'all.pidpath %s\nxrd.network nodnr\n' % (
                        self.dst_dir, self.port, admin, admin))
        # xrootd writes /tmp/xrootd.<instance>.env whatever the config
        # says: use a unique instance name and remove that file afterwards
        self.instance = 'dtnm-%d-%d' % (os.getpid(), self.port)
        self.spawn_server(['xrootd', '-R', 'nobody', '-c', conf, '-l',
                           os.path.join(self.workdir, 'xrootd.log'),
                           '-n', self.instance])
        self.wait_server(logs=('server.log', 'xrootd.log'))

    def stop_server(self):
        super().stop_server()
        inst = getattr(self, 'instance', None)
        if inst:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join('/tmp', 'xrootd.%s.env' % inst))

    def before_run(self, files):
        # the server runs as nobody: it needs to write into dst_dir
        nobody = pwd.getpwnam('nobody')
        os.chown(self.dst_dir, nobody.pw_uid, nobody.pw_gid)

    def _url(self, path):
        return 'root://%s:%d/%s' % (self.addr, self.port, path)

    def client_argv(self, files, nbytes, manifest):
        o = self.options
        argv = ['xrdcp', '-f', '-s']
        if o.get('streams', 1) > 1:
            argv += ['-S', o['streams']]
        env = o.get('env')
        if len(files) == 1:
            rel = files[0]
            return argv + [os.path.join(self.src_dir, rel),
                           self._url(os.path.join(self.dst_dir, rel))], env
        dirs = {os.path.dirname(f) for f in files}
        if len(dirs) == 1:
            d = dirs.pop()
            return argv + ['--parallel', o.get('parallel', 4)] + [
                os.path.join(self.src_dir, f) for f in files] + [
                self._url(os.path.join(self.dst_dir, d) + '/')], env
        raise PeerError('xrdcp runner: files must share one directory')

    def describe(self):
        o = self.options
        s = 'xrdcp -f -s'
        if o.get('streams', 1) > 1:
            s += ' -S %d' % o['streams']
        return s + ' (many files: --parallel %d)' % o.get('parallel', 4)


class LocalCopy(Peer):
    """Reference without network: cp in the sink namespace."""

    name = 'cp'
    executables = ('cp',)
    uses_network = False

    def client_argv(self, files, nbytes, manifest):
        if self.all_files(files):
            return ['cp', '-r', '--reflink=never', self.src_dir + '/.',
                    self.dst_dir + '/'], None
        return (['cp', '--reflink=never', '--parents'] + list(files)
                + [self.dst_dir + '/'], None)

    def timed_client(self, argv, timeout, env=None, cwd=None):
        return super().timed_client(argv, timeout, env, cwd=self.src_dir)

    def describe(self):
        return 'cp -r (local, no network)'


class DtnMigrate(Peer):
    """Our tool, through the ``dtn-migrate-transfer`` CLI contract::

        sink:   dtn-migrate-transfer serve --root DST --listen IP:0
                    --key-file KEY --name sink
        source: dtn-migrate-transfer send --peer IP:PORT --key-file KEY
                    --name source --state-dir STATE --root SRC --json
                    [--streams N] [--object-size B] [--manifest M] FILE...

    The sink is (re)started before every run with an empty DST and the
    source gets an empty state dir, so no run can reuse a previous one.  The
    sink listens on port 0 and is ready when it prints ``listening on
    IP:PORT``, the port it took.  ``known_hash=True`` passes the dataset
    manifest (sizes and sha512) so the source need not hash;
    ``known_hash=False`` does not.
    The last stdout line of ``send`` must be a JSON object with at least
    ``bytes`` and ``seconds``; it is kept in ``last['tool']``.
    """

    name = 'dtn-migrate'
    executables = ()

    def __init__(self, known_hash=True, exe=None, streams=None,
                 object_size=None, extra_args=(), name=None, **kw):
        super().__init__(**kw)
        self.known_hash = known_hash
        self.exe = exe or os.environ.get('DTN_MIGRATE_TRANSFER') or (
            DTN_MIGRATE_EXE if os.path.exists(DTN_MIGRATE_EXE)
            else shutil.which('dtn-migrate-transfer'))
        self.streams = streams
        self.object_size = object_size
        self.extra_args = list(extra_args)
        if not known_hash:
            self.name = 'dtn-migrate-hash'
        if name:
            self.name = name

    def check(self):
        if not self.exe or not os.path.exists(self.exe):
            return False, ('dtn-migrate-transfer not found (%s; install the '
                           'project into the venv: .venv/bin/pip install -e .)'
                           % (self.exe or DTN_MIGRATE_EXE))
        try:
            proc = subprocess.run([self.exe, '--help'], capture_output=True,
                                  text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return False, 'dtn-migrate-transfer --help failed: %s' % exc
        if proc.returncode != 0:
            return False, 'dtn-migrate-transfer --help failed (rc=%d): %s' % (
                proc.returncode, (proc.stderr or proc.stdout).strip()[-500:])
        for sub in ('serve', 'send'):
            if sub not in proc.stdout + proc.stderr:
                return False, ('dtn-migrate-transfer --help does not list '
                               'the %r command' % sub)
        return True, ''

    def start_server(self):
        self.keyfile = os.path.join(self.workdir, 'key.hex')
        with open(self.keyfile, 'w') as f:
            f.write(secrets.token_hex(32) + '\n')
        os.chmod(self.keyfile, 0o600)
        self.state_dir = os.path.join(self.workdir, 'state')
        # the sink is started in before_run(), fresh for every run

    def _start_sink(self):
        """A new sink on a port it takes itself (port 0): ``self.port``
        once it says which.
        """
        self.stop_server()
        empty_dir(self.dst_dir)
        argv = [self.exe, 'serve', '--root', self.dst_dir, '--listen',
                '%s:0' % self.addr, '--key-file', self.keyfile,
                '--name', 'sink']
        self.spawn_server(argv, stdout=subprocess.PIPE)
        ports = []
        ready = threading.Event()
        log_path = os.path.join(self.workdir, 'server.log')
        server = self.server

        def pump():
            with open(log_path, 'ab') as log:
                for line in server.stdout:
                    log.write(line)
                    log.flush()
                    port = common.listening_port(line.decode(
                        'utf-8', 'replace'))
                    if port and not ports:
                        ports.append(port)
                        ready.set()
        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + 30
        while not ready.wait(0.1):
            if server.poll() is not None:
                time.sleep(0.2)
                raise PeerError('dtn-migrate sink exited (rc=%s):\n%s' % (
                    server.returncode, common.tail(log_path, 20)))
            if time.monotonic() > deadline:
                raise PeerError('dtn-migrate sink not ready after 30 s:\n%s'
                                % common.tail(log_path, 20))
        self.port = ports[0]

    def before_run(self, files):
        shutil.rmtree(self.state_dir, ignore_errors=True)
        os.makedirs(self.state_dir)
        self._start_sink()

    def client_argv(self, files, nbytes, manifest):
        argv = [self.exe, 'send', '--peer', '%s:%d' % (self.addr, self.port),
                '--key-file', self.keyfile, '--name', 'source',
                '--state-dir', self.state_dir, '--root', self.src_dir,
                '--json']
        if self.streams:
            argv += ['--streams', self.streams]
        if self.object_size:
            argv += ['--object-size', self.object_size]
        if self.known_hash:
            if not manifest:
                raise PeerError('dtn-migrate with known_hash=True needs the '
                                'manifest (run(files, manifest=path))')
            argv += ['--manifest', manifest]
        return argv + self.extra_args + list(files), None

    def after_run(self, proc, files, nbytes):
        lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
        try:
            report = json.loads(lines[-1])
        except (IndexError, ValueError):
            raise PeerError('dtn-migrate send: last stdout line is not JSON:'
                            ' %r' % (lines[-1:] or [''])[0][:300]) from None
        if not isinstance(report, dict):
            raise PeerError('dtn-migrate send: last stdout line is not a '
                            'JSON object: %r' % lines[-1][:300])
        brief = {k: (len(v) if k == 'files' and isinstance(v, list) else v)
                 for k, v in report.items()}
        out = {'tool_report': brief}
        if report.get('bytes') not in (None, nbytes):
            out['warning'] = 'tool reports %s bytes, expected %d' % (
                report.get('bytes'), nbytes)
        return out

    def run(self, files, manifest=None):
        try:
            return super().run(files, manifest)
        finally:
            self.stop_server()

    def describe(self):
        s = 'dtn-migrate-transfer send'
        if self.streams:
            s += ' --streams %s' % self.streams
        if self.object_size:
            s += ' --object-size %s' % self.object_size
        s += ' --manifest' if self.known_hash else ' (source hashes)'
        return ' '.join([s] + [str(a) for a in self.extra_args])


PEERS = {
    'iperf3': Iperf3,
    'gridftp': GridFTP,
    'gridftp-verify': GridFTPVerified,
    'rsync': Rsync,
    'xrdcp': Xrdcp,
    'cp': LocalCopy,
    'dtn-migrate': DtnMigrate,
    'dtn-migrate-hash': lambda **kw: DtnMigrate(known_hash=False, **kw),
    # Objects' xxh3 only, no whole-file sha512: the integrity level of the
    # peers above (which verify nothing end to end) plus per-object checks.
    'dtn-migrate-xxh3': lambda **kw: DtnMigrate(
        known_hash=True, name='dtn-migrate-xxh3',
        extra_args=('--no-verify',), **kw),
}


def make_peer(name, **options):
    """Instantiate a runner by name (see PEERS)."""
    try:
        factory = PEERS[name]
    except KeyError:
        raise ValueError('unknown tool %r; known: %s' % (
            name, ', '.join(PEERS))) from None
    return factory(**options)
