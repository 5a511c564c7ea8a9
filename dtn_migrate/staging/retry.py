"""Retries and polls of the staging package, on tenacity.

Every back-off loop of the package goes through :func:`call` (retry an
operation that raised), so their waits, limits and logging behave
alike; every "poll until" loop (call a probe until it gives what is
waited for) through :func:`dtn_migrate.common.polling.poll`, with the
waits made here (:func:`doubling`).  No OpenStack import: tenacity
only.
"""

import logging
import time

import tenacity

LOG = logging.getLogger(__name__)


#: Try again at once.
NO_WAIT = tenacity.wait_none()


def doubling(initial, maximum):
    """Waits of ``initial`` seconds, doubling up to ``maximum``."""
    return tenacity.wait_exponential(multiplier=initial, max=maximum)


def tries(attempts):
    """Stop after ``attempts`` calls in all."""
    return tenacity.stop_after_attempt(max(1, attempts))


def within(seconds):
    """Stop before a wait would end more than ``seconds`` after the first
    call began.
    """
    return tenacity.stop_before_delay(max(0.0, seconds))


def deadline(seconds, wait):
    """(stop, wait) that try for ``seconds`` after the first call began,
    the last call at that deadline: waits are cut short to meet it.
    """
    seconds = max(0.0, seconds)

    def clamped(state):
        return max(0.0, min(wait(state), seconds - state.seconds_since_start))

    return tenacity.stop_after_delay(seconds), clamped


def attempts_made(exc):
    """How many calls :func:`call` made before it raised ``exc``."""
    return getattr(exc, "attempts", 1)


def call(op, retry_on, stop, wait, sleep=time.sleep, before_retry=None,
         what=None):
    """``op(attempt)`` (``attempt`` counts from 1) until it returns; an
    exception for which ``retry_on(exc)`` is true is retried after a wait
    while ``stop`` allows, others are raised at once.

    ``sleep(seconds)`` waits (it may raise to abandon the retries);
    ``before_retry(exc, attempt)`` runs before each wait.  The exception
    raised at the end carries ``attempts``, the number of calls made.
    """
    def before_sleep(state):
        exc = state.outcome.exception()
        if what:
            LOG.warning("%s: %s; retry %d", what, exc, state.attempt_number)
        if before_retry is not None:
            before_retry(exc, state.attempt_number)

    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception(retry_on), stop=stop, wait=wait,
        sleep=sleep, before_sleep=before_sleep, reraise=True)
    try:
        for attempt in retrying:
            with attempt:
                return op(attempt.retry_state.attempt_number)
    except Exception as exc:
        exc.attempts = retrying.statistics.get("attempt_number", 1)
        raise
