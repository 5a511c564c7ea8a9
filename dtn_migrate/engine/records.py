"""A migration's record as the engine writes and answers it: its
directions, its times, its form in RPC replies, and the error an
operator's request gets when the database fails.
"""

import datetime

from oslo_utils import timeutils

from dtn_migrate.common import states
from dtn_migrate.engine import persistence
from dtn_migrate import exception

OUTGOING = "outgoing"
INCOMING = "incoming"
#: A record's ``cleanup`` while its staged files are still to go.
CLEANUP_PENDING = "pending"


def now():
    return timeutils.utcnow()


def iso(value):
    return value.isoformat(timespec="microseconds") \
        if isinstance(value, datetime.datetime) else value


def parse_iso(value):
    """The naive UTC datetime of ISO 8601 text, or None."""
    try:
        return timeutils.normalize_time(timeutils.parse_isotime(value))
    except (TypeError, ValueError):
        return None


def to_rpc(record, events=None):
    """A record as RPC replies carry it: the row's columns (times as
    ISO 8601 strings), ``bytes`` per stage, and the engine's own keys
    (``migration_id``, ``stages``, ``peer_image``, ``reused``).
    """
    out = {k: iso(v) for k, v in record.items()}
    out["bytes"] = {s: record.get("bytes_%s" % s) or 0
                    for s in states.STAGES}
    if events is not None:
        out["events"] = [{k: iso(v) for k, v in e.items()}
                         for e in events]
    return out


def saved(call, *args, **kwargs):
    """``call(...)``, a database error raised as PersistenceUnavailable
    (what an operator's request gets back).
    """
    try:
        return call(*args, **kwargs)
    except persistence.DATABASE_ERRORS as exc:
        raise exception.PersistenceUnavailable(reason=str(exc) or
                                               exc.__class__.__name__)
