"""Policies of /v1/drills: disaster-recovery drills of protection
policies.

A drill runs where the replicas are (the DR cloud): it checks every
replica of a policy and measures how long making them usable takes.
It only reads images and removes what it creates, so starting one is a
member's business; its report is for readers too.  A drill with clones
writes a copy of every replica into Glance: an administrator's.
"""

from oslo_policy import policy

from dtn_migrate.policies import base

DRILL = 'dtn:drill:%s'
COLLECTION = '/v1/drills'
RESOURCE = '/v1/drills/{drill_id}'

rules = [
    policy.DocumentedRuleDefault(
        name=DRILL % 'start',
        check_str=base.ADMIN_OR_PROJECT_MEMBER,
        description="Start a drill of a protection policy: check every "
                    "replica of the policy in this cloud and measure the "
                    "time to recover (RTO).",
        operations=[{'method': 'POST', 'path': COLLECTION}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=DRILL % 'start:clone',
        check_str=base.ADMIN,
        description="Start a drill that also clones every replica of the "
                    "policy into Glance (clone=true), and removes the "
                    "clones.",
        operations=[{'method': 'POST', 'path': COLLECTION}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=DRILL % 'list',
        check_str=base.ADMIN_OR_PROJECT_READER,
        description="List the project's drills and their results.",
        operations=[{'method': 'GET', 'path': COLLECTION}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=DRILL % 'list:all_projects',
        check_str=base.ADMIN,
        description='List the drills of every project '
                    '(all_projects=true).',
        operations=[{'method': 'GET',
                     'path': COLLECTION + '?all_projects=true'}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=DRILL % 'show',
        check_str=base.ADMIN_OR_PROJECT_READER,
        description='Show a drill and its report: the check of every '
                    'replica.',
        operations=[{'method': 'GET', 'path': RESOURCE}],
        scope_types=['project']),
]


def list_rules():
    return rules
