"""Schemas of /v1/policies: protection policies, which keep the images
they select replicated to a peer cloud.

Every object is closed (``additionalProperties: false``) and every
string and list bounded: what the engine stores is what was checked
here.  The engine checks what needs more than a schema (the cron syntax
of ``schedule``, that the peer exists).
"""

import copy

from dtn_migrate.api.schemas import common
from dtn_migrate.api.schemas import migrations
from dtn_migrate.common import states

MODES = list(states.POLICY_MODES)
RPO_STATES = list(states.RPO_STATES)
IMAGE_STATES = list(states.POLICY_IMAGE_STATES)
ROLES = list(states.POLICY_ROLES)
ACTIONS = ['sync', 'failover', 'failback']
VISIBILITIES = migrations.VISIBILITIES
DELETIONS = list(states.DELETIONS)
SORT_KEYS = ['created_at', 'updated_at', 'name', 'rpo_seconds', 'id']
#: A year: the largest RPO and deletion grace, in minutes.
MAX_MINUTES = 525600
MAX_TAGS = 50
MAX_PROPERTIES = 100
MAX_PROJECTS = 100
#: The selector keys of which a policy needs at least one (a policy
#: never selects "everything" by accident).
SELECTING_KEYS = ('tags', 'properties', 'name_pattern', 'visibility')

#: Text that may span lines (a description): no NUL nor other control
#: characters but tab and newlines.
_TEXT = {'type': 'string', 'maxLength': 1024,
         'pattern': '^[^\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f'
                    '\\u007f]*$'}

SELECTOR = {
    'type': 'object',
    'title': 'PolicySelector',
    'description': 'Which images the policy protects: every key given '
                   'must match (all the tags, every property, any of '
                   'the visibilities, any of the projects).  At least '
                   'one of tags, properties, name_pattern and visibility '
                   'is required; projects is for administrators.',
    'properties': {
        'tags': {'type': 'array', 'maxItems': MAX_TAGS,
                 'uniqueItems': True, 'items': common.name()},
        'properties': {
            'type': 'object', 'maxProperties': MAX_PROPERTIES,
            'propertyNames': common.name(),
            'additionalProperties': common.name(),
        },
        'visibility': {'type': 'array', 'maxItems': len(VISIBILITIES),
                       'uniqueItems': True,
                       'items': {'type': 'string', 'enum': VISIBILITIES}},
        'name_pattern': common.name(),
        'projects': {'type': 'array', 'maxItems': MAX_PROJECTS,
                     'uniqueItems': True, 'items': common.name(64)},
    },
    'additionalProperties': False,
}

OPTIONS = {
    'type': 'object',
    'title': 'PolicyOptions',
    'properties': {
        'keep_id': {'type': 'boolean'},
        'target_project': common.nullable(common.name(64)),
        'deletion': {'type': 'string', 'enum': DELETIONS},
        'deletion_grace_minutes': {'type': 'integer', 'minimum': 0,
                                   'maximum': MAX_MINUTES},
    },
    'additionalProperties': False,
}

_FIELDS = {
    'name': common.name(),
    'description': common.nullable(_TEXT),
    'peer': common.name(),
    'mode': {'type': 'string', 'enum': MODES},
    'schedule': common.nullable(common.name()),
    'rpo_minutes': {'type': 'integer', 'minimum': 1,
                    'maximum': MAX_MINUTES},
    'selector': SELECTOR,
    'options': OPTIONS,
    'enabled': {'type': 'boolean'},
}

CREATE = {
    'type': 'object',
    'title': 'PolicyCreate',
    'description': 'A protection policy: replicate the images the '
                   'selector picks to the peer, continuously (on every '
                   'change Glance notifies), on a cron schedule, or only '
                   'when asked (manual).  project_id (administrators) '
                   'makes another project the owner.',
    'properties': dict(_FIELDS, project_id=common.name(64)),
    'required': ['name', 'peer', 'selector'],
    'additionalProperties': False,
}

