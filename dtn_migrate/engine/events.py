"""Events this cloud's DTN agent pushes to the engine (RPC cast
``transfer_event``), and the board the engine's tasks wait on.

An event is the latest value of something the tasks used to poll the
agent for: the watermark of an incoming file (``watermark``, keyed by
transfer id and file name), the status of an outgoing transfer
(``transfer``) or the peer's import report of it (``report``).  Only the
latest value of each key counts.  A task reads the board while the value
is fresh and calls the agent itself (:meth:`EventBoard.fetch`) when
nothing arrived for a while: an engine that restarted, a lost cast, an
agent of an earlier release that pushes nothing.
"""

import collections
import threading
import time

#: Kinds of events.
WATERMARK = "watermark"
TRANSFER = "transfer"
REPORT = "report"
KINDS = (WATERMARK, TRANSFER, REPORT)

#: Keys kept at most (the oldest are forgotten first).
MAX_KEYS = 4096


def key(kind, transfer_id, name=None):
    return (kind, transfer_id, name)


class _Item:
    __slots__ = ("seq", "when", "value", "pushed", "origin")

    def __init__(self, seq, when, value, pushed, origin=None):
        self.seq = seq
        self.when = when
        self.value = value
        self.pushed = pushed
        self.origin = origin


def _older(item, origin):
    """``origin`` ((agent run, its event number)) is older than the
    pushed value ``item`` holds: the engine handles casts on several
    threads, so two events of one key may arrive out of order.
    """
    if item is None or item.origin is None or origin is None:
        return False
    return item.origin[0] == origin[0] and item.origin[1] >= origin[1]


class EventBoard:
    """Latest value per key, with a condition to wait for a new one."""

    def __init__(self, max_keys=MAX_KEYS, clock=time.monotonic):
        self.cond = threading.Condition(threading.RLock())
        self.items = collections.OrderedDict()
        self.max_keys = max_keys
        self.clock = clock
        self.seq = 0
        #: When an agent last pushed an event of each kind.
        self.last_push = {}
        self.pushed = 0
        #: Calls to the agent made because no fresh value was there.
        self.asked = 0

    def post(self, k, value, pushed=True, origin=None):
        """Store ``value`` as the latest of ``k`` and wake the waiters.
        ``pushed``: it came from the agent (not from the engine's own
        fallback call); ``origin``: the agent's (run, event number) of
        it, an older one than the value held is ignored (returns None).
        """
        with self.cond:
            if _older(self.items.get(k), origin):
                return None
            self.seq += 1
            now = self.clock()
            self.items[k] = _Item(self.seq, now, value, pushed, origin)
            self.items.move_to_end(k)
            while len(self.items) > self.max_keys:
                self.items.popitem(last=False)
            if pushed:
                self.last_push[k[0]] = now
                self.pushed += 1
            self.cond.notify_all()
            return self.seq

    def get(self, k):
        """``(seq, age in seconds, value)`` of ``k``, or None."""
        with self.cond:
            item = self.items.get(k)
            if item is None:
                return None
            return item.seq, self.clock() - item.when, item.value

    def seq_of(self, k):
        with self.cond:
            item = self.items.get(k)
            return 0 if item is None else item.seq

    def wake(self):
        """Wake every waiter (a migration stopped)."""
        with self.cond:
            self.cond.notify_all()

    def wait(self, k, after, timeout, stop=None):
        """Wait up to ``timeout`` seconds for a value of ``k`` newer than
        sequence ``after``, or for ``stop`` (an Event) to be set; True if
        there is a newer value.
        """
        deadline = self.clock() + timeout
        with self.cond:
            while True:
                item = self.items.get(k)
                if item is not None and item.seq > after:
                    return True
                if stop is not None and stop.is_set():
                    return False
                left = deadline - self.clock()
                if left <= 0:
                    return False
                self.cond.wait(left)

    def forget(self, transfer_id):
        """Drop every key of ``transfer_id``."""
        with self.cond:
            for k in [k for k in self.items if k[1] == transfer_id]:
                del self.items[k]

    def fetch(self, k, call, fresh_for):
        """The value of ``k``: the latest one if it is younger than
        ``fresh_for`` seconds, else ``call()``'s (stored as the latest,
        not as pushed).  ``call`` raising leaves the board as it was.
        """
        got = self.get(k)
        if got is not None and got[1] < fresh_for:
            return got[2]
        before = 0 if got is None else got[0]
        with self.cond:
            self.asked += 1
        value = call()
        with self.cond:
            # A value pushed while the call ran is newer: it stays.
            if self.seq_of(k) == before:
                self.post(k, value, pushed=False)
        return value

    def pushing(self, kind, within):
        """The agent pushed an event of ``kind`` in the last ``within``
        seconds.
        """
        with self.cond:
            when = self.last_push.get(kind)
            return when is not None and self.clock() - when < within


class Waiter:
    """Waits for the agent's next value of one key, for a reader that
    polls the board: each thread calls :meth:`mark` as it reads the
    value, and :meth:`wait` returns True once a newer one is there.
    """

    def __init__(self, board, k):
        self.board = board
        self.key = k
        self._local = threading.local()

    def mark(self):
        self._local.seen = self.board.seq_of(self.key)

    def wait(self, seconds):
        """True once the board holds a value newer than this thread's
        last :meth:`mark`, False after ``seconds``.
        """
        return self.board.wait(self.key, getattr(self._local, "seen", 0),
                               seconds)


def check_event(kind, transfer_id, name, info):
    """ValueError unless the arguments make an event."""
    if kind not in KINDS:
        raise ValueError("unknown event kind %r" % (kind,))
    if not isinstance(transfer_id, str) or len(transfer_id) != 32:
        raise ValueError("bad transfer id %r" % (transfer_id,))
    if name is not None and not isinstance(name, str):
        raise ValueError("bad file name %r" % (name,))
    if info is not None and not isinstance(info, dict):
        raise ValueError("event info must be a mapping or None")


def check_origin(origin):
    """``origin`` as a (run, number) tuple, or None; ValueError if it is
    something else.
    """
    if origin is None:
        return None
    if not isinstance(origin, (list, tuple)) or len(origin) != 2 or \
            not isinstance(origin[0], str) or \
            not isinstance(origin[1], int) or isinstance(origin[1], bool):
        raise ValueError("bad event origin %r" % (origin,))
    return tuple(origin)
