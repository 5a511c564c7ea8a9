"""Policies of /v1/migrations.

Migrating is a member's business; what the images become on the peer
is an administrator's: the project they land in (a project of the peer
cloud), a visibility other than private, and the source's image ids.
The peer's own rules ([peer:<name>] of its engine) bound all three
again, but they cannot tell one source project's member from another,
nor from an administrator.
"""

from oslo_policy import policy

from dtn_migrate.policies import base

PREFIX = 'dtn:migration:%s'
COLLECTION = '/v1/migrations'
RESOURCE = '/v1/migrations/{migration_id}'
ACTION = '/v1/migrations/{migration_id}/action'

rules = [
    policy.DocumentedRuleDefault(
        name=PREFIX % 'create',
        check_str=base.ADMIN_OR_PROJECT_MEMBER,
        description='Migrate images of the project to a peer cloud.',
        operations=[{'method': 'POST', 'path': COLLECTION}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=PREFIX % 'create:target_project',
        check_str=base.ADMIN,
        description='Ask the peer cloud for the project the images are '
                    'imported into (options.target_project).',
        operations=[{'method': 'POST', 'path': COLLECTION}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=PREFIX % 'create:visibility',
        check_str=base.ADMIN,
        description='Give the images a visibility other than private on '
                    'the peer cloud: ask for one (options.visibility '
                    'shared, community or public), or keep the source '
                    "image's.  Without it the images are imported "
                    'private.',
        operations=[{'method': 'POST', 'path': COLLECTION}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=PREFIX % 'create:keep_id',
        check_str=base.ADMIN,
        description='Create the images on the peer cloud with the ids '
                    'they have here (options.keep_id).',
        operations=[{'method': 'POST', 'path': COLLECTION}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=PREFIX % 'list',
        check_str=base.ADMIN_OR_PROJECT_READER,
        description="List the project's migrations.",
        operations=[{'method': 'GET', 'path': COLLECTION}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=PREFIX % 'list:all_projects',
        check_str=base.ADMIN,
        description='List the migrations of every project '
                    '(all_projects=true).',
        operations=[{'method': 'GET',
                     'path': COLLECTION + '?all_projects=true'}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=PREFIX % 'show',
        check_str=base.ADMIN_OR_PROJECT_READER,
        description='Show a migration with its stage bytes, rate, ETA and '
                    'event timeline.',
        operations=[{'method': 'GET', 'path': RESOURCE}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=PREFIX % 'cancel',
        check_str=base.ADMIN_OR_PROJECT_MEMBER,
        description='Cancel a queued or running migration.',
        operations=[{'method': 'POST', 'path': ACTION + ' (cancel)'}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=PREFIX % 'retry',
        check_str=base.ADMIN_OR_PROJECT_MEMBER,
        description='Retry a failed or cancelled outgoing migration.',
        operations=[{'method': 'POST', 'path': ACTION + ' (retry)'}],
        scope_types=['project']),
]


def list_rules():
    return rules
