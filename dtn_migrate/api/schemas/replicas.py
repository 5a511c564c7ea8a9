"""Schemas of /v1/replicas: the replica catalog, which image of which
cloud is a replica of which (on the source's side, ``outgoing``; on the
replica's, ``incoming``).
"""

from dtn_migrate.api.schemas import common
from dtn_migrate.common import states

DIRECTIONS = list(states.DIRECTIONS)
STATES = list(states.REPLICA_STATES)

_LIST_QUERY = {
    'type': 'object',
    'properties': {
        'peer': dict(common.name(), description='Only replicas to or '
                                                'from this peer.'),
        'direction': {'type': 'string', 'enum': DIRECTIONS,
                      'description': 'outgoing (this cloud holds the '
                                     'source) or incoming (this cloud '
                                     'holds the replica).'},
        'policy_id': dict(common.UUID, description='Only the replicas '
                                                   'of this policy.'),
        'source_image_id': dict(common.UUID,
                                description='Only the replicas of this '
                                            'source image.'),
        'state': {'type': 'array', 'maxItems': len(STATES),
                  'items': {'type': 'string', 'enum': STATES},
                  'description': 'Only replicas in these states (repeat '
                                 'for several).'},
        'marker': {'type': 'integer', 'minimum': 1,
                   'maximum': 2 ** 63 - 1,
                   'description': 'The id of the last replica of the '
                                  'previous page.'},
        'limit': common.limit(),
        'all_projects': common.all_projects('Replicas'),
    },
    'additionalProperties': False,
}


def list_query(max_limit=1000):
    return common.limited(_LIST_QUERY, max_limit)


REPLICA = {
    'type': 'object',
    'title': 'Replica',
    'required': ['id', 'direction', 'peer', 'source_image_id',
                 'replica_image_id', 'project_id', 'image_name', 'size',
                 'hash_algo', 'hash_value', 'migration_id', 'policy_id',
                 'state', 'verified_at', 'created_at', 'updated_at'],
    'properties': {
        'id': {'type': 'integer'},
        'direction': {'type': 'string', 'enum': DIRECTIONS},
        'peer': {'type': 'string'},
        'source_image_id': {'type': 'string'},
        'replica_image_id': common.nullable({'type': 'string'}),
        'project_id': common.nullable({'type': 'string'}),
        'image_name': common.nullable({'type': 'string'}),
        'size': common.nullable({'type': 'integer', 'minimum': 0}),
        'hash_algo': common.nullable({'type': 'string'}),
        'hash_value': common.nullable({'type': 'string'}),
        'migration_id': common.nullable({'type': 'string'}),
        'policy_id': common.nullable({'type': 'string'}),
        'state': {'type': 'string', 'enum': STATES},
        'verified_at': common.NULLABLE_TIME,
        'created_at': common.NULLABLE_TIME,
        'updated_at': common.NULLABLE_TIME,
    },
}

LIST_RESPONSE = common.page_of('replicas', REPLICA)