UPDATE = {
    'type': 'object',
    'title': 'PolicyUpdate',
    'description': 'The fields to change; a selector or options given '
                   'replaces the whole object.',
    'properties': copy.deepcopy(_FIELDS),
    'minProperties': 1,
    'additionalProperties': False,
}

ACTION = {
    'type': 'object',
    'title': 'PolicyAction',
    'description': 'One action: {"sync": null} replicates now what the '
                   'policy selects and the peer lacks; {"failover": '
                   'null}, in the cloud holding the replicas, makes it '
                   'primary for their images and prepares the reverse '
                   'policy; {"failback": null} sends back what changed '
                   'since the failover (repeat until complete).',
    'properties': {name: {'type': 'null'} for name in ACTIONS},
    'minProperties': 1,
    'maxProperties': 1,
    'additionalProperties': False,
}

_LIST_QUERY = {
    'type': 'object',
    'properties': {
        'name': dict(common.name(), description='Only the policy of this '
                                                'name.'),
        'peer': dict(common.name(), description='Only policies to this '
                                                'peer.'),
        'mode': {'type': 'array', 'maxItems': len(MODES),
                 'items': {'type': 'string', 'enum': MODES},
                 'description': 'Only policies of these modes (repeat '
                                'the parameter for several).'},
        'rpo_state': {'type': 'array', 'maxItems': len(RPO_STATES),
                      'items': {'type': 'string', 'enum': RPO_STATES},
                      'description': 'Only policies in these RPO states '
                                     '(repeat for several).'},
        'enabled': {'type': 'boolean',
                    'description': 'Only enabled (true) or disabled '
                                   '(false) policies.'},
        'marker': common.marker('policy'),
        'limit': common.limit(),
        **common.sorting(SORT_KEYS),
        'all_projects': common.all_projects('Policies'),
    },
    'additionalProperties': False,
}

_IMAGES_QUERY = {
    'type': 'object',
    'properties': {
        'state': {'type': 'array', 'maxItems': len(IMAGE_STATES),
                  'items': {'type': 'string', 'enum': IMAGE_STATES},
                  'description': 'Only images in these states (repeat '
                                 'for several).'},
        'marker': dict(common.UUID,
                       description='The image_id of the last image of '
                                   'the previous page.'),
        'limit': common.limit(),
    },
    'additionalProperties': False,
}


def list_query(max_limit=1000):
    return common.limited(_LIST_QUERY, max_limit)


def images_query(max_limit=1000):
    return common.limited(_IMAGES_QUERY, max_limit)


SHOW_QUERY = common.NO_QUERY

_COUNT = {'type': 'integer', 'minimum': 0}

