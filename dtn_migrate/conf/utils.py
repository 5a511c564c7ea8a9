"""Helpers shared by the option modules."""

from oslo_config import cfg


def register(conf, group, opts):
    """Register ``opts`` in a fresh copy of ``group`` on ``conf``.

    ConfigOpts copies a group shallowly, so one OptGroup shared by every
    ConfigOpts of a process (two in-process clouds, tests) would share
    its options' overrides between them.
    """
    conf.register_group(cfg.OptGroup(group.name, title=group.title,
                                     help=group.help))
    conf.register_opts(opts, group=group.name)
