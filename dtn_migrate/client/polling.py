"""Polling the API until something ends, through its brief outages."""

import time

from dtn_migrate.client import exceptions
from dtn_migrate.common import polling

#: Answers that mean the API is briefly away (a restart, a proxy).
TRANSIENT = (exceptions.CommunicationError, exceptions.HttpBadGateway,
             exceptions.HttpServiceUnavailable,
             exceptions.HttpGatewayTimeout)


def poll(fetch, interval=2.0, timeout=None, outage=120.0,
         sleep=time.sleep, clock=time.monotonic):
    """Call ``fetch()`` every ``interval`` seconds until it returns a
    true value, and return that value; None after ``timeout`` seconds
    (None: no limit), and the caller names what did not end.

    An API that cannot be reached, or answers 502/503/504 (TRANSIENT),
    is asked again for up to ``outage`` seconds in a row; then its error
    is raised.  Any other error is raised at once.  ``sleep`` makes the
    pauses (a caller's own, to stop on Ctrl-C); ``clock`` is for tests.
    """
    away = {}

    def attempt():
        try:
            value = fetch()
        except TRANSIENT:
            if clock() - away.setdefault("since", clock()) > outage:
                raise
            return None
        away.clear()
        return value

    return polling.poll(attempt, timeout, interval, clock, sleep) or None
