"""The OpenAPI 3.0 document of the v1 API, built from the JSON Schemas
the API validates with (:mod:`dtn_migrate.api.schemas`).

``python -m dtn_migrate.api.openapi`` writes ``openapi.yaml`` next to
this module; a unit test checks that the file is what :func:`build`
makes, and that it lists exactly the router's routes.
"""

import copy
import os
import sys

import yaml

from dtn_migrate.api.schemas import common
from dtn_migrate.api.schemas import drills
from dtn_migrate.api.schemas import migrations
from dtn_migrate.api.schemas import peers
from dtn_migrate.api.schemas import protection_policies as \
    policy_schemas
from dtn_migrate.api.schemas import replicas

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                    'openapi.yaml')
JSON = 'application/json'
#: The document's info.version: the REST API's, not the package's.
API_VERSION = '1.0'

_ERRORS = {
    400: 'Bad request: a parameter or the body is invalid (the message '
         'names it).',
    401: 'No valid token.',
    403: 'The policy does not allow this to the caller.',
    404: 'No such resource (or one of another project).',
    405: 'The method is not allowed on this path.',
    409: 'The request conflicts with the state of the resource.',
    413: 'The request body is too large.',
    415: 'The body is not application/json.',
    503: 'The database or the engine is unavailable; try again.',
}


