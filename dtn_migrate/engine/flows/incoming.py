"""The peer cloud's import flow.

::

    read-descriptor -> [create-image -> upload-image -> verify-image]
        -> report-import

The bracketed part runs up to ``IMPORT_ATTEMPTS`` times: a failure
reverts it -- create-image's revert deletes the half-imported image,
which may be stuck in ``saving`` after an interrupted upload -- and it
starts again from the received file, after a pause that doubles from
``RETRY_DELAY`` seconds (a Glance that answered 500 for a moment is not
asked again at once).  Failures that would only repeat
(wrong data or metadata, a refused request, a cancel) are not retried.
The received files stay on the DTN until the image is verified.  Once
it is, nothing deletes it: report-import retries with backoff.  The
received files are removed once the outcome is saved
(:meth:`dtn_migrate.engine.outcomes.Outcomes.remove_staged`).
"""

import time

from oslo_log import log as logging
from taskflow.patterns import linear_flow
from taskflow import retry
import tenacity

from dtn_migrate.engine.tasks import incoming as tasks
from dtn_migrate import exception
from dtn_migrate.staging import backend as staging_backend

LOG = logging.getLogger(__name__)

NAME = "incoming-migration"
IMPORT_ATTEMPTS = 3
#: Pause before the second import attempt (doubled for each later one).
RETRY_DELAY = 2.0
#: Failures that another attempt would meet again.
FINAL_FAILURES = (exception.MigrationCancelled, exception.ImageHashMismatch,
                  exception.MetadataMismatch, exception.InvalidInput,
                  staging_backend.ChecksumMismatch)


class ImportRetry(retry.Times):
    """Try the import again, unless it failed for good, after ``delay``
    seconds doubled for each attempt made.
    """

    def __init__(self, attempts, delay=0.0, sleep=time.sleep, **kwargs):
        # The migration, for the logs.
        kwargs.setdefault("requires", ("migration_id",))
        super().__init__(attempts, **kwargs)
        self.delay = delay
        self._sleep = sleep
        self.wait = tenacity.wait_exponential(multiplier=delay)

    def on_failure(self, history, *args, **kwargs):
        mid = kwargs.get("migration_id")
        why = "; ".join("%s: %s" % (name, failure.exception_str)
                        for name, failure in history.outcomes_iter(-1))
        if any(history.caused_by(cls, index=-1) for cls in FINAL_FAILURES):
            LOG.warning("import %s: attempt %d failed for good: %s", mid,
                        len(history), why)
            return retry.REVERT
        decision = super().on_failure(history, *args, **kwargs)
        if decision != retry.RETRY:
            LOG.warning("import %s: attempt %d of %d failed: %s; no "
                        "attempt left", mid, len(history), self._attempts,
                        why)
            return decision
        state = tenacity.RetryCallState(None, None, (), {})
        state.attempt_number = len(history)
        delay = self.wait(state)
        LOG.warning("import %s: attempt %d of %d failed: %s; again in "
                    "%.1f s", mid, len(history), self._attempts, why, delay)
        if delay:
            self._sleep(delay)
        return decision


def get_flow(resources):
    attempt = linear_flow.Flow(
        "import-image", retry=ImportRetry(IMPORT_ATTEMPTS, RETRY_DELAY,
                                          name="import-image-retry"))
    attempt.add(tasks.CreateImage(resources),
                tasks.UploadImage(resources),
                tasks.VerifyImage(resources))
    return linear_flow.Flow(NAME).add(
        tasks.ReadDescriptor(resources),
        attempt,
        tasks.ReportImport(resources))
