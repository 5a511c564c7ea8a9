"""One engine of a cloud at a time runs the cloud's timers (protection
scans, recovery-point grades, mirror deletions): the leader of a tooz
group, elected by the coordination backend (``[coordination]
backend_url``; by default the jobboard's own ZooKeeper or Redis).

A leader that dies leaves the group with its session (ZooKeeper) or its
expired heartbeat (Redis), and another member is elected.  Leadership
is checked at each use: with ZooKeeper the group's leader is asked;
with Redis, which cannot say, a member leads from its election until
its coordinator stops (a paused leader may act once more after another
was elected: what it runs is idempotent).
"""

import contextlib
import threading

from oslo_log import log as logging
from tooz import coordination

LOG = logging.getLogger(__name__)

#: The group of a cloud's engines.
GROUP = b"dtn-migrate-engines"
#: Seconds between runs of the election's watchers.
WATCH_INTERVAL = 0.5


class LockUnavailable(Exception):
    """A lock of the engines was not had in time (held by another engine
    that long, or a backend that does not answer).
    """


def backend_url(conf):
    """The tooz URL: ``[coordination] backend_url``, or one made from
    the jobboard's ``[task_flow]`` backend.
    """
    if conf.coordination.backend_url:
        return conf.coordination.backend_url
    group = conf.task_flow
    timeout = int(max(1, round(group.jobboard_zookeeper_session_timeout)))
    if group.jobboard_backend_driver == "redis_taskflow_driver":
        port = group.jobboard_backend_port or 6379
        auth = ":%s@" % group.jobboard_backend_password \
            if group.jobboard_backend_password else ""
        return "redis://%s%s:%d?timeout=%d" % (
            auth, group.jobboard_backend_hosts[0], port,
            group.jobboard_expiration_time)
    port = group.jobboard_backend_port or 2181
    return "zookeeper://%s?timeout=%d" % (
        ",".join("%s:%d" % (h, port) for h in group.jobboard_backend_hosts),
        timeout)


class Leadership:
    """This engine's membership of the group; :meth:`is_leader`."""

    def __init__(self, url, member_id, group=GROUP):
        self.member_id = member_id.encode() \
            if isinstance(member_id, str) else member_id
        self.group = group
        self.coordinator = coordination.get_coordinator(url, self.member_id)
        self._elected = threading.Event()
        self._stop = threading.Event()
        self._thread = None

    def start(self):
        self.coordinator.start(start_heart=True)
        try:
            self.coordinator.join_group_create(self.group)
        except coordination.MemberAlreadyExist:
            pass
        self.coordinator.watch_elected_as_leader(self.group, self._on_elected)
        self._thread = threading.Thread(target=self._watch,
                                        name="leader-election", daemon=True)
        self._thread.start()

    def _on_elected(self, event):
        LOG.info("%s leads the cloud's engines", self.member_id.decode())
        self._elected.set()

    def _watch(self):
        while not self._stop.wait(WATCH_INTERVAL):
            try:
                self.coordinator.run_watchers()
            except coordination.ToozError as exc:
                LOG.warning("leader election: %s", exc)

    def is_leader(self):
        if not self._elected.is_set():
            return False
        try:
            leader = self.coordinator.get_leader(self.group).get(timeout=5)
        except NotImplementedError:
            return True
        except Exception as exc:  # noqa: B902 - a backend's own errors
            # tooz passes some of the backend's errors on (a ZooKeeper
            # session that expired): no leader is known then.
            LOG.warning("leader election: the leader is not known: %s", exc)
            return False
        if leader != self.member_id:
            self._elected.clear()
            return False
        return True

    @contextlib.contextmanager
    def holding(self, name, timeout=10.0):
        """Hold the engines' lock ``name`` (one engine at a time holds
        it), waiting at most ``timeout`` seconds for it: LockUnavailable
        else.
        """
        lock = self.coordinator.get_lock(b"dtn-migrate-" + name.encode())
        try:
            held = lock.acquire(blocking=timeout)
        except Exception as exc:  # noqa: B902 - a backend's own errors
            raise LockUnavailable("lock %s: %s" % (name, exc)) from exc
        if not held:
            raise LockUnavailable("lock %s: held by another engine for "
                                  "%.0f s" % (name, timeout))
        try:
            yield
        finally:
            try:
                lock.release()
            except Exception as exc:  # noqa: B902 - it expires by itself
                LOG.warning("lock %s not released: %s", name, exc)

    def stop(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        try:
            self.coordinator.stop()
        except coordination.ToozError as exc:
            LOG.warning("leaving the engines' group: %s", exc)
