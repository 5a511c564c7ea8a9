"""Checking the fields of a protection policy that arrive over RPC.

The API checks bodies against its JSON schemas; the engine checks again
what only it can (the peer exists, the cron expression parses) and what
any caller on the bus could send.  ``check`` answers the columns to
write, or raises InvalidInput naming the problem.
"""

import datetime

import croniter

from dtn_migrate.common import states
from dtn_migrate.engine.protection import selectors
from dtn_migrate.engine import requests
from dtn_migrate import exception

MAX_MINUTES = 525600                # a year
#: Fields a caller may give; ``project_id`` only an admin, at creation.
FIELDS = ("name", "description", "peer", "mode", "schedule",
          "rpo_minutes", "selector", "options", "enabled", "project_id")
DEFAULT_OPTIONS = {"keep_id": False, "target_project": None,
                   "deletion": "keep", "deletion_grace_minutes": 60}


def _invalid(reason):
    return exception.InvalidInput(reason=reason)


def _minutes(value, what, low):
    if isinstance(value, bool) or not isinstance(value, int) or \
            not low <= value <= MAX_MINUTES:
        raise _invalid("%s must be a whole number of minutes from %d to %d"
                       % (what, low, MAX_MINUTES))
    return value


def check_options(value, base=None):
    """Options over ``base`` (the policy's current ones)."""
    out = dict(DEFAULT_OPTIONS, **(base or {}))
    if not isinstance(value, dict):
        raise _invalid("options must be a mapping")
    unknown = set(value) - set(DEFAULT_OPTIONS)
    if unknown:
        raise _invalid("unknown options: %s (known: %s)" % (
            ", ".join(sorted(map(str, unknown))),
            ", ".join(DEFAULT_OPTIONS)))
    if "keep_id" in value:
        if not isinstance(value["keep_id"], bool):
            raise _invalid("option keep_id must be true or false")
        out["keep_id"] = value["keep_id"]
    if "target_project" in value:
        target = value["target_project"]
        out["target_project"] = None if target is None else \
            selectors._text(target, "option target_project", 64)
    if "deletion" in value:
        if value["deletion"] not in states.DELETIONS:
            raise _invalid("option deletion must be one of %s"
                           % ", ".join(states.DELETIONS))
        out["deletion"] = value["deletion"]
    if "deletion_grace_minutes" in value:
        out["deletion_grace_minutes"] = _minutes(
            value["deletion_grace_minutes"], "deletion_grace_minutes", 0)
    return out


def check_schedule(value):
    if not isinstance(value, str) or len(value) > 255 or \
            not croniter.croniter.is_valid(value) or \
            len(value.split()) != 5:
        raise _invalid("schedule %r is not a cron expression of five "
                       "fields (minute hour day month weekday)"
                       % (value if isinstance(value, str) else
                          type(value).__name__,))
    return value


def next_run(schedule, after):
    """The first time ``schedule`` fires after ``after`` (naive UTC)."""
    return croniter.croniter(schedule, after).get_next(datetime.datetime)


def check(values, current=None, default_rpo=60):
    """Columns of a policy from ``values``; ``current``: the row an
    update changes (None: a creation, which needs name, peer and
    selector).
    """
    if not isinstance(values, dict):
        raise _invalid("a policy must be a mapping of fields")
    unknown = set(values) - set(FIELDS)
    if unknown:
        raise _invalid("unknown policy fields: %s (known: %s)" % (
            ", ".join(sorted(map(str, unknown))), ", ".join(FIELDS)))
    creating = current is None
    if creating:
        for key in ("name", "peer", "selector"):
            if key not in values:
                raise _invalid("a policy needs a %s" % key)
    elif not values:
        raise _invalid("give at least one field to change")
    elif "project_id" in values:
        raise _invalid("a policy's project cannot change")
    out = {}
    if "name" in values:
        out["name"] = selectors._text(values["name"], "name")
    if "description" in values:
        desc = values["description"]
        if desc is not None and (not isinstance(desc, str) or
                                 len(desc) > 1024):
            raise _invalid("description must be text of at most 1024 "
                           "characters")
        out["description"] = desc
    if "peer" in values:
        out["peer"] = requests.peer(values["peer"])
    if "selector" in values:
        out["selector"] = selectors.check(values["selector"])
    if "rpo_minutes" in values:
        out["rpo_minutes"] = _minutes(values["rpo_minutes"], "rpo_minutes",
                                      1)
    elif creating:
        out["rpo_minutes"] = default_rpo
    if "enabled" in values:
        if not isinstance(values["enabled"], bool):
            raise _invalid("enabled must be true or false")
        out["enabled"] = values["enabled"]
    elif creating:
        out["enabled"] = True
    if "options" in values or creating:
        # Given options replace the policy's (as the API documents).
        out["options"] = check_options(values.get("options", {}))
    mode = values.get("mode", "continuous" if creating else
                      current["mode"])
    if mode not in states.POLICY_MODES:
        raise _invalid("mode must be one of %s"
                       % ", ".join(states.POLICY_MODES))
    if "mode" in values or creating:
        out["mode"] = mode
    schedule = values.get("schedule",
                          None if creating else current.get("schedule"))
    if mode == "scheduled":
        if schedule is None:
            raise _invalid("a scheduled policy needs a schedule (a cron "
                           "expression)")
        out["schedule"] = check_schedule(schedule)
    elif values.get("schedule") is not None:
        raise _invalid("only a scheduled policy has a schedule")
    elif schedule is not None:
        out["schedule"] = None      # no longer scheduled
    if "project_id" in values:
        out["project_id"] = selectors._text(values["project_id"],
                                            "project_id", 64)
    return out
