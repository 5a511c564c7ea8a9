"""dtn-migrate's own services for local clouds: RabbitMQ vhosts and
``dtn-migrate-agent`` processes, each with its own config file, log,
staging root and state directory, optionally inside a network
namespace of :class:`devcloud.netns.Lab`.

The functional tests (``tests/functional``), the benchmarks and the
demo build their clouds from these; nothing here depends on a test
framework.
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

import oslo_messaging as messaging

from devcloud import _base as devcloud_base
from dtn_migrate import conf as dtn_conf
from dtn_migrate import rpc

VENV_BIN = os.path.dirname(sys.executable)
AGENT = os.path.join(VENV_BIN, "dtn-migrate-agent")


def data_root():
    """tmpfs when it has room (fast, and the tests move GiBs)."""
    override = os.environ.get("DTN_TEST_DIR")
    if override:
        return override
    try:
        st = os.statvfs("/dev/shm")
        if st.f_bavail * st.f_frsize > 10 << 30:
            return "/dev/shm"
    except OSError:
        pass
    return tempfile.gettempdir()


#: A server that lost the port chosen for it says so.
LOST_PORT = "Address already in use"

#: A port free now, never handed out twice by this process.  Another
#: process may still take it before the server binds it: servers that
#: bind their port themselves report it (port 0), the others are started
#: through :func:`start_agents` (or ``devcloud`` servers' own retries),
#: which choose again when the port was lost.
free_port = devcloud_base.free_port


def rabbitmqctl(*args):
    """Run ``rabbitmqctl -q ARGS``; its standard output."""
    return subprocess.run(["rabbitmqctl", "-q"] + list(args), check=True,
                          capture_output=True, text=True,
                          timeout=120).stdout


class Broker:
    """A private vhost on the machine's RabbitMQ."""

    def __init__(self):
        self.vhost = "dtnm-test-%s" % uuid.uuid4().hex[:8]
        self._ctl("add_vhost", self.vhost)
        try:
            self._ctl("set_permissions", "-p", self.vhost, "guest", ".*",
                      ".*", ".*")
        except BaseException:
            self.delete()
            raise

    @staticmethod
    def available():
        try:
            socket.create_connection(("127.0.0.1", 5672), timeout=2).close()
        except OSError:
            return False, "RabbitMQ is not running on 127.0.0.1:5672"
        if shutil.which("rabbitmqctl") is None:
            return False, "rabbitmqctl is not installed"
        return True, ""

    @staticmethod
    def _ctl(*args):
        subprocess.run(["rabbitmqctl", "-q"] + list(args), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       timeout=60)

    def url(self, host="127.0.0.1"):
        return "rabbit://guest:guest@%s:5672/%s" % (host, self.vhost)

    def delete(self):
        try:
            self._ctl("delete_vhost", self.vhost)
        except (subprocess.SubprocessError, OSError):
            pass


