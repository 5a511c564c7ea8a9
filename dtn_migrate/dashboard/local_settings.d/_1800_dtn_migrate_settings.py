# dtn-migrate Horizon plugin settings; executed by openstack_dashboard's
# settings module (copied there by python -m dtn_migrate.dashboard.install).
# flake8: noqa: F821  (the names below are openstack_dashboard.settings')
import os as _dtn_os

import dtn_migrate.dashboard as _dtn_dashboard

_DTN_CONF = _dtn_os.path.join(
    _dtn_os.path.dirname(_dtn_dashboard.__file__), 'conf')

# The API's policy: overrides (if any) and the defaults generated from
# dtn_migrate.policies, so that Horizon shows only the allowed actions.
POLICY_FILES['dtn-migration'] = _dtn_os.path.join(
    _DTN_CONF, 'dtn-migration_policy.yaml')
DEFAULT_POLICY_FILES['dtn-migration'] = _dtn_os.path.join(
    _DTN_CONF, 'default_policies', 'dtn-migration.yaml')

# The "Migrate to Peer Cloud" row action is on the Django Images table.
ANGULAR_FEATURES['images_panel'] = False

# The customization module adds that row action; a deployment with its
# own module imports dtn_migrate.dashboard.customization from it.
HORIZON_CONFIG.setdefault('customization_module',
                          'dtn_migrate.dashboard.customization')
