"""Small helpers the services, the runbook CLI and the development
clouds share.
"""

import time

import tenacity


def wait_for(check, timeout=None, interval=0.1, clock=time.monotonic,
             sleep=time.sleep):
    """Call ``check()`` every ``interval`` seconds until it returns a
    true value, and return that value.

    Once ``timeout`` seconds have passed (None: no limit), return the
    last, false, value instead: the caller says what did not happen.
    ``check`` runs at least once, and once more at the deadline: the
    pause before it is cut short.  An exception it raises propagates at
    once.  ``clock`` and ``sleep`` are the caller's to replace (tests).
    """
    deadline = None if timeout is None else clock() + timeout

    def stop(state):
        return deadline is not None and clock() >= deadline

    def wait(state):
        if deadline is None:
            return interval
        return max(0.0, min(interval, deadline - clock()))

    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_not_result(bool),
        stop=stop,
        wait=wait,
        sleep=sleep,
        retry_error_callback=lambda state: state.outcome.result())
    return retrying(check)
