"""Peer DTNs from the [agent] peers list and their [peer:<name>] sections,
and their health as this DTN sees it.
"""

import concurrent.futures
import datetime
import os
import socket
import stat
import struct
import threading
import time

from oslo_config import cfg as oslo_cfg
from oslo_log import log as logging

from dtn_migrate.common import staged
from dtn_migrate.conf import peer as peer_conf
from dtn_migrate import exception
from dtn_migrate.transfer import errors
from dtn_migrate.transfer import paths
from dtn_migrate.transfer.sink import admission
from dtn_migrate.transfer.sink import quota as sinkquota
from dtn_migrate.transfer.source import transfer as source
from dtn_migrate.transfer.wire import auth
from dtn_migrate.transfer.wire import protocol as P

LOG = logging.getLogger(__name__)

#: tcpi_rtt of Linux's struct tcp_info (linux/tcp.h): the connection's
#: smoothed round-trip time in microseconds, at byte offset 68.
_TCPI_RTT = struct.Struct("=68xI")
#: Longest a health request waits for a probe beyond its timeout.
_PROBE_MARGIN = 2.0


class PeerRegistry:
    """Keys and addresses of this DTN's peerings."""

    def __init__(self, conf):
        self.conf = conf
        self._peers = {}
        for name in conf.agent.peers:
            group = conf[peer_conf.group_name(name)]
            try:
                key = auth.load_key(text=group.key, path=group.key_file)
            except (OSError, ValueError) as exc:
                raise exception.ConfigError(
                    reason="[peer:%s] key: %s" % (name, exc))
            if key is None:
                raise exception.ConfigError(
                    reason="[peer:%s] needs key or key_file" % name)
            for opt in ("incoming_names", "staging_quota_bytes",
                        "staging_quota_files"):
                try:
                    getattr(group, opt)
                except (oslo_cfg.Error, ValueError) as exc:
                    raise exception.ConfigError(
                        reason="[peer:%s] %s: %s" % (name, opt, exc))
            try:
                admission.networks(group.source_addresses or ())
            except ValueError as exc:
                raise exception.ConfigError(
                    reason="[peer:%s] source_addresses: %s" % (name, exc))
            self._peers[name] = (group, key)
        self._client_tls = None
        if any(g.tls for g, _ in self._peers.values()):
            if not conf.tls.ca_file:
                raise exception.ConfigError(
                    reason="a peer has tls = true but [tls] ca_file is unset")
            self._client_tls = auth.client_context(
                conf.tls.ca_file, conf.tls.cert_file, conf.tls.key_file)

    @property
    def names(self):
        return sorted(self._peers)

    def key(self, name):
        """Shared key of peer ``name`` (None if unknown): the sink's
        authentication lookup.
        """
        entry = self._peers.get(name)
        return entry[1] if entry else None

    def confinement(self, name):
        """How far the names of peer ``name``'s transfers may reach at
        this sink, and a migration's leaves (``SinkServer`` ``names``).
        """
        entry = self._peers.get(name)
        mode = entry[0].incoming_names if entry else paths.MIGRATION
        return mode, staged.LEAVES

    def quota(self, name):
        """The staging quota of peer ``name`` (``SinkServer`` ``quota``)."""
        entry = self._peers.get(name)
        if entry is None:
            return sinkquota.Limits(0, 0, "", "")
        group = peer_conf.group_name(name)
        return sinkquota.Limits(
            entry[0].staging_quota_bytes, entry[0].staging_quota_files,
            "[%s] staging_quota_bytes" % group,
            "[%s] staging_quota_files" % group)

    def source_addresses(self):
        """Every peer's source_addresses: the sink admits them first."""
        return [a for g, _ in self._peers.values()
                for a in g.source_addresses or ()]

    def require_tls(self, name):
        entry = self._peers.get(name)
        return bool(entry and entry[0].require_tls)

    def address(self, name):
        """(address, port) of peer ``name``; PeerNotFound if unknown."""
        entry = self._peers.get(name)
        if entry is None:
            raise self._not_found(name)
        return entry[0].address, entry[0].port

    def _not_found(self, name):
        return exception.PeerNotFound(peer=name,
                                      known=", ".join(self.names) or "none")

    def source_peer(self, name):
        """Where to send to peer ``name``."""
        entry = self._peers.get(name)
        if entry is None:
            raise self._not_found(name)
        group, key = entry
        if not group.address:
            raise exception.ConfigError(
                reason="[peer:%s] has no address" % name)
        return source.Peer(name, group.address, group.port, key,
                           self._client_tls if group.tls else None,
                           group.server_name)


