"""Collect every option group for oslo-config-generator."""

import collections

from dtn_migrate import conf


def list_opts():
    opts = collections.defaultdict(list)
    for module in conf.MODULES:
        for group, group_opts in module.list_opts().items():
            opts[group].extend(group_opts)
    return list(opts.items())