POLICY = {
    'type': 'object',
    'title': 'Policy',
    'required': ['id', 'name', 'description', 'project_id', 'user_id',
                 'peer', 'mode', 'schedule', 'enabled', 'role',
                 'selector', 'options', 'rpo', 'images', 'last_sync_at',
                 'last_error', 'created_at', 'updated_at'],
    'properties': {
        'id': {'type': 'string'},
        'name': {'type': 'string'},
        'description': common.nullable({'type': 'string'}),
        'project_id': common.nullable({'type': 'string'}),
        'user_id': common.nullable({'type': 'string'}),
        'peer': {'type': 'string'},
        'mode': {'type': 'string', 'enum': MODES},
        'schedule': common.nullable({'type': 'string'}),
        'enabled': {'type': 'boolean'},
        'role': {'type': 'string'},
        'selector': {
            'type': 'object',
            'required': ['tags', 'properties', 'visibility',
                         'name_pattern', 'projects'],
            'properties': {
                'tags': {'type': 'array', 'items': {'type': 'string'}},
                'properties': {'type': 'object',
                               'additionalProperties': {'type': 'string'}},
                'visibility': {'type': 'array',
                               'items': {'type': 'string'}},
                'name_pattern': common.nullable({'type': 'string'}),
                'projects': {'type': 'array', 'items': {'type': 'string'}},
            },
        },
        'options': {
            'type': 'object',
            'required': ['keep_id', 'target_project', 'deletion',
                         'deletion_grace_minutes'],
            'properties': {
                'keep_id': {'type': 'boolean'},
                'target_project': common.nullable({'type': 'string'}),
                'deletion': {'type': 'string'},
                'deletion_grace_minutes': {'type': 'integer',
                                           'minimum': 0},
            },
        },
        'rpo': {
            'type': 'object',
            'required': ['target_minutes', 'state', 'seconds',
                         'checked_at'],
            'properties': {
                'target_minutes': common.nullable({'type': 'integer'}),
                'state': common.nullable({'type': 'string',
                                          'enum': RPO_STATES + [None]}),
                'seconds': common.nullable({'type': 'number',
                                            'minimum': 0}),
                'checked_at': common.NULLABLE_TIME,
            },
        },
        'images': {
            'type': 'object',
            'required': IMAGE_STATES,
            'properties': {state: _COUNT for state in IMAGE_STATES},
        },
        'last_sync_at': common.NULLABLE_TIME,
        'last_error': common.nullable({'type': 'string'}),
        'created_at': common.NULLABLE_TIME,
        'updated_at': common.NULLABLE_TIME,
    },
}

POLICY_IMAGE = {
    'type': 'object',
    'title': 'PolicyImage',
    'required': ['image_id', 'image_name', 'project_id', 'state',
                 'os_hash_value', 'size', 'changed_at', 'replicated_at',
                 'migration_id', 'error', 'updated_at'],
    'properties': {
        'image_id': {'type': 'string'},
        'image_name': common.nullable({'type': 'string'}),
        'project_id': common.nullable({'type': 'string'}),
        'state': {'type': 'string', 'enum': IMAGE_STATES},
        'os_hash_value': common.nullable({'type': 'string'}),
        'size': common.nullable({'type': 'integer', 'minimum': 0}),
        'changed_at': common.NULLABLE_TIME,
        'replicated_at': common.NULLABLE_TIME,
        'migration_id': common.nullable({'type': 'string'}),
        'error': common.nullable({'type': 'string'}),
        'updated_at': common.NULLABLE_TIME,
    },
}

LIST_RESPONSE = common.page_of('policies', POLICY)

SHOW_RESPONSE = common.one('policy', POLICY)

SYNC_RESPONSE = {
    'type': 'object',
    'title': 'PolicySyncResult',
    'required': ['policy', 'migrations'],
    'properties': {
        'policy': POLICY,
        'migrations': {'type': 'array', 'items': migrations.MIGRATION},
    },
}

FAILOVER_RESPONSE = {
    'type': 'object',
    'title': 'PolicyFailoverResult',
    'required': ['policy', 'reverse_policy', 'promoted'],
    'properties': {
        'policy': POLICY,
        'reverse_policy': POLICY,
        'promoted': _COUNT,
    },
}

FAILBACK_RESPONSE = {
    'type': 'object',
    'title': 'PolicyFailbackResult',
    'required': ['policy', 'reverse_policy', 'migrations', 'complete'],
    'properties': {
        'policy': POLICY,
        'reverse_policy': common.nullable(POLICY),
        'migrations': {'type': 'array', 'items': migrations.MIGRATION},
        'complete': {'type': 'boolean'},
    },
}

#: The answer of each action.
ACTION_RESPONSES = {'sync': SYNC_RESPONSE, 'failover': FAILOVER_RESPONSE,
                    'failback': FAILBACK_RESPONSE}

ACTION_RESPONSE = {'anyOf': [SYNC_RESPONSE, FAILOVER_RESPONSE,
                             FAILBACK_RESPONSE]}

IMAGES_RESPONSE = common.page_of('images', POLICY_IMAGE)
