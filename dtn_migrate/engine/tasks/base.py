"""Common ground of the migration tasks."""

import time

from oslo_log import log as logging
from taskflow import task

from dtn_migrate import exception

LOG = logging.getLogger(__name__)

#: RPC context of the engine's own calls to its agent.
CTXT = {}


class Cancelled(exception.DtnMigrateException):
    msg_fmt = "Migration %(migration_id)s was cancelled."


class Stalled(exception.DtnMigrateException):
    msg_fmt = ("Migration %(migration_id)s: %(stage)s made no progress "
               "for %(seconds)d s.")


class MigrationTask(task.Task):
    """A task with the engine's resources.  Names are fixed: a reloaded
    flow finds its tasks' persisted state by name.
    """

    default_name = None

    def __init__(self, resources, **kwargs):
        kwargs.setdefault("name", self.default_name)
        super().__init__(**kwargs)
        self.res = resources

    @property
    def conf(self):
        return self.res.conf

    def live(self, migration_id):
        return self.res.live_for(migration_id)

    def check_cancel(self, migration_id):
        if self.live(migration_id).cancel.is_set():
            raise Cancelled(migration_id=migration_id)

    def pause(self, migration_id, seconds=None):
        """Sleep a poll interval, or less if the migration is cancelled."""
        seconds = self.conf.engine.poll_interval if seconds is None \
            else seconds
        if self.live(migration_id).cancel.wait(seconds):
            raise Cancelled(migration_id=migration_id)


class StallClock:
    """Fails a wait once nothing it watches changed for ``timeout``."""

    def __init__(self, migration_id, stage, timeout):
        self.migration_id = migration_id
        self.stage = stage
        self.timeout = timeout
        self.last = None
        self.since = time.monotonic()

    def see(self, value):
        if value != self.last:
            self.last = value
            self.since = time.monotonic()
        elif time.monotonic() - self.since > self.timeout:
            raise Stalled(migration_id=self.migration_id, stage=self.stage,
                          seconds=self.timeout)
