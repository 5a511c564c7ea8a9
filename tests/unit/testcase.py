"""The base class of every unit test: a test that runs longer than
``DTN_TEST_TIMEOUT`` seconds (default 60; 0 turns the limit off) fails
with ``fixtures.TimeoutException`` instead of holding the run, as
oslotest's base class does with ``OS_TEST_TIMEOUT``.

A unit test finishes in well under a second; one that needs a wall-clock
or CPU-time bound, or servers of its own, belongs to the functional
suite.
"""

import os

import fixtures
import testtools

#: Seconds a unit test may run.
DEFAULT_TIMEOUT = 60


def timeout():
    """The per-test limit in seconds, from ``DTN_TEST_TIMEOUT``."""
    value = os.environ.get('DTN_TEST_TIMEOUT', '')
    try:
        return max(0, int(value)) if value else DEFAULT_TIMEOUT
    except ValueError:
        return DEFAULT_TIMEOUT


class TestCase(testtools.TestCase):
    """testtools' TestCase with a per-test timeout."""

    #: Seconds this class's tests may run (None: :func:`timeout`).
    TIMEOUT = None

    def setUp(self):
        super().setUp()
        limit = self.TIMEOUT if self.TIMEOUT is not None else timeout()
        if limit:
            self.useFixture(fixtures.Timeout(limit, gentle=True))
