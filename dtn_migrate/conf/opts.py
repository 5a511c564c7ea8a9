"""Collect every option group for oslo-config-generator."""

import collections
import importlib

_MODULES = ('default', 'agent', 'transfer', 'tls', 'rdma', 'peer',
            'staging', 'engine', 'glance')


def list_opts():
    opts = collections.defaultdict(list)
    for name in _MODULES:
        module = importlib.import_module('dtn_migrate.conf.' + name)
        for group, group_opts in module.list_opts().items():
            opts[group].extend(group_opts)
    return list(opts.items())
