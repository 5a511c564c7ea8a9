# Sphinx configuration for the dtn-migrate documentation.
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '_ext'))

project = 'dtn-migrate'
copyright = '2026, dtn-migrate developers'
extensions = [
    # The configuration reference and sample (configuration/).
    'oslo_config.sphinxext',
    'oslo_config.sphinxconfiggen',
    # The policy reference and sample (configuration/).
    'oslo_policy.sphinxext',
    'oslo_policy.sphinxpolicygen',
    # The API reference from dtn_migrate/api/openapi.yaml (api-ref).
    'openapi_rst',
    # The openstack dtn command reference (cli).
    'cliff.sphinxext',
]
master_doc = 'index'
exclude_patterns = []
html_theme = 'alabaster'
html_static_path = ['_static']

# Written into _static/ at each build, from the generator configurations
# in etc/dtn-migrate/ (oslo-config-generator, as tox -e genconfig runs
# it, and oslopolicy-sample-generator).
config_generator_config_file = [
    ('../../etc/dtn-migrate/dtn-migrate-config-generator.conf',
     '_static/dtn-migrate'),
]
policy_generator_config_file = [
    ('../../etc/dtn-migrate/dtn-migrate-policy-generator.conf',
     '_static/dtn-migrate'),
]
