"""Schemas of /v1/migrations."""

import copy

from dtn_migrate.api.schemas import common
from dtn_migrate.common import states

# JSON Schema enums (arrays) of the shared vocabulary.
STATES = list(states.STATES)
STAGES = list(states.STAGES)
DIRECTIONS = list(states.DIRECTIONS)
VISIBILITIES = list(states.VISIBILITIES)
MODES = list(states.MODES)
SORT_KEYS = ['created_at', 'updated_at', 'state', 'image_name', 'peer',
             'progress', 'id']
MAX_IMAGES = 1000

_SELECTOR = [{'required': ['tag']}, {'required': ['properties']}]

CREATE = {
    'type': 'object',
    'title': 'MigrationCreate',
    'description': 'Migrate images, given by id (images) or by a selector '
                   '(tag and/or properties), to a peer cloud.',
    'properties': {
        'peer': common.name(),
        'images': {
            'type': 'array', 'minItems': 1, 'maxItems': MAX_IMAGES,
            'items': common.UUID,
        },
        'tag': common.name(),
        'properties': {
            'type': 'object', 'minProperties': 1, 'maxProperties': 100,
            'propertyNames': common.name(),
            'additionalProperties': common.name(),
        },
        'options': {
            'type': 'object',
            'properties': {
                'keep_id': {'type': 'boolean'},
                'visibility': {'type': 'string', 'enum': VISIBILITIES},
                'target_project': common.name(64),
                'mode': {'type': 'string', 'enum': MODES},
                'force': {'type': 'boolean'},
                'verify': {'type': 'boolean'},
            },
            'additionalProperties': False,
        },
        'request_id': common.UUID,
    },
    'required': ['peer'],
    'additionalProperties': False,
    'oneOf': [
        {'required': ['images'], 'not': {'anyOf': _SELECTOR}},
        {'anyOf': _SELECTOR, 'not': {'required': ['images']}},
    ],
}

ACTION = {
    'type': 'object',
    'title': 'MigrationAction',
    'description': 'One action: {"cancel": null} or {"retry": null}.',
    'properties': {
        'cancel': {'type': 'null'},
        'retry': {'type': 'null'},
    },
    'minProperties': 1,
    'maxProperties': 1,
    'additionalProperties': False,
}

#: Query parameters of GET /v1/migrations; ``limit``'s maximum is
#: ``[api] max_limit`` (see :func:`list_query`).
_LIST_QUERY = {
    'type': 'object',
    'properties': {
        'state': {'type': 'array', 'maxItems': len(STATES),
                  'items': {'type': 'string', 'enum': STATES},
                  'description': 'Only migrations in these states '
                                 '(repeat the parameter for several).'},
        'image_id': dict(common.UUID, description='Only this image.'),
        'peer': dict(common.name(), description='Only this peer.'),
        'direction': {'type': 'string', 'enum': DIRECTIONS,
                      'description': 'outgoing or incoming.'},
        'request_id': dict(common.UUID,
                           description='Only the migrations of this '
                                       'request.'),
        'changes-since': {'type': 'string', 'format': 'date-time',
                          'description': 'Only migrations updated at or '
                                         'after this time (ISO 8601).'},
        'marker': common.marker('migration'),
        'limit': common.limit(),
        **common.sorting(SORT_KEYS),
        'all_projects': common.all_projects('Migrations'),
    },
    'additionalProperties': False,
}


def list_query(max_limit=1000):
    return common.limited(_LIST_QUERY, max_limit)


SHOW_QUERY = common.NO_QUERY

_BYTES = {'type': 'integer', 'minimum': 0}

MIGRATION = {
    'type': 'object',
    'title': 'Migration',
    'required': ['id', 'request_id', 'image_id', 'image_name', 'peer',
                 'direction', 'state', 'stage', 'mode', 'attempt', 'size',
                 'progress', 'rate', 'eta', 'bytes', 'error',
                 'peer_image_id', 'peer_image_hash', 'os_hash_value',
                 'project_id', 'user_id', 'created_at', 'updated_at',
                 'started_at', 'finished_at', 'peer_silent_since'],
    'properties': {
        'id': {'type': 'string'},
        'request_id': common.nullable({'type': 'string'}),
        'image_id': common.nullable({'type': 'string'}),
        'image_name': common.nullable({'type': 'string'}),
        'peer': common.nullable({'type': 'string'}),
        'direction': {'type': 'string', 'enum': DIRECTIONS},
        'state': {'type': 'string', 'enum': STATES},
        'stage': common.nullable({'type': 'string'}),
        'mode': common.nullable({'type': 'string'}),
        'attempt': common.nullable({'type': 'integer'}),
        'size': common.nullable({'type': 'integer', 'minimum': 0}),
        'progress': common.nullable({'type': 'number', 'minimum': 0,
                                     'maximum': 1}),
        'rate': common.nullable({'type': 'number', 'minimum': 0}),
        'eta': common.nullable({'type': 'number', 'minimum': 0}),
        'bytes': {
            'type': 'object',
            'required': STAGES,
            'properties': {stage: _BYTES for stage in STAGES},
        },
        'error': common.nullable({'type': 'string'}),
        'peer_image_id': common.nullable({'type': 'string'}),
        'peer_image_hash': common.nullable({'type': 'string'}),
        'os_hash_value': common.nullable({'type': 'string'}),
        'project_id': common.nullable({'type': 'string'}),
        'user_id': common.nullable({'type': 'string'}),
        'created_at': common.NULLABLE_TIME,
        'updated_at': common.NULLABLE_TIME,
        'started_at': common.NULLABLE_TIME,
        'finished_at': common.NULLABLE_TIME,
        # Since when the peer has not answered for its import (its
        # engine or DTN is down), while it runs; else null.
        'peer_silent_since': common.NULLABLE_TIME,
    },
}

EVENT = {
    'type': 'object',
    'title': 'MigrationEvent',
    'required': ['stage', 'event', 'message', 'bytes', 'created_at'],
    'properties': {
        'stage': common.nullable({'type': 'string'}),
        'event': {'type': 'string'},
        'message': common.nullable({'type': 'string'}),
        'bytes': common.nullable({'type': 'integer'}),
        'created_at': common.NULLABLE_TIME,
    },
}

MIGRATION_WITH_EVENTS = copy.deepcopy(MIGRATION)
MIGRATION_WITH_EVENTS['title'] = 'MigrationDetail'
MIGRATION_WITH_EVENTS['required'].append('events')
MIGRATION_WITH_EVENTS['properties']['events'] = {'type': 'array',
                                                 'items': EVENT}

REQUESTED = copy.deepcopy(MIGRATION)
REQUESTED['title'] = 'RequestedMigration'
REQUESTED['required'].append('reused')
REQUESTED['properties']['reused'] = {
    'type': 'boolean',
    'description': 'True when the request got an existing migration of '
                   'the image to the peer by the same project rather than '
                   'a new one: one running with the same options, or a '
                   'complete one whose verified copy on the peer has the '
                   'id choice, visibility and project asked for.'}

CREATE_RESPONSE = {
    'type': 'object',
    'required': ['request_id', 'migrations'],
    'properties': {
        'request_id': {'type': 'string'},
        'migrations': {'type': 'array', 'items': REQUESTED},
    },
}

LIST_RESPONSE = common.page_of('migrations', MIGRATION)

SHOW_RESPONSE = common.one('migration', MIGRATION_WITH_EVENTS)

ACTION_RESPONSE = common.one('migration', MIGRATION)
