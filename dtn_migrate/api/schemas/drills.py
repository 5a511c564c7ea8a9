"""Schemas of /v1/drills: disaster-recovery drills of protection
policies, run in the cloud that holds the replicas.

A drill checks every replica of a policy (present and active, size and
hash of the bytes, ``qemu-img check``, optionally a clone) and measures
the time it took to make them all usable: the RTO measured.
"""

import copy

from dtn_migrate.api.schemas import common
from dtn_migrate.common import states

STATES = list(states.DRILL_STATES)
IMAGE_STATUSES = list(states.DRILL_IMAGE_STATUSES)
CHECKS = ['present', 'size', 'hash', 'qemu_img', 'clone']

START = {
    'type': 'object',
    'title': 'DrillStart',
    'description': 'Start a drill of a protection policy (its id, as '
                   'the replicas\' cloud knows it): check every replica '
                   'of the policy here.  clone also makes a hidden clone '
                   'of each replica, and removes it.',
    'properties': {
        'policy_id': common.UUID,
        'clone': {'type': 'boolean'},
    },
    'required': ['policy_id'],
    'additionalProperties': False,
}

_LIST_QUERY = {
    'type': 'object',
    'properties': {
        'policy_id': dict(common.UUID, description='Only the drills of '
                                                   'this policy.'),
        'state': {'type': 'array', 'maxItems': len(STATES),
                  'items': {'type': 'string', 'enum': STATES},
                  'description': 'Only drills in these states (repeat '
                                 'for several).'},
        'marker': common.marker('drill'),
        'limit': common.limit(),
        'all_projects': common.all_projects('Drills'),
    },
    'additionalProperties': False,
}


def list_query(max_limit=1000):
    return common.limited(_LIST_QUERY, max_limit)


SHOW_QUERY = common.NO_QUERY

_COUNT = common.nullable({'type': 'integer', 'minimum': 0})

DRILL = {
    'type': 'object',
    'title': 'Drill',
    'required': ['id', 'policy_id', 'policy_name', 'project_id', 'state',
                 'clone', 'images_total', 'images_intact', 'images_bad',
                 'rto_seconds', 'error', 'started_at', 'finished_at',
                 'created_at', 'updated_at'],
    'properties': {
        'id': {'type': 'string'},
        'policy_id': {'type': 'string'},
        'policy_name': common.nullable({'type': 'string'}),
        'project_id': common.nullable({'type': 'string'}),
        'state': {'type': 'string', 'enum': STATES},
        'clone': {'type': 'boolean'},
        'images_total': _COUNT,
        'images_intact': _COUNT,
        'images_bad': _COUNT,
        'rto_seconds': common.nullable({'type': 'number', 'minimum': 0}),
        'error': common.nullable({'type': 'string'}),
        'started_at': common.NULLABLE_TIME,
        'finished_at': common.NULLABLE_TIME,
        'created_at': common.NULLABLE_TIME,
        'updated_at': common.NULLABLE_TIME,
    },
}

_CHECK = common.nullable({'type': 'boolean'})

DRILL_IMAGE = {
    'type': 'object',
    'title': 'DrillImage',
    'required': ['source_image_id', 'replica_image_id', 'image_name',
                 'status', 'checks', 'error', 'seconds'],
    'properties': {
        'source_image_id': common.nullable({'type': 'string'}),
        'replica_image_id': common.nullable({'type': 'string'}),
        'image_name': common.nullable({'type': 'string'}),
        'status': {'type': 'string', 'enum': IMAGE_STATUSES},
        'checks': {
            'type': 'object',
            'required': CHECKS,
            'properties': {check: _CHECK for check in CHECKS},
        },
        'error': common.nullable({'type': 'string'}),
        'seconds': common.nullable({'type': 'number', 'minimum': 0}),
    },
}

DRILL_WITH_REPORT = copy.deepcopy(DRILL)
DRILL_WITH_REPORT['title'] = 'DrillWithReport'
DRILL_WITH_REPORT['required'].append('report')
DRILL_WITH_REPORT['properties']['report'] = {
    'type': 'object',
    'required': ['images'],
    'properties': {'images': {'type': 'array', 'items': DRILL_IMAGE}},
}

START_RESPONSE = common.one('drill', DRILL)

SHOW_RESPONSE = common.one('drill', DRILL_WITH_REPORT)

LIST_RESPONSE = common.page_of('drills', DRILL)
