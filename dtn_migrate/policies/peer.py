"""Policies of /v1/peers.

Whether a peer is reachable, and how fast, is for every reader; where
its DTN listens (address, port) and why a probe failed (the raw error,
which names addresses and keys' troubles) is for administrators.
"""

from oslo_policy import policy

from dtn_migrate.policies import base

PREFIX = 'dtn:peer:%s'

rules = [
    policy.DocumentedRuleDefault(
        name=PREFIX % 'list',
        check_str=base.ADMIN_OR_PROJECT_READER,
        description='List the peer DTNs with their health: reachability, '
                    'round-trip time and last measured throughput.',
        operations=[{'method': 'GET', 'path': '/v1/peers'}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=PREFIX % 'show',
        check_str=base.ADMIN_OR_PROJECT_READER,
        description='Show the health of one peer DTN.',
        operations=[{'method': 'GET', 'path': '/v1/peers/{name}'}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=PREFIX % 'show:details',
        check_str=base.ADMIN,
        description="See a peer DTN's address and port, and the error of "
                    "its last probe, in the peers' health.  Without it "
                    "they are left out of the answer.",
        operations=[{'method': 'GET', 'path': '/v1/peers'},
                    {'method': 'GET', 'path': '/v1/peers/{name}'}],
        scope_types=['project']),
]


def list_rules():
    return rules
