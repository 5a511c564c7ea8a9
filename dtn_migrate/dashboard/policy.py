"""Policy rule names of the dtn-migration API, as Horizon checks them.

Horizon evaluates ``(service, rule)`` pairs against the policy files
registered for the service in ``POLICY_FILES`` and
``DEFAULT_POLICY_FILES`` (see the ``local_settings.d`` snippet).
"""

SERVICE = "dtn-migration"


def rule(name):
    """The ``policy_rules`` tuple of one dtn-migration rule."""
    return ((SERVICE, name),)


MIGRATION_CREATE = rule("dtn:migration:create")
MIGRATION_KEEP_ID = rule("dtn:migration:create:keep_id")
MIGRATION_VISIBILITY = rule("dtn:migration:create:visibility")
MIGRATION_TARGET_PROJECT = rule("dtn:migration:create:target_project")
MIGRATION_LIST = rule("dtn:migration:list")
MIGRATION_LIST_ALL = rule("dtn:migration:list:all_projects")
MIGRATION_SHOW = rule("dtn:migration:show")
MIGRATION_CANCEL = rule("dtn:migration:cancel")
MIGRATION_RETRY = rule("dtn:migration:retry")
PEER_LIST = rule("dtn:peer:list")
PEER_SHOW = rule("dtn:peer:show")
POLICY_CREATE = rule("dtn:policy:create")
POLICY_LIST = rule("dtn:policy:list")
POLICY_LIST_ALL = rule("dtn:policy:list:all_projects")
POLICY_SHOW = rule("dtn:policy:show")
POLICY_UPDATE = rule("dtn:policy:update")
POLICY_DELETE = rule("dtn:policy:delete")
POLICY_DELETE_NON_PRIMARY = rule("dtn:policy:delete:non_primary")
POLICY_KEEP_ID = rule("dtn:policy:create:keep_id")
POLICY_SYNC = rule("dtn:policy:sync")
DRILL_START = rule("dtn:drill:start")
DRILL_LIST = rule("dtn:drill:list")
DRILL_SHOW = rule("dtn:drill:show")


def default_rules():
    """The API's default rules as Horizon's default policy files list
    them (``DEFAULT_POLICY_FILES``): one dict per rule.
    """
    from dtn_migrate import policies

    out = []
    for default in policies.list_rules():
        item = {
            "name": default.name,
            "check_str": default.check_str,
            "description": default.description,
            "scope_types": list(default.scope_types)
            if default.scope_types else None,
            "operations": list(getattr(default, "operations", None) or []),
        }
        out.append(item)
    return out


def dump(stream):
    """Write the default rules as YAML to ``stream``."""
    import yaml

    stream.write("# Generated from dtn_migrate.policies by\n"
                 "#   python -m dtn_migrate.dashboard.policy\n"
                 "# Do not edit: override rules in "
                 "../dtn-migration_policy.yaml.\n")
    yaml.safe_dump(default_rules(), stream, default_flow_style=False,
                   sort_keys=True)


def default_file():
    import os

    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "conf",
                        "default_policies", "dtn-migration.yaml")


if __name__ == "__main__":
    with open(default_file(), "w", encoding="utf-8") as out:
        dump(out)
