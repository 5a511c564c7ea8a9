"""The jobboard's drivers: one per backend, loaded through stevedore by
the name ``[task_flow] jobboard_backend_driver`` gives (entry points
:data:`NAMESPACE`), each turning the ``[task_flow]`` options into the
configuration of TaskFlow's jobboard of that backend.

* ZooKeeper (production): a claim is an ephemeral node, gone with its
  owner's session (``jobboard_zookeeper_session_timeout``).  The
  ensemble must answer the ``envi`` four-letter command (its
  ``4lw.commands.whitelist``): TaskFlow reads the server's version so.
* Redis: a claim expires after ``jobboard_expiration_time`` seconds
  unless its owner extends it (:attr:`JobboardDriver.claim_expiry`; the
  conductor extends it every third of that).

Neither fences an owner that was partitioned away or paused past its
session: the migration's epoch does (``db.api.migration_claim``).
"""

import abc
import contextlib

from kazoo import client as kazoo_client
from oslo_log import log as logging
from stevedore import driver as stevedore_driver
from taskflow.jobs import backends as job_backends
from taskflow.utils import kazoo_utils

from dtn_migrate import exception

LOG = logging.getLogger(__name__)

#: The entry point namespace of the drivers.
NAMESPACE = "dtn_migrate.jobboard.drivers"


class JobboardDriver(metaclass=abc.ABCMeta):
    """A jobboard backend, configured from ``conf.task_flow``."""

    #: Seconds a claim lasts unless extended; None: as long as the
    #: owner's session.
    claim_expiry = None
    #: The backend's port when [task_flow] jobboard_backend_port is unset.
    default_port = None

    def __init__(self, conf):
        self.group = conf.task_flow

    @property
    def port(self):
        return self.group.jobboard_backend_port or self.default_port

    @property
    def name(self):
        return self.group.jobboard_backend_namespace

    @abc.abstractmethod
    def board_conf(self):
        """TaskFlow's configuration of the jobboard (``board`` names
        its backend).
        """

    def job_board(self, persistence, on_lost=None):
        """The jobboard, connected; a context manager that closes it.
        ``persistence``: the TaskFlow persistence backend that holds the
        jobs' logbooks.  ``on_lost(why)`` is called when the backend
        drops this process's session, and with it every claim it held
        (ZooKeeper; a Redis claim is checked as it is extended).
        """
        return job_backends.backend(self.name, self.board_conf(),
                                    persistence=persistence)

    def describe(self):
        """Where the jobboard is, for the logs (no secrets)."""
        conf = self.board_conf()
        return "%s jobboard %s at %s" % (
            conf["board"], self.name,
            conf.get("hosts") or "%s:%s" % (conf["host"], conf["port"]))


class ZookeeperDriver(JobboardDriver):

    default_port = 2181

    def board_conf(self):
        port = self.port
        return {"board": "zookeeper",
                "hosts": ",".join("%s:%s" % (host, port) for host in
                                  self.group.jobboard_backend_hosts),
                "path": "/" + self.name.strip("/"),
                "timeout": self.group.jobboard_zookeeper_session_timeout}

    @contextlib.contextmanager
    def job_board(self, persistence, on_lost=None):
        conf = self.board_conf()
        client = kazoo_utils.make_client(conf)
        if on_lost is not None:
            def listener(state):
                # Called on kazoo's thread: on_lost only sets events.
                if state == kazoo_client.KazooState.LOST:
                    on_lost("its ZooKeeper session expired")
            client.add_listener(listener)
        try:
            with job_backends.backend(self.name, conf,
                                      persistence=persistence,
                                      client=client) as board:
                yield board
        finally:
            kazoo_utils.finalize_client(client)


class RedisDriver(JobboardDriver):

    default_port = 6379

    def __init__(self, conf):
        super().__init__(conf)
        self.claim_expiry = float(self.group.jobboard_expiration_time)

    def board_conf(self):
        hosts = self.group.jobboard_backend_hosts
        out = {"board": "redis", "host": hosts[0],
               "port": self.port, "namespace": self.name}
        if self.group.jobboard_redis_sentinel:
            out["sentinel"] = self.group.jobboard_redis_sentinel
            out["sentinel_fallbacks"] = [
                "%s:%s" % (host, self.port) for host in hosts[1:]]
        for key in ("username", "password"):
            value = getattr(self.group, "jobboard_backend_%s" % key)
            if value is not None:
                out[key] = value
        return out


def get_driver(conf):
    """The driver ``[task_flow] jobboard_backend_driver`` names
    (ConfigError for one that is not installed).
    """
    name = conf.task_flow.jobboard_backend_driver
    try:
        return stevedore_driver.DriverManager(
            NAMESPACE, name, invoke_on_load=True,
            invoke_args=(conf,)).driver
    except (RuntimeError, ImportError) as exc:
        # stevedore's NoMatches is a RuntimeError.
        raise exception.ConfigError(
            reason="[task_flow] jobboard_backend_driver %s: %s"
                   % (name, exc))
