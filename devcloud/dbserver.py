"""Private MariaDB and PostgreSQL servers that a test may restart.

The machine's own servers (tools/bootstrap.sh) serve every test and
engineer at once: a test that restarts its database server runs one of
its own instead, on a free port with a data directory under the test's
work directory, started, killed and restarted at will (a few tenths of a
second each).  ``close()`` stops it for good and removes its files.
"""

import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from devcloud import _base

MARIADBD = "/usr/sbin/mariadbd"
#: What MariaDB and PostgreSQL log when their port is taken.
LOST_PORT = b"Address already in use"
MARIADB_INSTALL_DB = "mariadb-install-db"
PG_BIN = "/usr/lib/postgresql/%s/bin"


def _pg_bin():
    try:
        versions = sorted(os.listdir("/usr/lib/postgresql"))
    except OSError:
        return None
    for version in reversed(versions):
        path = PG_BIN % version
        if os.path.exists(os.path.join(path, "initdb")):
            return path
    return None


def available(kind):
    """(ok, why not)."""
    if os.geteuid() != 0:
        return False, "private database servers need root"
    if kind == "mariadb":
        if not os.path.exists(MARIADBD) or \
                shutil.which(MARIADB_INSTALL_DB) is None:
            return False, "mariadb-server is not installed"
    elif _pg_bin() is None:
        return False, "postgresql is not installed"
    return True, ""


def _stable_port():
    """A port free now and outside the kernel's ephemeral range, so that
    no outgoing connection (of this test's processes or any other) takes
    it while the server is down between a kill and its restart.
    """
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low = int(f.read().split()[0])
    for _ in range(200):
        port = random.randrange(max(1024, low - 12000), low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    return _base.free_port()


class ExitedError(Exception):
    """The server's process ended."""


def _wait(ready, what, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            ready()
            return
        except ExitedError as exc:
            raise AssertionError("%s: %s" % (what, exc))
        except Exception:  # noqa: B902 - not up yet, whatever it says
            time.sleep(0.05)
    raise AssertionError("%s not up in %d s" % (what, timeout))


class _Server:
    """Subclasses: ``setup()`` (the data directory), ``_argv()`` (the
    server's command), ``connect()`` (a DB-API connection) and ``url``.
    """

    user = url = None
    #: Whether the server has answered once (then it keeps its port).
    started = False

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="dtnm-db-")
        shutil.chown(self.dir, self.user)
        self.data = os.path.join(self.dir, "data")
        self.port = _stable_port()
        self.proc = None
        self.setup()

    def _run_as_user(self, argv):
        subprocess.run(["runuser", "-u", self.user, "--"] + argv,
                       check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, timeout=120)

    def start(self, attempts=5):
        """Start the server (again) and wait until it answers.  Until it
        has answered once, a port another process took meanwhile is
        given up for a new one; a restart keeps its port.
        """
        for attempt in range(attempts):
            path = os.path.join(self.dir, "server.log")
            mark = os.path.getsize(path) if os.path.exists(path) else 0
            log = open(path, "ab")
            self.proc = subprocess.Popen(self._argv(), stdout=log,
                                         stderr=subprocess.STDOUT,
                                         start_new_session=True)
            log.close()
            try:
                _wait(self._answer, "%s on port %d"
                      % (self.__class__.__name__, self.port))
                self.started = True
                return self
            except AssertionError as exc:
                with open(path, "rb") as f:
                    f.seek(mark)
                    lost = LOST_PORT in f.read()
                if self.started or not lost or attempt == attempts - 1:
                    raise AssertionError("%s; its log ends: %s"
                                         % (exc, self.log_tail()))
                self.proc.wait(30)      # it exited: the port is not ours
                self.proc = None
                self.port = _stable_port()

    def _answer(self):
        if self.proc.poll() is not None:
            raise ExitedError("exited with %s" % self.proc.returncode)
        self.connect().close()

    def log_tail(self, nbytes=2000):
        try:
            with open(os.path.join(self.dir, "server.log"), "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - nbytes))
                return f.read().decode("utf-8", "replace")
        except OSError as exc:
            return "(no log: %s)" % exc

    def kill(self):
        """kill -9 of the server (its process group): its clients see
        their connections die.
        """
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(30)

            def closed():
                try:
                    socket.create_connection(("127.0.0.1", self.port),
                                             timeout=1).close()
                except OSError:
                    return
                raise AssertionError("still listening")
            _wait(closed, "the end of port %d" % self.port)
        self.proc = None

    def restart(self, down=0.0):
        self.kill()
        time.sleep(down)
        return self.start()

    def close(self):
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def database(self, name):
        """A new database ``name``: its SQLAlchemy URL."""
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("CREATE DATABASE %s" % name)
        finally:
            conn.close()
        return self.url % {"port": self.port, "name": name}


class MariaDB(_Server):
    user = "mysql"
    url = "mysql+pymysql://root@127.0.0.1:%(port)d/%(name)s"

    def setup(self):
        self._run_as_user([MARIADB_INSTALL_DB, "--no-defaults",
                           "--datadir=%s" % self.data,
                           "--auth-root-authentication-method=normal",
                           "--skip-test-db"])

    def _argv(self):
        return [MARIADBD, "--no-defaults", "--user=%s" % self.user,
                "--datadir=%s" % self.data,
                "--socket=%s" % os.path.join(self.dir, "sock"),
                "--port=%d" % self.port, "--bind-address=127.0.0.1",
                "--skip-name-resolve", "--innodb-buffer-pool-size=16M",
                "--pid-file=%s" % os.path.join(self.dir, "pid")]

    def connect(self):
        import pymysql
        return pymysql.connect(host="127.0.0.1", port=self.port,
                               user="root", autocommit=True,
                               connect_timeout=5)


class PostgreSQL(_Server):
    user = "postgres"
    role = "dtnm"
    url = "postgresql+psycopg2://dtnm@127.0.0.1:%(port)d/%(name)s"

    def setup(self):
        self._run_as_user([os.path.join(_pg_bin(), "initdb"), "-D",
                           self.data, "-U", self.role, "--auth=trust",
                           "-N"])

    def start(self):
        # Left by a killed server, whose processes may linger as zombies
        # (nothing reaps them here) that PostgreSQL takes for live ones.
        for path in (os.path.join(self.data, "postmaster.pid"),
                     os.path.join(self.dir, ".s.PGSQL.%d.lock" % self.port)):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        return super().start()

    def _argv(self):
        return ["runuser", "-u", self.user, "--",
                os.path.join(_pg_bin(), "postgres"), "-D", self.data,
                "-p", str(self.port), "-k", self.dir,
                "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"]

    def connect(self):
        import psycopg2
        conn = psycopg2.connect(host="127.0.0.1", port=self.port,
                                user=self.role, dbname="postgres",
                                connect_timeout=5)
        conn.autocommit = True
        return conn