#: Permission bits of a key file that let anyone but its owner read or
#: change it.
_KEY_FILE_OPEN_BITS = 0o066


def key_file_warning(path, option):
    """Why key file ``path`` (of ``option``, e.g. "[peer:east] key_file")
    is exposed, or None: readable (or writable) by its group or others.
    """
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return None     # reading it fails, and says so, elsewhere
    if not mode & _KEY_FILE_OPEN_BITS:
        return None
    return ("%s %s is readable by group or others (mode %04o): anyone who "
            "can read it can pose as either side of the peering; fix it "
            "with: chmod 600 %s" % (option, path, mode, path))


def check_key_files(conf):
    """Log a WARNING for each peering key file, and the TLS private key,
    that its group or others can read; returns the warnings.
    """
    files = [("[%s] key_file" % peer_conf.group_name(name),
              conf[peer_conf.group_name(name)].key_file)
             for name in conf.agent.peers]
    files.append(("[tls] key_file", conf.tls.key_file))
    warnings = [w for w in (key_file_warning(path, option)
                            for option, path in files if path) if w]
    for warning in warnings:
        LOG.warning("%s", warning)
    return warnings


def server_tls_context(conf):
    if not conf.tls.cert_file:
        return None
    return auth.server_context(conf.tls.cert_file, conf.tls.key_file,
                               conf.tls.ca_file)


def kernel_rtt_ms(sock):
    """The kernel's smoothed round-trip time of TCP socket ``sock`` in
    milliseconds (Linux TCP_INFO), or None where it cannot tell.
    """
    try:
        raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    except (AttributeError, OSError):
        return None
    if len(raw) < _TCPI_RTT.size:
        return None
    (usec,) = _TCPI_RTT.unpack_from(raw)
    return usec / 1000.0 if usec else None


def probe(target, local_name, cfg, timeout):
    """Open an authenticated connection to ``target`` (a source.Peer),
    the way a transfer starts: TCP (and TLS if the peering uses it),
    then the key proofs of both sides.  It asks for the import report of
    a random transfer id, which the sink answers with "none" without
    recording anything.  Returns the round-trip time in ms: the
    kernel's measure of the connection, or where it has none the time
    the TCP connect and handshake took.  Raises what
    ``source.open_connection`` raises.
    """
    connect = P.Connect(P.VERSION, P.VERSION, P.Role.REPORT, 0, P.Caps.NONE,
                        os.urandom(16), 0, cfg.object_size, 1,
                        os.urandom(32), local_name)
    started = time.monotonic()
    conn, _ack = source.open_connection(target, connect, cfg, timeout)
    try:
        elapsed_ms = (time.monotonic() - started) * 1000.0
        rtt = kernel_rtt_ms(conn.sock)
        msg = conn.recv(expect=(P.MsgType.REPORT, P.MsgType.ERROR))
    finally:
        conn.close()
    if isinstance(msg, P.Error):
        raise errors.PeerError("%s refused the request: %s"
                               % (target.name, msg.message), msg.code)
    return round(rtt if rtt is not None else elapsed_ms, 3)


def describe_failure(exc):
    """The operator's reading of a failed probe or report request."""
    if isinstance(exc, errors.AuthenticationError):
        return "authentication failed: %s" % exc
    if isinstance(exc, errors.PeerError) and exc.code == errors.Code.AUTH:
        return ("authentication failed: the peer refused this agent "
                "(check the peering's key and TLS settings on both "
                "sides): %s" % exc)
    if isinstance(exc, socket.timeout):
        return "no answer (timed out)"
    return str(exc) or exc.__class__.__name__


