"""The JSON shapes of the v1 resources, built from database rows and
engine replies (whose times are datetimes or ISO 8601 text).
"""

import datetime
import json

from dtn_migrate.api.validation import parse_time
from dtn_migrate.common import states

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
        nested = {stage: row.get('bytes_%s' % stage)
                  for stage in states.STAGES}
    out['bytes'] = {stage: max(_number(nested.get(stage), int) or 0, 0)
                    for stage in states.STAGES}
    for key in _TIMES:
        out[key] = time(row.get(key))
    # Kept in the row's details (a record from the engine has it flat).
    details = row.get('details') if isinstance(row.get('details'),
                                               dict) else {}
    out['peer_silent_since'] = time(
        row.get('peer_silent_since', details.get('peer_silent_since')))
    return out


def requested(row):
    """A migration as a request answers it: with ``reused``, true when
    the request got an existing migration (running, or complete with
    the copy asked for) rather than a new one.
    """
    out = migration(row)
    out['reused'] = bool(row.get('reused'))
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


#: What only callers with dtn:peer:show:details see of a peer.
PEER_DETAILS = ('address', 'port', 'error')


def peer(health, details=True):
    """A peer's health; without ``details``, no address, port nor error
    (the keys are left out).
    """
    rtt = _number(health.get('rtt_ms'), float)
    throughput = _number(health.get('last_throughput'), float)
    out = {
        'name': health.get('name'),
        'reachable': bool(health.get('reachable')),
        'rtt_ms': rtt,
        'last_throughput': throughput,
        'last_transfer_at': time(health.get('last_transfer_at')),
        'checked_at': time(health.get('checked_at')),
    }
    if details:
        out.update(address=health.get('address'),
                   port=_number(health.get('port'), int),
                   error=health.get('error'))
    return out


# Protection policies and the replica catalog.

SELECTOR_DEFAULTS = (('tags', list), ('properties', dict),
                     ('visibility', list), ('name_pattern', lambda: None),
                     ('projects', list))
OPTION_DEFAULTS = (('keep_id', False), ('target_project', None),
                   ('deletion', 'keep'), ('deletion_grace_minutes', 60))
_POLICY_FIELDS = ('id', 'name', 'description', 'project_id', 'user_id',
                  'peer', 'mode', 'schedule', 'last_error')
_POLICY_IMAGE_FIELDS = ('image_id', 'image_name', 'project_id', 'state',
                        'os_hash_value', 'migration_id', 'error')
_REPLICA_FIELDS = ('direction', 'peer', 'source_image_id',
                   'replica_image_id', 'project_id', 'image_name',
                   'hash_algo', 'hash_value', 'migration_id', 'policy_id',
                   'state')


def _mapping(value):
    """A JSON column as a dict: the DB decodes it; an engine reply may
    carry it as text.
    """
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def policy(row, counts=None):
    """A protection policy; ``counts`` ({state: n} of its images) when
    the row is the database's, else the engine record's ``images``.
    """
    out = {key: row.get(key) for key in _POLICY_FIELDS}
    out['enabled'] = bool(row.get('enabled', True))
    out['role'] = row.get('role') or 'primary'
    selector = _mapping(row.get('selector'))
    out['selector'] = {key: selector[key] if selector.get(key) is not None
                       else default()
                       for key, default in SELECTOR_DEFAULTS}
    options = _mapping(row.get('options'))
    out['options'] = {key: options[key] if key in options else default
                      for key, default in OPTION_DEFAULTS}
    seconds = _number(row.get('rpo_seconds'), float)
    out['rpo'] = {
        'target_minutes': _number(row.get('rpo_minutes'), int),
        'state': row.get('rpo_state') or None,
        'seconds': None if seconds is None else max(seconds, 0.0),
        'checked_at': time(row.get('rpo_checked_at')),
    }
    counts = _mapping(row.get('images') if counts is None else counts)
    out['images'] = {state: max(_number(counts.get(state), int) or 0, 0)
                     for state in states.POLICY_IMAGE_STATES}
    for key in ('last_sync_at', 'created_at', 'updated_at'):
        out[key] = time(row.get(key))
    return out


def policy_image(row):
    out = {key: row.get(key) for key in _POLICY_IMAGE_FIELDS}
    size = _number(row.get('size'), int)
    out['size'] = None if size is None or size < 0 else size
    for key in ('changed_at', 'replicated_at', 'updated_at'):
        out[key] = time(row.get(key))
    return out


def replica(row):
    out = {'id': _number(row.get('id'), int)}
    out.update((key, row.get(key)) for key in _REPLICA_FIELDS)
    size = _number(row.get('size'), int)
    out['size'] = None if size is None or size < 0 else size
    for key in ('verified_at', 'created_at', 'updated_at'):
        out[key] = time(row.get(key))
    return out


# Drills of protection policies.

_DRILL_FIELDS = ('id', 'policy_id', 'policy_name', 'project_id', 'state',
                 'error')
_DRILL_COUNTS = ('images_total', 'images_intact', 'images_bad')
_DRILL_TIMES = ('started_at', 'finished_at', 'created_at', 'updated_at')
DRILL_CHECKS = ('present', 'size', 'hash', 'qemu_img', 'clone')
_DRILL_IMAGE_FIELDS = ('source_image_id', 'replica_image_id', 'image_name',
                       'status', 'error')


def _drill_image(entry):
    out = {key: entry.get(key) for key in _DRILL_IMAGE_FIELDS}
    checks = _mapping(entry.get('checks'))
    out['checks'] = {key: None if checks.get(key) is None
                     else bool(checks[key]) for key in DRILL_CHECKS}
    seconds = _number(entry.get('seconds'), float)
    out['seconds'] = None if seconds is None else max(seconds, 0.0)
    return out


def drill(row, report=False):
    """A drill; with ``report``, the check of every replica too (the
    listing leaves it out: a report names every image of the policy).
    """
    out = {key: row.get(key) for key in _DRILL_FIELDS}
    out['clone'] = bool(row.get('clone'))
    for key in _DRILL_COUNTS:
        count = _number(row.get(key), int)
        out[key] = None if count is None else max(count, 0)
    seconds = _number(row.get('rto_seconds'), float)
    out['rto_seconds'] = None if seconds is None else max(seconds, 0.0)
    for key in _DRILL_TIMES:
        out[key] = time(row.get(key))
    if report:
        images = _mapping(row.get('report')).get('images')
        out['report'] = {'images': [_drill_image(i) for i in images
                                    if isinstance(i, dict)]
                         if isinstance(images, list) else []}
    return out
