"""Latest-value pushes on a thread of their own.

Producers only mark a key as changed, with a getter of its latest
value, and never wait: one thread reads the latest value of each
changed key and sends it.  A key whose state changed is sent at once;
otherwise at most one send per key every ``interval`` seconds (the
latest value wins), so that a value changing many times a second costs
a few sends a second.

The agent pushes its events to its cloud's engine with it (RPC cast
``transfer_event``: watermarks of incoming files, the
status of outgoing transfers and the import reports of peers); the
engine's import pushes its progress reports to the agent with it.
"""

import collections
import threading
import time
import uuid

from oslo_log import log as logging

LOG = logging.getLogger(__name__)


def _state(value):
    return value.get("state") if isinstance(value, dict) else value


class EventPusher:
    def __init__(self, send, interval, clock=time.monotonic,
                 name="event-pusher"):
        """``send(kind, transfer_id, name, info, origin)`` sends one
        value; ``origin`` is [this pusher's run id, event number].
        ``name`` names the thread.
        """
        self.send = send
        self.run = uuid.uuid4().hex
        self.number = 0
        self.interval = interval
        self.clock = clock
        self.cond = threading.Condition()
        self.pending = collections.OrderedDict()   # key -> getter
        self.sent = {}              # key -> (when, state)
        self.closed = False
        self.casts = 0
        self.thread = None
        self.name = name

    def push(self, kind, transfer_id, name, getter):
        """``getter()`` returns the latest value of the key (called on
        the pusher's thread); never blocks.
        """
        with self.cond:
            if self.closed:
                return
            self.pending[(kind, transfer_id, name)] = getter
            if self.thread is None:
                self.thread = threading.Thread(target=self._loop,
                                               name=self.name,
                                               daemon=True)
                self.thread.start()
            self.cond.notify()

    def close(self):
        with self.cond:
            self.closed = True
            self.cond.notify()

    def _loop(self):
        while True:
            with self.cond:
                while not self.closed and not self.pending:
                    self.cond.wait()
                if self.closed:
                    return
                items = list(self.pending.items())
            wait = self._send_due(items)
            if wait:
                with self.cond:
                    if not self.closed:
                        self.cond.wait(wait)

    def _send_due(self, items):
        """Send the keys that are due; the seconds until the next one
        is (0: none left waiting).
        """
        next_due = None
        for k, getter in items:
            try:
                value = getter()
            except Exception:  # noqa: B902 - a getter never stops pushes
                LOG.exception("event %s: could not read its value", k)
                self._done(k, getter, None)
                continue
            now = self.clock()
            when, state = self.sent.get(k, (None, None))
            if when is not None and _state(value) == state and \
                    now - when < self.interval:
                left = self.interval - (now - when)
                next_due = left if next_due is None else min(next_due, left)
                continue
            self._done(k, getter, (now, _state(value)))
            self.number += 1
            try:
                self.send(k[0], k[1], k[2], value, [self.run, self.number])
                self.casts += 1
            except Exception as exc:  # noqa: B902 - the receiver asks later
                LOG.warning("could not push a %s event of transfer %s: %s",
                            k[0], k[1], exc)
        return next_due or 0

    def _done(self, k, getter, sent):
        with self.cond:
            if self.pending.get(k) is getter:
                del self.pending[k]
            if sent is not None:
                self.sent[k] = sent
                if len(self.sent) > 4096:
                    self.sent.pop(next(iter(self.sent)))