def to_openapi(schema):
    """A JSON Schema (draft 7) as an OpenAPI 3.0 Schema Object: a type
    list with null becomes ``nullable``; ``propertyNames`` (not in 3.0)
    is dropped.
    """
    if isinstance(schema, list):
        return [to_openapi(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key == 'propertyNames':
            continue
        if key in ('properties',):
            out[key] = {k: to_openapi(v) for k, v in value.items()}
        elif key in ('items', 'additionalProperties', 'not'):
            out[key] = to_openapi(value)
        elif key in ('oneOf', 'anyOf', 'allOf'):
            out[key] = [to_openapi(v) for v in value]
        else:
            out[key] = copy.deepcopy(value)
    kind = out.get('type')
    if isinstance(kind, list):
        kinds = [k for k in kind if k != 'null']
        if len(kinds) != 1:
            raise ValueError('cannot express type %r in OpenAPI 3.0'
                             % (kind,))
        out['type'] = kinds[0]
        if 'null' in kind:
            out['nullable'] = True
    elif kind == 'null':
        del out['type']
        out['nullable'] = True
        out['enum'] = [None]
    return out


def _ref(name):
    return {'$ref': '#/components/schemas/%s' % name}


def _json(schema, description):
    return {'description': description,
            'content': {JSON: {'schema': schema}}}


def _responses(ok_code, ok_schema, ok_description, errors):
    out = {str(ok_code): _json(ok_schema, ok_description)}
    for code in sorted(errors):
        out[str(code)] = _json(_ref('Error'), _ERRORS[code])
    return out


def _no_content(description, errors):
    out = {'204': {'description': description}}
    for code in sorted(errors):
        out[str(code)] = _json(_ref('Error'), _ERRORS[code])
    return out


def _query(schema):
    params = []
    for name, prop in schema.get('properties', {}).items():
        prop = to_openapi(prop)
        param = {'name': name, 'in': 'query', 'required': False}
        description = prop.pop('description', None)
        if description:
            param['description'] = description
        if prop.get('type') == 'array':
            param['style'] = 'form'
            param['explode'] = True
        param['schema'] = prop
        params.append(param)
    return params


def _path_param(name, description, schema):
    return {'name': name, 'in': 'path', 'required': True,
            'description': description, 'schema': schema}


def _body(name, description):
    return {'required': True, 'description': description,
            'content': {JSON: {'schema': _ref(name)}}}


def _protection_paths(max_limit):
    """The paths of protection policies and the replica catalog."""
    policy_id = _path_param(
        'policy_id', 'The id of a protection policy (32 hex digits, or a '
        'dashed UUID).', {'type': 'string', 'minLength': 1,
                          'maxLength': 255})
    return {
        '/v1/policies': {
            'get': {
                'operationId': 'listPolicies',
                'summary': "List the project's protection policies, "
                           "newest first, with their RPO state.",
                'description': 'Filters combine; pages follow the "next" '
                               'link.  Policies dtn:policy:list and, for '
                               'all_projects, '
                               'dtn:policy:list:all_projects.',
                'tags': ['policies'],
                'parameters': _query(policy_schemas.list_query(max_limit)),
                'responses': _responses(
                    200, to_openapi(policy_schemas.LIST_RESPONSE),
                    'A page of policies.', (400, 401, 403, 503)),
            },
            'post': {
                'operationId': 'createPolicy',
                'summary': 'Create a protection policy.',
                'description': 'The engine checks the schedule and the '
                               'peer, and starts replicating what the '
                               'selector picks.  Policy dtn:policy:create; '
                               'selector.projects or project_id also need '
                               'dtn:policy:create:projects, '
                               'options.target_project '
                               'dtn:policy:create:target_project and '
                               'options.keep_id true '
                               'dtn:policy:create:keep_id (403 naming the '
                               'option).',
                'tags': ['policies'],
                'requestBody': _body('PolicyCreate', 'The policy.'),
                'responses': _responses(
                    201, to_openapi(policy_schemas.SHOW_RESPONSE),
                    'The policy.',
                    (400, 401, 403, 404, 409, 413, 415, 503)),
            },
        },
        '/v1/policies/{policy_id}': {
            'parameters': [policy_id],
            'get': {
                'operationId': 'showPolicy',
                'summary': 'A protection policy: its selector, options, '
                           'RPO state and image counts.',
                'description': 'Policy dtn:policy:show.',
                'tags': ['policies'],
                'parameters': _query(policy_schemas.SHOW_QUERY),
                'responses': _responses(
                    200, to_openapi(policy_schemas.SHOW_RESPONSE),
                    'The policy.', (400, 401, 403, 404, 503)),
            },
            'put': {
                'operationId': 'updatePolicy',
                'summary': 'Change a protection policy.',
                'description': 'Only the fields given change; a selector '
                               'or options replaces the whole object.  '
                               'Policy dtn:policy:update (and, as for '
                               'a create, dtn:policy:create:projects, '
                               ':target_project and :keep_id for what '
                               'they guard).',
                'tags': ['policies'],
                'requestBody': _body('PolicyUpdate', 'The changes.'),
                'responses': _responses(
                    200, to_openapi(policy_schemas.SHOW_RESPONSE),
                    'The policy, changed.',
                    (400, 401, 403, 404, 409, 413, 415, 503)),
            },
            'delete': {
                'operationId': 'deletePolicy',
                'summary': 'Delete a protection policy.',
                'description': 'The replicas made stay, in both clouds.  '
                               'Policy dtn:policy:delete; a policy whose '
                               'role is not primary also needs '
                               'dtn:policy:delete:non_primary.',
                'tags': ['policies'],
                'parameters': _query(policy_schemas.SHOW_QUERY),
                'responses': _no_content(
                    'Deleted.', (400, 401, 403, 404, 409, 503)),
            },
        },
        '/v1/policies/{policy_id}/action': {
            'parameters': [policy_id],
            'post': {
                'operationId': 'policyAction',
                'summary': 'Sync, fail over or fail back a protection '
                           'policy.',
                'description': '{"sync": null} replicates now what the '
                               'policy selects and the peer lacks, '
                               'whatever its mode (policy '
                               'dtn:policy:sync); answers the policy and '
                               'the migrations.  {"failover": null}, in '
                               'the cloud holding the replicas of a '
                               'replica policy: this cloud becomes '
                               'primary for their images and a reverse '
                               'policy towards the peer is prepared '
                               '(policy dtn:policy:failover); answers '
                               'the policy, the reverse policy and the '
                               'count of promoted images.  {"failback": '
                               'null} on a failed-over policy sends back '
                               'what was created or changed since the '
                               'failover (policy dtn:policy:failback); '
                               'answers the policy, the reverse policy, '
                               'the migrations and whether it is '
                               'complete (repeat until it is).  Both '
                               'are idempotent; a policy of the wrong '
                               'role answers 409.',
                'tags': ['policies'],
                'requestBody': _body('PolicyAction', 'The action.'),
                'responses': _responses(
                    202, to_openapi(policy_schemas.ACTION_RESPONSE),
                    "The action's result: PolicySyncResult, "
                    "PolicyFailoverResult or PolicyFailbackResult.",
                    (400, 401, 403, 404, 409, 413, 415, 503)),
            },
        },
        '/v1/policies/{policy_id}/images': {
            'parameters': [policy_id],
            'get': {
                'operationId': 'listPolicyImages',
                'summary': 'The images a protection policy protects, and '
                           'their replication state.',
                'description': 'Policy dtn:policy:show.',
                'tags': ['policies'],
                'parameters': _query(policy_schemas.images_query(max_limit)),
                'responses': _responses(
                    200, to_openapi(policy_schemas.IMAGES_RESPONSE),
                    'A page of images.', (400, 401, 403, 404, 503)),
            },
        },
        '/v1/replicas': {'get': {
            'operationId': 'listReplicas',
            'summary': 'The replica catalog: which image is a replica of '
                       'which, newest first.',
            'description': 'outgoing entries are this cloud\'s images '
                           'replicated to a peer; incoming ones the '
                           'replicas this cloud holds.  Policies '
                           'dtn:replica:list and, for all_projects, '
                           'dtn:replica:list:all_projects.',
            'tags': ['replicas'],
            'parameters': _query(replicas.list_query(max_limit)),
            'responses': _responses(
                200, to_openapi(replicas.LIST_RESPONSE),
                'A page of replicas.', (400, 401, 403, 503)),
        }},
    }


def _drill_paths(max_limit):
    """The paths of the drills of protection policies."""
    drill_id = _path_param(
        'drill_id', 'The id of a drill (32 hex digits, or a dashed '
        'UUID).', {'type': 'string', 'minLength': 1, 'maxLength': 255})
    return {
        '/v1/drills': {
            'get': {
                'operationId': 'listDrills',
                'summary': "List the project's drills, newest first, "
                           "with their results (no report).",
                'description': 'Filters combine; pages follow the "next" '
                               'link.  Policies dtn:drill:list and, for '
                               'all_projects, dtn:drill:list:all_projects.',
                'tags': ['drills'],
                'parameters': _query(drills.list_query(max_limit)),
                'responses': _responses(
                    200, to_openapi(drills.LIST_RESPONSE),
                    'A page of drills.', (400, 401, 403, 503)),
            },
            'post': {
                'operationId': 'startDrill',
                'summary': 'Start a drill of a protection policy in the '
                           'cloud that holds its replicas.',
                'description': 'The engine checks every replica of the '
                               'policy in the background (present and '
                               'active, size and hash, qemu-img check, '
                               'optionally a clone) and measures the RTO; '
                               'follow the drill with GET '
                               '/v1/drills/{drill_id} until its state is '
                               'no longer running.  Policy '
                               'dtn:drill:start.',
                'tags': ['drills'],
                'requestBody': _body('DrillStart', 'The drill.'),
                'responses': _responses(
                    202, to_openapi(drills.START_RESPONSE),
                    'The drill, running.',
                    (400, 401, 403, 404, 409, 413, 415, 503)),
            },
        },
        '/v1/drills/{drill_id}': {
            'parameters': [drill_id],
            'get': {
                'operationId': 'showDrill',
                'summary': 'A drill and its report: the check of every '
                           'replica.',
                'description': 'Policy dtn:drill:show.',
                'tags': ['drills'],
                'parameters': _query(drills.SHOW_QUERY),
                'responses': _responses(
                    200, to_openapi(drills.SHOW_RESPONSE),
                    'The drill.', (400, 401, 403, 404, 503)),
            },
        },
    }


def build(max_limit=1000):
    """The OpenAPI document, as a dict."""
    migration_id = _path_param(
        'migration_id', 'The id of a migration (32 hex digits, or a '
        'dashed UUID).', {'type': 'string', 'minLength': 1,
                          'maxLength': 255})
    peer_name = _path_param('name', 'The name of a peer DTN.',
                            {'type': 'string', 'minLength': 1,
                             'maxLength': 255})
    paths = {
        '/': {'get': {
            'operationId': 'listVersions',
            'summary': 'The versions of the API (no token needed).',
            'tags': ['versions'],
            'security': [],
            'responses': _responses(200, _ref('Versions'),
                                    'The API versions.', ()),
        }},
        '/v1': {'get': {
            'operationId': 'showVersion',
            'summary': 'Version v1.',
            'tags': ['versions'],
            'responses': _responses(200, _ref('VersionDocument'),
                                    'The API version.', (401,)),
        }},
        '/v1/': {'get': {
            'operationId': 'showVersionSlash',
            'summary': 'Version v1 (the same as /v1).',
            'tags': ['versions'],
            'responses': _responses(200, _ref('VersionDocument'),
                                    'The API version.', (401,)),
        }},
        '/v1/migrations': {
            'get': {
                'operationId': 'listMigrations',
                'summary': "List the project's migrations, newest first.",
                'description': 'Filters combine; pages follow the "next" '
                               'link (present while another page may '
                               'exist).  Policies dtn:migration:list and, '
                               'for all_projects, '
                               'dtn:migration:list:all_projects.',
                'tags': ['migrations'],
                'parameters': _query(migrations.list_query(max_limit)),
                'responses': _responses(
                    200, to_openapi(migrations.LIST_RESPONSE),
                    'A page of migrations.', (400, 401, 403, 503)),
            },
            'post': {
                'operationId': 'createMigrations',
                'summary': 'Migrate images to a peer cloud.',
                'description': 'One migration per image.  The same '
                               'request_id from the same project answers '
                               'with the same records, so a retry is '
                               'safe.  Policy dtn:migration:create; '
                               'options.target_project also needs '
                               'dtn:migration:create:target_project, '
                               'options.keep_id true '
                               'dtn:migration:create:keep_id, and a '
                               'visibility other than private '
                               'dtn:migration:create:visibility (403 '
                               'naming the option).  Without the last, '
                               'the images are imported private.  An '
                               'image the project already migrated to the '
                               'peer gets that migration (reused true) '
                               'when it runs with the same options, or '
                               'completed with the copy asked for; force '
                               'or other options while one runs answer '
                               '409 naming it; other options than a '
                               'complete one\'s make a new migration.',
                'tags': ['migrations'],
                'requestBody': _body('MigrationCreate',
                                     'The images, the peer, options.'),
                'responses': _responses(
                    202, to_openapi(migrations.CREATE_RESPONSE),
                    'The migrations, queued or reused.',
                    (400, 401, 403, 404, 409, 413, 415, 503)),
            },
        },
        '/v1/migrations/{migration_id}': {
            'parameters': [migration_id],
            'get': {
                'operationId': 'showMigration',
                'summary': 'A migration with its stage bytes, rate, ETA '
                           'and event timeline.',
                'description': 'Policy dtn:migration:show.',
                'tags': ['migrations'],
                'parameters': _query(migrations.SHOW_QUERY),
                'responses': _responses(
                    200, to_openapi(migrations.SHOW_RESPONSE),
                    'The migration.', (400, 401, 403, 404, 503)),
            },
        },
        '/v1/migrations/{migration_id}/action': {
            'parameters': [migration_id],
            'post': {
                'operationId': 'migrationAction',
                'summary': 'Cancel or retry a migration.',
                'description': '{"cancel": null} cancels a queued or '
                               'running migration; {"retry": null} tries '
                               'a failed or cancelled outgoing one again. '
                               'Policies dtn:migration:cancel and '
                               'dtn:migration:retry.',
                'tags': ['migrations'],
                'requestBody': _body('MigrationAction', 'The action.'),
                'responses': _responses(
                    202, to_openapi(migrations.ACTION_RESPONSE),
                    'The migration, as the action left it.',
                    (400, 401, 403, 404, 409, 413, 415, 503)),
            },
        },
        '/v1/peers': {'get': {
            'operationId': 'listPeers',
            'summary': "The peer DTNs' health, as this cloud's agent "
                       "measures it.",
            'description': 'Policy dtn:peer:list; address, port and '
                           'error only with dtn:peer:show:details.',
            'tags': ['peers'],
            'parameters': _query(peers.LIST_QUERY),
            'responses': _responses(200, to_openapi(peers.LIST_RESPONSE),
                                    'The peers.', (400, 401, 403, 503)),
        }},
        '/v1/peers/{name}': {
            'parameters': [peer_name],
            'get': {
                'operationId': 'showPeer',
                'summary': "One peer DTN's health.",
                'description': 'Policy dtn:peer:show; address, port and '
                               'error only with dtn:peer:show:details.',
                'tags': ['peers'],
                'parameters': _query(peers.LIST_QUERY),
                'responses': _responses(
                    200, to_openapi(peers.SHOW_RESPONSE), 'The peer.',
                    (400, 401, 403, 404, 503)),
            },
        },
    }
    paths.update(_protection_paths(max_limit))
    paths.update(_drill_paths(max_limit))
    for item in paths.values():
        for op in item.values():
            if isinstance(op, dict) and not op.get('parameters', True):
                del op['parameters']
    return {
        'openapi': '3.0.3',
        'info': {
            'title': 'dtn-migrate API',
            'version': API_VERSION,
            'description': 'Move VM images between OpenStack clouds '
                           'through Data Transfer Nodes.  Service type '
                           'dtn-migration in the Keystone catalog; every '
                           'request but GET / carries a Keystone token '
                           '(X-Auth-Token).  Errors answer {"error": '
                           '{"code", "title", "message"}}.',
            'license': {'name': 'Apache 2.0',
                        'url': 'https://www.apache.org/licenses/'
                               'LICENSE-2.0'},
        },
        'tags': [{'name': 'versions'}, {'name': 'migrations'},
                 {'name': 'peers'}, {'name': 'policies'},
                 {'name': 'replicas'}, {'name': 'drills'}],
        'paths': paths,
        'components': {
            'securitySchemes': {
                'keystone': {'type': 'apiKey', 'in': 'header',
                             'name': 'X-Auth-Token',
                             'description': 'A project-scoped Keystone '
                                            'token.'},
            },
            'schemas': {
                'Error': to_openapi(common.ERROR),
                'Versions': to_openapi(common.VERSIONS_RESPONSE),
                'VersionDocument': to_openapi(common.VERSION_RESPONSE),
                'MigrationCreate': to_openapi(migrations.CREATE),
                'MigrationAction': to_openapi(migrations.ACTION),
                'Migration': to_openapi(migrations.MIGRATION),
                'MigrationDetail': to_openapi(
                    migrations.MIGRATION_WITH_EVENTS),
                'MigrationEvent': to_openapi(migrations.EVENT),
                'Peer': to_openapi(peers.PEER),
                'PolicyCreate': to_openapi(policy_schemas.CREATE),
                'PolicyUpdate': to_openapi(policy_schemas.UPDATE),
                'PolicyAction': to_openapi(policy_schemas.ACTION),
                'Policy': to_openapi(policy_schemas.POLICY),
                'PolicyImage': to_openapi(policy_schemas.POLICY_IMAGE),
                'Replica': to_openapi(replicas.REPLICA),
                'DrillStart': to_openapi(drills.START),
                'Drill': to_openapi(drills.DRILL),
                'DrillWithReport': to_openapi(drills.DRILL_WITH_REPORT),
                'DrillImage': to_openapi(drills.DRILL_IMAGE),
            },
        },
        'security': [{'keystone': []}],
    }


def dump(document):
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True,
                          width=79)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    path = argv[0] if argv else PATH
    text = ("# Generated by python -m dtn_migrate.api.openapi from the "
            "API's JSON Schemas;\n# do not edit.\n") + dump(build())
    with open(path, 'w') as f:
        f.write(text)


if __name__ == '__main__':
    main()