def iso_time(epoch):
    """``epoch`` (seconds) as the ISO 8601 UTC text of RPC replies."""
    if epoch is None:
        return None
    when = datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc)
    return when.replace(tzinfo=None).isoformat(timespec="microseconds")


class PeerHealth:
    """Reachability, round-trip time and last throughput of the peers.

    Probes (``probe``) run on a small pool of their own, at once for
    every peer asked for, each bounded by ``timeout``; a result is
    reused for ``ttl`` seconds and a probe under way is shared by every
    request for that peer, so an RPC server thread waits at most about
    ``timeout`` and peers are not flooded.  ``last_transfer(name)``
    gives ``(finished epoch, bytes/s)`` of the last transfer this agent
    completed to the peer, or None.
    """

    def __init__(self, registry, local_name, cfg, last_transfer=None,
                 timeout=3.0, ttl=5.0, workers=8):
        self.registry = registry
        self.local_name = local_name
        self.cfg = cfg
        self.last_transfer = last_transfer or (lambda name: None)
        self.timeout = timeout
        self.ttl = ttl
        self.lock = threading.Lock()
        self.cache = {}             # name -> (monotonic time, result)
        self.pending = {}           # name -> future of its probe
        self.pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix="peer-probe")

    @classmethod
    def from_conf(cls, conf, registry, local_name, cfg, last_transfer=None):
        return cls(registry, local_name, cfg, last_transfer,
                   timeout=conf.agent.peer_probe_timeout,
                   ttl=conf.agent.peer_health_cache)

    def check(self, name=None):
        """Health of peer ``name`` (a list of one), or of every peer."""
        if name is None:
            names = self.registry.names
        elif not isinstance(name, str) or not name:
            raise exception.InvalidInput(reason="peer must be a peer DTN "
                                                "name")
        else:
            self.registry.address(name)     # PeerNotFound
            names = [name]
        futures = [(n, self._result(n)) for n in names]
        return [self._entry(n, f) for n, f in futures]

    def close(self):
        self.pool.shutdown(wait=False)

    def _result(self, name):
        with self.lock:
            cached = self.cache.get(name)
            if cached is not None and \
                    time.monotonic() - cached[0] < self.ttl:
                done = concurrent.futures.Future()
                done.set_result(cached[1])
                return done
            future = self.pending.get(name)
            if future is None:
                future = self.pool.submit(self._probe, name)
                self.pending[name] = future
            return future

    def _probe(self, name):
        result = {"reachable": False, "rtt_ms": None, "error": None}
        try:
            result["rtt_ms"] = probe(self.registry.source_peer(name),
                                     self.local_name, self.cfg,
                                     self.timeout)
            result["reachable"] = True
        except exception.ConfigError as exc:
            result["error"] = exc.kwargs.get("reason") or str(exc)
        except (ConnectionError, OSError, errors.TransferError) as exc:
            result["error"] = describe_failure(exc)
        except Exception as exc:  # noqa: B902 - reported, never raised
            LOG.exception("health probe of peer %s failed", name)
            result["error"] = "probe failed: %s" % exc
        result["checked_at"] = time.time()
        if not result["reachable"]:
            LOG.info("peer %s is unreachable: %s", name, result["error"])
        with self.lock:
            self.cache[name] = (time.monotonic(), result)
            self.pending.pop(name, None)
        return result

    def _entry(self, name, future):
        try:
            result = future.result(self.timeout + _PROBE_MARGIN)
        except concurrent.futures.TimeoutError:
            result = {"reachable": False, "rtt_ms": None,
                      "checked_at": time.time(),
                      "error": "no answer within %.1f s" % self.timeout}
        address, port = self.registry.address(name)
        last = self.last_transfer(name)
        return {"name": name, "address": address, "port": port,
                "reachable": result["reachable"],
                "rtt_ms": result["rtt_ms"],
                "last_throughput": last[1] if last else None,
                "last_transfer_at": iso_time(last[0]) if last else None,
                "checked_at": iso_time(result["checked_at"]),
                "error": result["error"]}
