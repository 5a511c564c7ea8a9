"""Shared plumbing of the dev clouds: the servers' venv, ports, uwsgi.

Glance and Keystone run from their own virtualenv (tools/bootstrap-clouds.sh
makes it), never from the project's: they pin their own oslo and SQLAlchemy
releases.  Each server is one uwsgi master with its workers in a process
group of their own, so that a stop (or a kill) reaches all of them.
"""

import contextlib
import fcntl
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request

from dtn_migrate.common import polling

BOOTSTRAP = "tools/bootstrap-clouds.sh"
_PORTS_LOCK = threading.Lock()
_PORTS_GIVEN = set()


class DevcloudError(RuntimeError):
    """The root of the dev clouds' errors."""


class CloudsNotInstalled(DevcloudError):
    """The servers' virtualenv or one of its programs is missing."""


class ServerFailed(DevcloudError):
    """A server exited or did not answer in time."""


class ImageFailed(DevcloudError):
    """An image did not become what it was waited for."""


def clouds_venv():
    """The servers' virtualenv: $DTN_CLOUDS_VENV or the bootstrap default."""
    path = os.environ.get("DTN_CLOUDS_VENV")
    if path:
        return path
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(
        os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "dtn-migrate", "venv-clouds")


def executable(name):
    """Path of NAME in the servers' venv, or CloudsNotInstalled."""
    path = os.path.join(clouds_venv(), "bin", name)
    if not os.access(path, os.X_OK):
        raise CloudsNotInstalled(
            "%s not found: run %s first (it creates %s; set DTN_CLOUDS_VENV "
            "to use another place)" % (path, BOOTSTRAP, clouds_venv()))
    return path


def available():
    """(True, '') when the dev clouds can start, else (False, why)."""
    try:
        for name in ("uwsgi", "glance-manage", "keystone-manage"):
            executable(name)
    except CloudsNotInstalled as e:
        return False, str(e)
    return True, ""


def _port_free(port, host="127.0.0.1"):
    """Nobody listens on PORT (TIME_WAIT leftovers do not count: uwsgi
    binds with SO_REUSEADDR).
    """
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host="127.0.0.1"):
    """A port nobody listens on, never handed out twice by this process."""
    with _PORTS_LOCK:
        for _ in range(100):
            with socket.socket() as s:
                s.bind((host, 0))
                port = s.getsockname()[1]
            if port not in _PORTS_GIVEN:
                _PORTS_GIVEN.add(port)
                return port
    raise DevcloudError("no free port")


def wait_port_free(port, timeout=30, host="127.0.0.1"):
    if not polling.poll(lambda: _port_free(port, host), timeout):
        raise ServerFailed("port %d still busy after %ss" % (port, timeout))


def write_ini(path, sections):
    """Write {section: {key: value}}; lists become [a,b] (oslo bounds)."""
    with open(path, "w") as f:
        for section, values in sections.items():
            f.write("[%s]\n" % section)
            for key, value in values.items():
                if isinstance(value, (list, tuple)):
                    value = "[%s]" % ",".join(str(v) for v in value)
                elif isinstance(value, bool):
                    value = "true" if value else "false"
                f.write("%s = %s\n" % (key, value))
            f.write("\n")


def merge(sections, extra):
    """Overlay {section: {key: value}} EXTRA on SECTIONS (in place)."""
    for section, values in (extra or {}).items():
        sections.setdefault(section, {}).update(values)
    return sections


def cached_template(name, build, target):
    """Copy a file built once per servers' venv (a db_sync'ed database).

    BUILD(path) makes the file; the cache is keyed by the venv's install
    stamp, and a lock keeps two processes from building it at once.
    """
    venv = clouds_venv()
    try:
        with open(os.path.join(venv, ".dtn-clouds-deps"), "rb") as f:
            stamp = f.read()
    except OSError:
        stamp = b""
    key = hashlib.sha256(stamp).hexdigest()[:12]
    cache = os.path.join(venv, "var", "devcloud-cache")
    os.makedirs(cache, exist_ok=True)
    path = os.path.join(cache, "%s-%s" % (name, key))
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(path):
            work = tempfile.mkdtemp(prefix=name + ".", dir=cache)
            try:
                build(os.path.join(work, name))
                os.rename(os.path.join(work, name), path)
            finally:
                shutil.rmtree(work, ignore_errors=True)
    shutil.copyfile(path, target)


def run(cmd, log, env=None, timeout=120):
    """Run a manage command, its output appended to LOG; raise on failure."""
    with open(log, "ab") as out:
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT,
                              env=env, timeout=timeout)
    if proc.returncode:
        raise ServerFailed("%s failed (exit %d), see %s" % (
            " ".join(cmd), proc.returncode, log))


def http_status(url, timeout=2, headers=None):
    """The HTTP status of GET URL, or None when nothing answers."""
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code
    except (OSError, ValueError):
        return None


def proc_stats():
    """(pid, fields) of every process: the fields of /proc/PID/stat after
    its ``(comm)`` (which may hold spaces): state, ppid, pgrp, ...
    """
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                stat = f.read()
        except OSError:
            continue
        yield int(pid), stat[stat.rfind(")") + 2:].split()


def _group_alive(pgid):
    return any(int(fields[2]) == pgid and fields[0] not in ("Z", "X")
               for _pid, fields in proc_stats())


