"""Private ZooKeeper and Redis servers, the jobboard backends of
active/active engines, that a test may kill, pause and restart (as
:mod:`devcloud.dbserver`'s databases): each on a port of its own with
its data under a directory of its own.

ZooKeeper is Debian's ``zookeeper`` package (Java), one standalone
server; it answers the four-letter commands TaskFlow and the tests use
(``ruok``, ``srvr``, ``envi``).  Redis is the machine's ``redis-server``
binary, keeping nothing on disk: a restart loses every job, as the
machine's own does.
"""

import os
import socket

from devcloud import dbserver

ZOOKEEPER_JAR = "/usr/share/java/zookeeper.jar"
ZOOKEEPER_CONF = "/etc/zookeeper/conf"
JAVA = "/usr/bin/java"
REDIS_SERVER = "/usr/bin/redis-server"
#: ZooKeeper's tick (ms): sessions last 2 to 20 ticks.
TICK_MS = 500


def available(kind):
    """(ok, why not) for ``kind``: "zookeeper" or "redis"."""
    if kind == "zookeeper":
        for path, package in ((ZOOKEEPER_JAR, "zookeeper"),
                              (JAVA, "default-jre-headless")):
            if not os.path.exists(path):
                return False, "%s is not installed (%s)" % (package, path)
        return True, ""
    if not os.path.exists(REDIS_SERVER):
        return False, "redis-server is not installed"
    return True, ""


def _ask(port, command):
    """What the server on ``port`` answers to ``command`` (bytes)."""
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.sendall(command)
        s.shutdown(socket.SHUT_WR)
        out = b""
        while True:
            data = s.recv(4096)
            if not data:
                return out
            out += data


class _Server(dbserver._Server):
    user = "root"

    def _answer(self):
        if self.proc.poll() is not None:
            raise dbserver.ExitedError("exited with %s"
                                       % self.proc.returncode)
        self.ping()

    def pause(self):
        """SIGSTOP of the server: its clients' requests hang."""
        self.proc.send_signal(19)

    def resume(self):
        self.proc.send_signal(18)

    def connect(self):
        raise NotImplementedError("not a database server")


class ZooKeeper(_Server):
    """A standalone ZooKeeper server; ``hosts`` is its address."""

    def setup(self):
        os.makedirs(self.data)
        self.config = os.path.join(self.dir, "zoo.cfg")
        with open(self.config, "w") as f:
            f.write("\n".join((
                "tickTime=%d" % TICK_MS,
                "minSessionTimeout=%d" % (2 * TICK_MS),
                "maxSessionTimeout=%d" % (60 * TICK_MS),
                "dataDir=%s" % self.data,
                "clientPort=%d" % self.port,
                "clientPortAddress=127.0.0.1",
                "admin.enableServer=false",
                "4lw.commands.whitelist=ruok,srvr,envi,cons",
                "")))

    def _argv(self):
        return [JAVA, "-Xmx256m", "-Dzookeeper.log.dir=%s" % self.dir,
                "-cp", "%s:%s" % (ZOOKEEPER_CONF, ZOOKEEPER_JAR),
                "org.apache.zookeeper.server.ZooKeeperServerMain",
                self.config]

    @property
    def hosts(self):
        return "127.0.0.1:%d" % self.port

    def ping(self):
        # ruok answers before the server serves: srvr tells its mode.
        if b"Mode: " not in _ask(self.port, b"srvr"):
            raise AssertionError("not serving yet")

    def sessions(self):
        """The server's client connections (``cons``), one per line."""
        return [line.strip() for line in _ask(self.port, b"cons")
                .decode().splitlines() if line.strip()]


class Redis(_Server):
    """A Redis server that keeps nothing on disk."""

    def setup(self):
        os.makedirs(self.data)

    def _argv(self):
        return [REDIS_SERVER, "--port", str(self.port), "--bind",
                "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", self.data, "--protected-mode", "no"]

    def ping(self):
        if not _ask(self.port, b"PING\r\n").startswith(b"+PONG"):
            raise AssertionError("no PONG")
