"""The JSON shapes of the v1 resources, built from database rows and
engine replies (whose times are datetimes or ISO 8601 text).
"""

import datetime

from dtn_migrate.api.validation import parse_time

STAGES = ('export', 'transfer', 'import')
_FIELDS = ('id', 'request_id', 'image_id', 'image_name', 'peer',
           'direction', 'state', 'stage', 'mode', 'attempt', 'size',
           'progress', 'rate', 'eta', 'error', 'peer_image_id',
           'peer_image_hash', 'os_hash_value', 'project_id', 'user_id')
_TIMES = ('created_at', 'updated_at', 'started_at', 'finished_at')
_INTS = ('attempt', 'size')
_FLOATS = ('progress', 'rate', 'eta')


def time(value):
    """ISO 8601 UTC text ending in Z, or None."""
    if value is None or value == '':
        return None
    if not isinstance(value, datetime.datetime):
        value = parse_time(str(value))
    elif value.tzinfo is not None:
        value = value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    return value.strftime('%Y-%m-%dT%H:%M:%S.%fZ')


def _number(value, kind):
    if value is None:
        return None
    try:
        return kind(value)
    except (TypeError, ValueError):
        return None


def migration(row):
    out = {key: row.get(key) for key in _FIELDS}
    for key in _INTS:
        out[key] = _number(out[key], int)
    for key in _FLOATS:
        out[key] = _number(out[key], float)
        if out[key] is not None and out[key] < 0:
            out[key] = None
    if out['progress'] is not None:
        out['progress'] = min(out['progress'], 1.0)
    nested = row.get('bytes')
    if not isinstance(nested, dict):
        nested = {stage: row.get('bytes_%s' % stage) for stage in STAGES}
    out['bytes'] = {stage: max(_number(nested.get(stage), int) or 0, 0)
                    for stage in STAGES}
    for key in _TIMES:
        out[key] = time(row.get(key))
    return out


def event(row):
    return {'stage': row.get('stage'), 'event': row.get('event'),
            'message': row.get('message'),
            'bytes': _number(row.get('bytes'), int),
            'created_at': time(row.get('created_at'))}


def migration_detail(row, events):
    out = migration(row)
    out['events'] = [event(e) for e in events]
    return out


def peer(health):
    rtt = _number(health.get('rtt_ms'), float)
    throughput = _number(health.get('last_throughput'), float)
    return {
        'name': health.get('name'),
        'address': health.get('address'),
        'port': _number(health.get('port'), int),
        'reachable': bool(health.get('reachable')),
        'rtt_ms': rtt,
        'last_throughput': throughput,
        'last_transfer_at': time(health.get('last_transfer_at')),
        'checked_at': time(health.get('checked_at')),
        'error': health.get('error'),
    }
