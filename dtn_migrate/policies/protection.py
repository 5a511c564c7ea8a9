"""Policies of /v1/policies (protection policies) and /v1/replicas (the
replica catalog).

A protection policy keeps the images it selects replicated to a peer
cloud; managing one is a member's business, like migrating.  Selecting
the images of other projects (``selector.projects``) or creating a
policy for another project (``project_id``) is an administrator's, and
so is choosing what the replicas become on the peer (their project,
their ids), as for migrations.  Failover and failback are an
administrator's too: an operator's decisions, taken in the cloud that
holds the replicas, on policies of whatever project the replicas were
imported into; and so is deleting a policy that is not primary (a
replica, failed-over or failback policy), which a failback needs.
"""

from oslo_policy import policy

from dtn_migrate.policies import base

POLICY = 'dtn:policy:%s'
REPLICA = 'dtn:replica:%s'
COLLECTION = '/v1/policies'
RESOURCE = '/v1/policies/{policy_id}'
ACTION = '/v1/policies/{policy_id}/action'
IMAGES = '/v1/policies/{policy_id}/images'
REPLICAS = '/v1/replicas'

rules = [
    policy.DocumentedRuleDefault(
        name=POLICY % 'create',
        check_str=base.ADMIN_OR_PROJECT_MEMBER,
        description='Create a protection policy that keeps images of the '
                    'project replicated to a peer cloud.',
        operations=[{'method': 'POST', 'path': COLLECTION}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=POLICY % 'create:projects',
        check_str=base.ADMIN,
        description='Create or change a protection policy whose selector '
                    'names projects (selector.projects), or create one '
                    'owned by another project (project_id).',
        operations=[{'method': 'POST', 'path': COLLECTION},
                    {'method': 'PUT', 'path': RESOURCE}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=POLICY % 'create:target_project',
        check_str=base.ADMIN,
        description='Create or change a protection policy that asks the '
                    'peer cloud for the project its replicas are '
                    'imported into (options.target_project).',
        operations=[{'method': 'POST', 'path': COLLECTION},
                    {'method': 'PUT', 'path': RESOURCE}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=POLICY % 'create:keep_id',
        check_str=base.ADMIN,
        description='Create or change a protection policy whose replicas '
                    'get the ids of their source images '
                    '(options.keep_id).',
        operations=[{'method': 'POST', 'path': COLLECTION},
                    {'method': 'PUT', 'path': RESOURCE}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=POLICY % 'list',
        check_str=base.ADMIN_OR_PROJECT_READER,
        description="List the project's protection policies with their "
                    "RPO state.",
        operations=[{'method': 'GET', 'path': COLLECTION}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=POLICY % 'list:all_projects',
        check_str=base.ADMIN,
        description='List the protection policies of every project '
                    '(all_projects=true).',
        operations=[{'method': 'GET',
                     'path': COLLECTION + '?all_projects=true'}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=POLICY % 'show',
        check_str=base.ADMIN_OR_PROJECT_READER,
        description='Show a protection policy and the images it '
                    'protects.',
        operations=[{'method': 'GET', 'path': RESOURCE},
                    {'method': 'GET', 'path': IMAGES}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=POLICY % 'update',
        check_str=base.ADMIN_OR_PROJECT_MEMBER,
        description='Change a protection policy.',
        operations=[{'method': 'PUT', 'path': RESOURCE}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=POLICY % 'delete',
        check_str=base.ADMIN_OR_PROJECT_MEMBER,
        description='Delete a protection policy (its replicas stay).',
        operations=[{'method': 'DELETE', 'path': RESOURCE}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=POLICY % 'delete:non_primary',
        check_str=base.ADMIN,
        description='Delete a protection policy whose role is not '
                    'primary: a replica policy (learnt from the peer), a '
                    'failed-over one, or a failback (reverse) policy, '
                    'which a failback needs.',
        operations=[{'method': 'DELETE', 'path': RESOURCE}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=POLICY % 'sync',
        check_str=base.ADMIN_OR_PROJECT_MEMBER,
        description='Replicate now what a protection policy selects and '
                    'the peer lacks.',
        operations=[{'method': 'POST', 'path': ACTION + ' (sync)'}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=POLICY % 'failover',
        check_str=base.ADMIN,
        description='Fail over a protection policy in the cloud that '
                    'holds its replicas: make that cloud primary for '
                    'their images and prepare the reverse policy that '
                    'will send back what changes there.',
        operations=[{'method': 'POST', 'path': ACTION + ' (failover)'}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=POLICY % 'failback',
        check_str=base.ADMIN,
        description='Fail back a failed-over protection policy: send '
                    'back to the peer what was created or changed since '
                    'the failover; once complete, the policy is a '
                    'replica again.',
        operations=[{'method': 'POST', 'path': ACTION + ' (failback)'}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=REPLICA % 'list',
        check_str=base.ADMIN_OR_PROJECT_READER,
        description="List the replica catalog entries of the project's "
                    "images, in both directions.",
        operations=[{'method': 'GET', 'path': REPLICAS}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=REPLICA % 'list:all_projects',
        check_str=base.ADMIN,
        description='List the replica catalog of every project '
                    '(all_projects=true).',
        operations=[{'method': 'GET',
                     'path': REPLICAS + '?all_projects=true'}],
        scope_types=['project']),
]


def list_rules():
    return rules
