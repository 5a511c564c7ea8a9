"""Formatting of migration, peer and policy values for tables and pages."""

import datetime

from django.utils import dateparse
from horizon.utils import filters

from dtn_migrate.common import units


def human_bytes(value):
    """``1.5 MiB`` for 1572864; ``-`` for None."""
    if value is None:
        return "-"
    return units.human(value)


def human_rate(value):
    """``8.0 MiB/s`` for 8388608 B/s; ``-`` for None or 0."""
    if not value:
        return "-"
    return "%s/s" % human_bytes(value)


def human_duration(seconds):
    """``1h 02m``, ``3m 05s``, ``42s``; ``-`` for None."""
    if seconds is None:
        return "-"
    seconds = int(round(float(seconds)))
    if seconds < 0:
        return "-"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return "%dh %02dm" % (hours, minutes)
    if minutes:
        return "%dm %02ds" % (minutes, secs)
    return "%ds" % secs


def percent(progress):
    """The progress (0..1) as a percent with one decimal, clamped."""
    try:
        value = float(progress or 0.0)
    except (TypeError, ValueError):
        value = 0.0
    return round(min(max(value, 0.0), 1.0) * 100.0, 1)


def parse_time(value):
    """A timezone-aware datetime from the API's ISO 8601 text, or None."""
    if not value:
        return None
    if isinstance(value, datetime.datetime):
        parsed = value
    else:
        text = str(value)
        if text.endswith("Z"):
            text = text[:-1] + "+00:00"
        try:
            parsed = dateparse.parse_datetime(text)
        except ValueError:
            return None
        if parsed is None:
            return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.timezone.utc)
    return parsed


def verified(migration):
    """True when the peer image's hash is the source image's hash."""
    peer_hash = migration.get("peer_image_hash")
    return bool(peer_hash) and peer_hash == migration.get("os_hash_value")


def since(value):
    """``5 minutes`` (sortable HTML) for an ISO 8601 time; ``-`` if none."""
    parsed = parse_time(value)
    if parsed is None:
        return "-"
    return filters.timesince_sortable(parsed)


def local_time(value):
    """The time as ``YYYY-MM-DD HH:MM:SS`` UTC, or ``-``."""
    parsed = parse_time(value)
    if parsed is None:
        return "-"
    return parsed.astimezone(datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M:%S")
