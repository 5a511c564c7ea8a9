"""Default policies of dtn-migrate-api (oslo.policy), one module per
resource; ``list_rules`` is the ``oslo.policy.policies`` entry point.
"""

import itertools

from dtn_migrate.policies import base
from dtn_migrate.policies import drill
from dtn_migrate.policies import migration
from dtn_migrate.policies import peer
from dtn_migrate.policies import protection


def list_rules():
    return list(itertools.chain(base.list_rules(), migration.list_rules(),
                                peer.list_rules(),
                                protection.list_rules(),
                                drill.list_rules()))
