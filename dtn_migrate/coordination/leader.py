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

import threading

from oslo_log import log as logging
from tooz import coordination

LOG = logging.getLogger(__name__)

#: The group of a cloud's engines.
GROUP = b"dtn-migrate-engines"
#: Seconds between runs of the election's watchers.
WATCH_INTERVAL = 0.5


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
        except coordination.ToozError as exc:
            LOG.warning("leader election: the leader is not known: %s", exc)
            return False
        if leader != self.member_id:
            self._elected.clear()
            return False
        return True

    def stop(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        try:
            self.coordinator.stop()
        except coordination.ToozError as exc:
            LOG.warning("leaving the engines' group: %s", exc)
