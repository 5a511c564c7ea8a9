"""Polling: call a probe until what it returns is what is waited for.

The one poll loop of dtn-migrate (the services, the client, the
runbook CLI, the staging library, the local clouds), on tenacity: the
waits between calls, the deadline and what a timeout returns behave
alike everywhere.  Nothing of dtn-migrate and nothing of OpenStack, so
that the libraries (``staging/``, ``transfer/``) may use it too.
"""

import time

import tenacity


def poll(probe, timeout=None, interval=0.1, clock=time.monotonic,
         sleep=time.sleep, done=bool):
    """Call ``probe()`` every ``interval`` seconds until ``done(value)``
    holds for the value it returned (by default: a true value), and
    return that value.

    ``interval`` is seconds, or a tenacity wait (a function of the
    retry state: growing waits, say).  Once ``timeout`` seconds have
    passed (None: no limit), return the last value instead: the caller
    says what did not happen.  ``probe`` runs at least once, and once
    more at the deadline: the pause before it is cut short.  An
    exception it raises (or ``sleep`` raises: a cancel) propagates at
    once.  ``clock`` and ``sleep`` are the caller's to replace (tests, a
    pause that ends early).
    """
    deadline = None if timeout is None else clock() + timeout
    pause = interval if callable(interval) else (lambda state: interval)

    def stop(state):
        return deadline is not None and clock() >= deadline

    def wait(state):
        seconds = pause(state)
        if deadline is None:
            return seconds
        return max(0.0, min(seconds, deadline - clock()))

    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_not_result(done),
        stop=stop,
        wait=wait,
        sleep=sleep,
        retry_error_callback=lambda state: state.outcome.result())
    return retrying(probe)