class ServiceProcess:
    """A dtn-migrate service process with its own config and log file;
    subclasses set ``name``, ``dir``, ``conf``, ``log`` and ``command``.
    """

    command = None
    lab = ns = None
    proc = None

    def start(self):
        argv = [self.command, "--config-file", self.conf]
        stdout = os.path.join(self.dir, "stdout.log")
        self._marks = {path: _size(path) for path in (self.log, stdout)}
        out = open(stdout, "ab")
        if self.lab is not None:
            self.proc = self.lab.popen(self.ns, argv, stdout=out,
                                       stderr=subprocess.STDOUT)
        else:
            self.proc = subprocess.Popen(argv, stdout=out,
                                         stderr=subprocess.STDOUT,
                                         start_new_session=True)
        out.close()
        return self

    def wait_ready_with(self, ping, timeout=60):
        """Call ``ping()`` until it answers; fail if the process exits."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError("%s exited with %s:\n%s" % (
                    self.name, self.proc.returncode, self.tail()))
            try:
                return ping()
            except messaging.MessagingTimeout:
                pass
        raise AssertionError("%s not ready in %d s:\n%s"
                             % (self.name, timeout, self.tail()))

    def kill9(self):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def discard(self):
        """End the process at a test's end: kill -9.  No test checks a
        clean stop there (those that do call stop()), and a clean stop
        waits seconds for the polls of its message bus's consumers.
        """
        self.kill9()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill9()

    def lost_port(self):
        """True when the process, since its last start, failed to bind
        its port because another process had taken it.
        """
        for path, mark in getattr(self, "_marks", {}).items():
            try:
                with open(path, "rb") as f:
                    f.seek(mark)
                    if LOST_PORT.encode() in f.read():
                        return True
            except OSError:
                pass
        return False

    def tail(self, n=60):
        try:
            with open(self.log) as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return "(no log)"

    def log_text(self):
        try:
            with open(self.log) as f:
                return f.read()
        except OSError:
            return ""

    def problems(self, n=400):
        """The last ``n`` warnings and errors of the log, each with the
        traceback that follows it: the cause of a failure may be older
        than the log's tail.
        """
        lines, keep = [], False
        for line in self.log_text().splitlines(keepends=True):
            if _LOG_LINE.match(line):
                keep = _PROBLEM.search(line) is not None
            if keep:
                lines.append(line)
        return "".join(lines[-n:]) or "(none)"


_LOG_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
_PROBLEM = re.compile(r" (WARNING|ERROR|CRITICAL) ")


#: Config files of the test services.
write_conf = devcloud_base.write_ini


class Agent(ServiceProcess):
    """One dtn-migrate-agent process."""

    command = AGENT

    def __init__(self, workdir, name, key, transport_url, peers,
                 listen_address="127.0.0.1", port=None, lab=None, ns=None,
                 transfer=None, extra=None, staging=None):
        self.name = name
        self.dir = os.path.join(workdir, name)
        self.staging = staging or os.path.join(self.dir, "staging")
        self.state = os.path.join(self.dir, "state")
        for d in (self.staging, self.state):
            os.makedirs(d, exist_ok=True)
        self.port = port or free_port()
        self.listen_address = listen_address
        self.lab, self.ns = lab, ns
        self.conf = os.path.join(self.dir, "agent.conf")
        self.log = os.path.join(self.dir, "agent.log")
        self.key, self.transport_url = key, transport_url
        #: {peer name: (address, port)} of this agent's configuration.
        self.peers = dict(peers)
        self.transfer = dict(transfer or {})
        self.extra = extra or {}
        self.configure()
        self.proc = None

    def configure(self):
        """Write the configuration for the current port and peers."""
        sections = {
            "DEFAULT": {"host": self.name,
                        "transport_url": self.transport_url,
                        "log_file": self.log, "debug": "true"},
            "agent": {"listen_address": self.listen_address,
                      "listen_port": self.port, "staging_root": self.staging,
                      "state_dir": self.state,
                      "peers": ",".join(sorted(self.peers))},
            "transfer": dict(self.transfer),
        }
        for peer, (addr, port) in self.peers.items():
            # These agents receive operator transfers of files of any
            # name; a test of the default (a migration's two files, as
            # devcloud's agents) sets it back through ``extra``.
            sections["peer:%s" % peer] = {"address": addr, "port": port,
                                          "key": self.key,
                                          "incoming_names": "any"}
        for section, values in self.extra.items():
            sections.setdefault(section, {}).update(values)
        write_conf(self.conf, sections)

    def wait_ready(self, api, timeout=60):
        return self.wait_ready_with(lambda: api.ping({}, self.name),
                                    timeout)


def _size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def start_agents(agents, ready, relays=(), attempts=5):
    """Start AGENTS (whose configurations may name each other's ports)
    and wait until ``ready(agent)`` answers for each.  An agent that lost
    its port to another process between the choice of the port and its
    bind gets a new one: every configuration that named the old port
    (and every relay of RELAYS forwarding to it) follows, and all of them
    start again.
    """
    for attempt in range(attempts):
        for a in agents:
            a.start()
        try:
            for a in agents:
                ready(a)
            return
        except AssertionError:
            lost = [a for a in agents if a.lost_port()]
            if not lost or attempt == attempts - 1:
                raise
        for a in agents:
            a.kill9()
        for a in lost:
            old, a.port = a.port, free_port()
            for other in agents:
                other.peers.update({
                    name: (addr, a.port)
                    for name, (addr, port) in other.peers.items()
                    if name == a.name and port == old})
            for r in relays:
                if r.upstream[1] == old:
                    r.upstream = (r.upstream[0], a.port)
        for a in agents:
            a.configure()


#: Whether this process parsed dtn-migrate's global configuration for
#: its RPC clients, and the URL of ``rpc.TRANSPORT`` when it set one.
_rpc = {"url": None, "parsed": False}


def rpc_conf():
    """dtn-migrate's global CONF, parsed once for RPC clients of this
    process (oslo.messaging's tracing options exist only there).
    """
    conf = dtn_conf.CONF
    if not _rpc["parsed"]:
        messaging.set_transport_defaults(
            control_exchange=rpc.CONTROL_EXCHANGE)
        conf([], project="dtn-migrate", default_config_files=[])
        _rpc["parsed"] = True
    return conf


def log_details(case, proc, lines=200):
    """When ``case`` (a test case, or what stands in for one) fails,
    attach the last ``lines`` of ``proc``'s log and its warnings and
    errors.
    """
    def attach(exc_info):
        from testtools import content
        case.addDetail("log-%s" % proc.name,
                       content.text_content(proc.tail(lines)))
        case.addDetail("problems-%s" % proc.name,
                       content.text_content(proc.problems()))
    case.addOnException(attach)
