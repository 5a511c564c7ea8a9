"""The peer cloud's import flow.

::

    read-descriptor -> [create-image -> upload-image -> verify-image]
        -> report-import -> cleanup-incoming

The bracketed part runs up to ``IMPORT_ATTEMPTS`` times: a failure
reverts it -- create-image's revert deletes the half-imported image,
which may be stuck in ``saving`` after an interrupted upload -- and it
starts again from the received file.  Failures that would only repeat
(wrong data or metadata, a refused request, a cancel) are not retried.
The received files stay on the DTN until the image is verified.  Once
it is, nothing deletes it: report-import retries with backoff, and
cleanup-incoming only logs what it could not remove.
"""

from taskflow.patterns import linear_flow
from taskflow import retry

from dtn_migrate.engine.tasks import base
from dtn_migrate.engine.tasks import incoming as tasks
from dtn_migrate import exception
from dtn_migrate.staging import copy

NAME = "incoming-migration"
IMPORT_ATTEMPTS = 3
#: Failures that another attempt would meet again.
FINAL_FAILURES = (base.Cancelled, exception.ImageHashMismatch,
                  base.MetadataMismatch, exception.InvalidInput,
                  copy.ChecksumMismatch)


class ImportRetry(retry.Times):
    """Try the import again, unless it failed for good."""

    def on_failure(self, history, *args, **kwargs):
        if any(history.caused_by(cls, index=-1) for cls in FINAL_FAILURES):
            return retry.REVERT
        return super().on_failure(history, *args, **kwargs)


def get_flow(resources):
    attempt = linear_flow.Flow(
        "import-image", retry=ImportRetry(IMPORT_ATTEMPTS,
                                          name="import-image-retry"))
    attempt.add(tasks.CreateImage(resources),
                tasks.UploadImage(resources),
                tasks.VerifyImage(resources))
    return linear_flow.Flow(NAME).add(
        tasks.ReadDescriptor(resources),
        attempt,
        tasks.ReportImport(resources),
        tasks.CleanupIncoming(resources))
