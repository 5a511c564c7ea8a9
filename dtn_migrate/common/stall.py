"""Stall detection: how long a watched value has stayed the same.

The one clock behind the engine's stage waits (a stage whose progress
stays the same for ``[engine] stall_timeout`` fails) and the staging
follower (a staged file that stops growing for ``stall_timeout``).
Each caller raises its own exception; this only keeps the time.
"""

import time


class Stall:
    """Time since a watched value last changed."""

    def __init__(self, timeout, clock=time.monotonic):
        self.timeout = timeout
        self.clock = clock
        self.last = None
        self.since = clock()

    def moved(self):
        """The watched thing moved on now (restart the clock)."""
        self.since = self.clock()

    def see(self, value):
        """Note ``value``; True when it differs from the last one seen."""
        if value != self.last:
            self.last = value
            self.moved()
            return True
        return False

    def quiet_for(self):
        """Seconds since the value last changed."""
        return self.clock() - self.since

    def stalled(self):
        """The value stayed the same for longer than ``timeout``."""
        return self.quiet_for() > self.timeout
