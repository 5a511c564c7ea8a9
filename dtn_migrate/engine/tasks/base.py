"""Common ground of the migration tasks."""

import time

import oslo_messaging as messaging
from oslo_log import log as logging
from taskflow import task

from dtn_migrate import exception

LOG = logging.getLogger(__name__)

#: RPC context of the engine's own calls to its agent.
CTXT = {}

#: What a restarting agent or broker makes an RPC call raise: a polling
#: task logs it and polls again, and its stall clock decides.
TRANSIENT_RPC = (messaging.MessagingTimeout, messaging.MessageDeliveryFailure,
                 messaging.ClientSendError)


class Cancelled(exception.DtnMigrateException):
    msg_fmt = "Migration %(migration_id)s was cancelled."


class Stalled(exception.DtnMigrateException):
    msg_fmt = ("Migration %(migration_id)s: %(stage)s made no progress "
               "for %(seconds)d s.")


class StageFailed(exception.DtnMigrateException):
    """A stage gave up because another stage of the migration failed
    (the other stage's failure is the one to report).
    """

    msg_fmt = "Migration %(migration_id)s: %(stage)s stopped: %(reason)s."


class MetadataMismatch(exception.DtnMigrateException):
    msg_fmt = ("Image %(image_id)s: its metadata at the peer differs: "
               "%(differences)s.")


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

    def poll(self, migration_id, what, call, *args, **kwargs):
        """``call(*args, **kwargs)``, or ``(False, None)`` after a
        transient RPC failure (logged); else ``(True, result)``.
        """
        try:
            return True, call(*args, **kwargs)
        except TRANSIENT_RPC as exc:
            LOG.warning("migration %s: %s: %s; polling again",
                        migration_id, what, exc.__class__.__name__)
            return False, None


class RemoveStaged(MigrationTask):
    """Remove a migration's files from this DTN's export, best effort:
    the image is already where it belongs, so a failure here is logged
    and left for the operator rather than undoing the migration.
    """

    def execute(self, transfer_id):
        self.res.remove_staged_quietly(transfer_id, "the image is where it "
                                                    "belongs")


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
