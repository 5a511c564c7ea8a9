"""Local RDMA resources: the errors raised when one cannot be had, and
closing one (a pyverbs object) without raising.
"""

from dtn_migrate.transfer import errors


class RdmaError(errors.TransferError):
    """A local RDMA resource could not be created or used."""


class RdmaExhausted(RdmaError, ConnectionError):
    """A local RDMA resource is exhausted for now (pinned memory, MRs).

    A ConnectionError, so that the source retries the attempt with
    back-off, as it does when the link fails.
    """


class DeviceUnusable(RdmaError):
    """This device or port cannot be used; the text says why (``probe``
    gives it as its reason, and tries the next device).
    """


def quiet_close(obj):
    if obj is None:
        return
    try:
        obj.close()
    except Exception:
        pass