class UwsgiServer:
    """One WSGI application under uwsgi, on 127.0.0.1:port.

    Subclasses fill in ``module``, ``env`` and ``ready_path`` and write
    their configuration in ``_configure()``.
    """

    module = None
    # SIGTERM when the thread that started the server ends (a test runner
    # killed before its cleanups): Linux's parent-death signal, set with
    # setpriv(1).  Set False to start servers from a short-lived thread.
    die_with_parent = True
    ready_path = "/"
    ready_status = (200,)
    kind = "server"

    def __init__(self, workdir, name, port=None, processes=1, threads=4):
        self.name = name
        self.dir = os.path.join(workdir, "%s-%s" % (self.kind, name))
        os.makedirs(self.dir, exist_ok=True)
        self._auto_port = port is None
        self.port = port or free_port()
        self.processes = processes
        self.threads = threads
        self.proc = None
        self.env = {}
        self.pythonpath = []    # directories added to the app's sys.path
        self.home = None        # the app's venv (default: the servers')
        self.pyargv = []        # the app's sys.argv[1:]
        self.uwsgi_log = os.path.join(self.dir, "uwsgi.log")
        self.start_seconds = None

    @property
    def endpoint(self):
        """Base URL, e.g. http://127.0.0.1:PORT."""
        return "http://127.0.0.1:%d" % self.port

    url = endpoint

    def _configure(self):
        raise NotImplementedError

    def _write_uwsgi(self):
        path = os.path.join(self.dir, "uwsgi.ini")
        lines = [
            "[uwsgi]",
            "http-socket = 127.0.0.1:%d" % self.port,
            "module = %s" % self.module,
            "home = %s" % (self.home or clouds_venv()),
            "master = true",
            "processes = %d" % self.processes,
            "threads = %d" % self.threads,
            "enable-threads = true",
            "lazy-apps = true",
            "need-app = true",
            "die-on-term = true",
            "no-orphans = true",
            # A graceful stop waits at most 5 s for busy workers (not 60).
            "worker-reload-mercy = 5",
            "reload-mercy = 5",
            "buffer-size = 65535",
            "chunked-input-limit = 16777216",
            # Like Apache's default Timeout (60 s), not uwsgi's 4 s: a
            # streamed upload may pause while its data is still arriving.
            "socket-timeout = 60",
            # http-socket drops kept-alive connections between requests.
            "add-header = Connection: close",
            "logto = %s" % self.uwsgi_log,
        ]
        for key, value in sorted(self.env.items()):
            lines.append("env = %s=%s" % (key, value))
        for directory in self.pythonpath:
            lines.append("pythonpath = %s" % directory)
        if self.pyargv:
            lines.append("pyargv = %s" % " ".join(self.pyargv))
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        return path

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout=60):
        """Write the configuration (data is kept across restarts), launch
        uwsgi and wait until it answers; ``start_seconds`` tells how long
        it took.
        """
        if self.running:
            return self
        if self.die_with_parent and \
                threading.current_thread() is not threading.main_thread():
            # setpriv --pdeathsig follows the thread that started the
            # server: it would be killed when that thread ends.
            raise ServerFailed("%s: start servers from the main thread "
                               "(or set die_with_parent = False)" % self.dir)
        t0 = time.monotonic()
        self._configure()
        for attempt in range(3):
            wait_port_free(self.port)
            ini = self._write_uwsgi()
            cmd = [executable("uwsgi"), "--ini", ini]
            setpriv = shutil.which("setpriv")
            if self.die_with_parent and setpriv:
                cmd = [setpriv, "--pdeathsig", "TERM"] + cmd
            with open(self.uwsgi_log, "ab") as log:
                self.proc = subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL, stdout=log,
                    stderr=subprocess.STDOUT, start_new_session=True)
            try:
                self.wait_ready(timeout)
                break
            except ServerFailed:
                lost_port = "Address already in use" in self._tail(
                    self.uwsgi_log)
                self.stop(kill=True)
                if not (lost_port and self._auto_port and attempt < 2):
                    raise
                self.port = free_port()
                self._configure()
        self._started()
        self.start_seconds = time.monotonic() - t0
        return self

    def _started(self):
        """Hook run once the server answers."""

    def wait_ready(self, timeout=60):
        """Wait until the server answers ``ready_path``."""
        url = self.endpoint + self.ready_path

        def ready():
            if not self.running:
                raise ServerFailed("%s %s exited: %s" % (
                    self.kind, self.name, self._tail(self.uwsgi_log)))
            return http_status(url) in self.ready_status

        if not polling.poll(ready, timeout):
            raise ServerFailed("%s %s not ready after %ss: %s" % (
                self.kind, self.name, timeout, self._tail(self.uwsgi_log)))

    def stop(self, kill=False, timeout=15):
        """Stop master and workers: SIGTERM, or SIGKILL at once if KILL."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None and not kill:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        # Workers (and anything they forked) share the master's group.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
        self._wait_group_gone(proc.pid)
        wait_port_free(self.port)

    @staticmethod
    def _wait_group_gone(pgid, timeout=10):
        """Wait until no process of group PGID runs (zombies left to init
        to reap do not count).
        """
        polling.poll(lambda: not _group_alive(pgid), timeout, 0.05)

    def close(self):
        """Kill (nothing of it is kept, so no need to wait for a graceful
        stop) and remove the server's directory (kept if $DTN_DEVCLOUD_KEEP
        is set, for post-mortems).
        """
        self.stop(kill=True)
        if not os.environ.get("DTN_DEVCLOUD_KEEP"):
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    @staticmethod
    def _tail(path, size=4000):
        try:
            with open(path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - size))
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def _logs(self):
        return [self.uwsgi_log]

    def log_text(self):
        """Everything the server logged so far."""
        out = []
        for path in self._logs():
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    out.append("==> %s <==\n%s" % (path, f.read()))
            except OSError:
                pass
        return "\n".join(out)
