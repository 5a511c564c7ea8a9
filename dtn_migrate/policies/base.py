"""Check strings shared by the policies: the admin, project member and
project reader personas of Keystone's default roles.

Keystone's implied roles make admin imply member and member imply
reader, so a token carries every role below its own.
"""

from oslo_policy import policy

ADMIN = 'role:admin'
PROJECT_MEMBER = 'role:member and project_id:%(project_id)s'
PROJECT_READER = 'role:reader and project_id:%(project_id)s'
ADMIN_OR_PROJECT_MEMBER = 'rule:context_is_admin or (%s)' % PROJECT_MEMBER
ADMIN_OR_PROJECT_READER = 'rule:context_is_admin or (%s)' % PROJECT_READER

rules = [
    policy.RuleDefault(
        name='context_is_admin', check_str=ADMIN,
        description='Decides who is an administrator of dtn-migrate: '
                    'sees and acts on the migrations of every project.'),
]


def list_rules():
    return rules
