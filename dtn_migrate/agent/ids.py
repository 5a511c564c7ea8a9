"""Transfer ids as the agent accepts them."""

import uuid

from dtn_migrate import exception


def check_id(transfer_id):
    """The transfer id (a UUID string) as 32 lower-case hex digits, or
    InvalidInput.
    """
    if isinstance(transfer_id, str):
        try:
            return uuid.UUID(transfer_id).hex
        except ValueError:
            pass
    raise exception.InvalidInput(
        reason="transfer id %r is not a UUID" % (transfer_id,))
