"""Authorization of dtn-migrate-api requests through oslo.policy.

The defaults live in :mod:`dtn_migrate.policies`; operators override
them in ``[oslo_policy] policy_file``.  Scope and the new defaults are
enforced (``enforce_scope``, ``enforce_new_defaults``).
"""

import threading

from oslo_config import cfg
from oslo_policy import opts as policy_opts
from oslo_policy import policy

from dtn_migrate import exception
from dtn_migrate import policies

_ENFORCER = None
_LOCK = threading.Lock()

#: The policy file's default name, looked up in the config directories.
POLICY_FILE = 'policy.yaml'


def set_defaults(conf):
    """policy.yaml, new defaults and scope enforced (oslo.policy 6
    enforces scope always and ignores ``enforce_scope``).
    """
    policy_opts.set_defaults(conf, policy_file=POLICY_FILE,
                             enforce_scope=True, enforce_new_defaults=True)


def make_enforcer(conf):
    """A new enforcer on ``conf`` with dtn-migrate's defaults."""
    set_defaults(conf)
    enforcer = policy.Enforcer(conf)
    enforcer.register_defaults(policies.list_rules())
    return enforcer


def init(conf=None):
    """The process' enforcer (made on first use, on ``conf``)."""
    global _ENFORCER
    with _LOCK:
        if _ENFORCER is None:
            _ENFORCER = make_enforcer(conf if conf is not None
                                      else cfg.CONF)
        return _ENFORCER


def reset():
    global _ENFORCER
    with _LOCK:
        if _ENFORCER is not None:
            _ENFORCER.clear()
        _ENFORCER = None


def get_enforcer():
    """The ``oslo.policy.enforcer`` entry point, for oslopolicy-checker,
    oslopolicy-policy-generator and friends: an enforcer on the
    service's configuration files.
    """
    from dtn_migrate import conf as dtn_conf
    if _ENFORCER is None:
        dtn_conf.CONF([], project='dtn-migrate')
    return init(dtn_conf.CONF)


def authorize(context, action, target, enforcer=None):
    """Raise PolicyNotAuthorized unless ``context`` may do ``action`` on
    ``target`` (a dict, usually ``{"project_id": ...}``).
    """
    enforcer = enforcer or init()
    try:
        return enforcer.authorize(action, target, context, do_raise=True,
                                  exc=exception.PolicyNotAuthorized,
                                  action=action)
    except policy.InvalidScope:
        raise exception.PolicyNotAuthorized(action=action)


def check(context, action, target, enforcer=None):
    """True when ``context`` may do ``action`` on ``target``."""
    enforcer = enforcer or init()
    try:
        return bool(enforcer.authorize(action, target, context,
                                       do_raise=False))
    except policy.InvalidScope:
        return False


def is_admin(context, enforcer=None):
    """Whether ``context`` passes the ``context_is_admin`` rule."""
    enforcer = enforcer or init()
    return bool(enforcer.authorize('context_is_admin', {}, context,
                                   do_raise=False))
