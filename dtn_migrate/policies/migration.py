"""Policies of /v1/migrations."""

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
