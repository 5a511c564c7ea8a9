"""``openstack dtn policy ...``: protection policies, which keep the
images they select replicated to a peer cloud; ``openstack dtn
failover`` and ``openstack dtn failback``, run in the cloud that holds a
policy's replicas.
"""

import json
import sys
import time

from cliff import columns
from osc_lib.cli import parseractions
from osc_lib.command import command
from osc_lib import exceptions

from dtn_migrate.common import states
from dtn_migrate.osc.v1 import common
from dtn_migrate.osc.v1 import migrations as osc_migrations
from dtn_migrate.common import polling

#: (key, heading) of ``policy list``; LONG_COLUMNS added by --long.  The
#: keys are those of the flattened record (see flatten).
COLUMNS = (("id", "ID"), ("name", "Name"), ("peer", "Peer"),
           ("mode", "Mode"), ("rpo_target_minutes", "RPO Target (min)"),
           ("rpo_state", "RPO State"), ("rpo_seconds", "RPO (s)"),
           ("images_replicated", "Replicated"),
           ("images_pending", "Pending"), ("enabled", "Enabled"))
LONG_COLUMNS = (("project_id", "Project"), ("selector", "Selector"),
                ("last_sync_at", "Last Sync"))
#: Fields of ``policy show``, in this order.
SHOW_FIELDS = ("id", "name", "description", "project_id", "user_id",
               "peer", "mode", "schedule", "enabled", "role", "selector",
               "options", "rpo_target_minutes", "rpo_state",
               "rpo_seconds", "rpo_checked_at") + tuple(
    "images_" + s for s in states.POLICY_IMAGE_STATES) + (
    "last_sync_at", "last_error", "created_at", "updated_at")
IMAGE_COLUMNS = (("image_id", "Image ID"), ("image_name", "Image Name"),
                 ("state", "State"), ("size", "Size"),
                 ("changed_at", "Changed At"),
                 ("replicated_at", "Replicated At"),
                 ("migration_id", "Migration ID"), ("error", "Error"))


class DictColumn(columns.FormattableColumn):
    """A selector or options: ``tags=['gold'], name_pattern='db-*'`` in
    tables (empty entries left out), the dict in json/yaml.
    """

    def human_readable(self):
        value = self._value or {}
        return ", ".join("%s=%s" % (k, json.dumps(v))
                         for k, v in sorted(value.items())
                         if v not in (None, [], {}))

    def machine_readable(self):
        return dict(self._value or {})


FORMATTERS = {"selector": DictColumn, "options": DictColumn,
              "size": common.BytesColumn}


def flatten(policy):
    """The API's Policy with ``rpo`` and ``images`` as flat fields
    (rpo_state, rpo_seconds, images_pending...).
    """
    out = {k: v for k, v in policy.items() if k not in ("rpo", "images")}
    rpo = policy.get("rpo") or {}
    out["rpo_target_minutes"] = rpo.get("target_minutes")
    out["rpo_state"] = rpo.get("state")
    out["rpo_seconds"] = rpo.get("seconds")
    out["rpo_checked_at"] = rpo.get("checked_at")
    counts = policy.get("images") or {}
    for state in states.POLICY_IMAGE_STATES:
        out["images_" + state] = counts.get(state, 0)
    return out


def _rows(items, cols):
    keys = [key for key, _ in cols]
    return ([heading for _, heading in cols],
            [common.properties(i, keys, formatters=FORMATTERS)
             for i in items])


def _show(policy):
    flat = flatten(policy)
    fields = [f for f in SHOW_FIELDS if f in flat]
    fields += sorted(set(flat) - set(SHOW_FIELDS))
    return fields, common.properties(flat, fields,
                                     formatters=FORMATTERS)


def _positive(value, option, minimum=1):
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = minimum - 1
    if number < minimum:
        raise exceptions.CommandError(
            "%s must be an integer of at least %d, not %r"
            % (option, minimum, value))
    return number


def find(client, name_or_id):
    return common.call(client.policies.find, name_or_id)


def _add_fields(parser, create):
    """The options of ``policy create`` and ``policy set``."""
    parser.add_argument(
        "--peer", metavar="<peer>", required=create,
        help="Peer DTN (cloud) to replicate to" +
             (" (required)" if create else ""))
    parser.add_argument(
        "--description", metavar="<text>", help="Description")
    parser.add_argument(
        "--tag", metavar="<tag>", dest="tags", action="append",
        help="Protect the images that carry this tag (repeat: images "
             "must carry all)" + ("" if create else
                                  "; replaces the policy's tags"))
    parser.add_argument(
        "--property", metavar="<key=value>", dest="properties",
        action=parseractions.KeyValueAction,
        help="Protect the images with this property (repeat for "
             "several)" + ("" if create else
                           "; replaces the policy's properties"))
    parser.add_argument(
        "--visibility", metavar="<visibility>", action="append",
        choices=states.VISIBILITIES,
        help="Protect the images of this visibility (%s; repeat: any "
             "of them)" % ", ".join(states.VISIBILITIES))
    parser.add_argument(
        "--name-pattern", metavar="<glob>",
        help="Protect the images whose name matches this shell-style "
             "glob (fnmatch; case-sensitive)")
    parser.add_argument(
        "--project", metavar="<project-id>", dest="projects",
        action="append",
        help="Protect the images of this project (repeat: any of them; "
             "admin only; default: the policy's own project)")
    parser.add_argument(
        "--mode", metavar="<mode>", choices=states.POLICY_MODES,
        help="continuous (on every change; the default), scheduled "
             "(with --schedule) or manual (only on 'policy sync')")
    parser.add_argument(
        "--schedule", metavar="<cron>",
        help="When to replicate, as a cron expression of 5 fields: "
             "minute hour day month weekday (mode scheduled)")
    parser.add_argument(
        "--rpo", metavar="<minutes>",
        help="Recovery point objective: how old, in minutes, the "
             "replicas may be before the policy is at risk (default 60)")
    parser.add_argument(
        "--keep-id", action="store_true", default=None,
        help="Give each replica the same image ID in the peer cloud")
    parser.add_argument(
        "--target-project", metavar="<project-id>",
        help="Project of the peer cloud to import into (an ID there)")
    parser.add_argument(
        "--deletion", metavar="<deletion>",
        choices=states.DELETIONS,
        help="keep (the default: replicas outlive their source) or "
             "mirror (delete a replica after its source)")
    parser.add_argument(
        "--deletion-grace", metavar="<minutes>",
        help="With --deletion mirror, minutes to wait before deleting "
             "a replica (default 60)")
    if create:
        parser.add_argument(
            "--disable", dest="enabled", action="store_false",
            default=None, help="Create the policy disabled")
    else:
        enabled = parser.add_mutually_exclusive_group()
        enabled.add_argument(
            "--enable", dest="enabled", action="store_true", default=None,
            help="Enable the policy")
        enabled.add_argument(
            "--disable", dest="enabled", action="store_false",
            help="Disable the policy (nothing is replicated)")
        parser.add_argument(
            "--no-tag", action="store_true",
            help="Remove the policy's tags (with --tag: replace them)")
        parser.add_argument(
            "--no-property", action="store_true",
            help="Remove the policy's properties (with --property: "
                 "replace them)")


def _selector(parsed_args, current=None):
    """The selector the options give, on top of ``current`` (set): the
    lists given replace the policy's.
    """
    selector = dict(current or {})
    if getattr(parsed_args, "no_tag", False):
        selector["tags"] = []
    if getattr(parsed_args, "no_property", False):
        selector["properties"] = {}
    for key, value in (("tags", parsed_args.tags),
                       ("properties", parsed_args.properties),
                       ("visibility", parsed_args.visibility),
                       ("projects", parsed_args.projects)):
        if value:
            selector[key] = list(dict.fromkeys(value)) \
                if isinstance(value, list) else dict(value)
    if parsed_args.name_pattern is not None:
        selector["name_pattern"] = parsed_args.name_pattern
    return {k: v for k, v in selector.items() if v not in (None, [], {})}


def _values(parsed_args):
    """The policy fields the options give (but the selector)."""
    values = {}
    for key in ("peer", "description", "mode", "schedule", "enabled"):
        value = getattr(parsed_args, key)
        if value is not None:
            values[key] = value
    if parsed_args.rpo is not None:
        values["rpo_minutes"] = _positive(parsed_args.rpo, "--rpo")
    return values


def _options(parsed_args, current=None):
    options = dict(current or {})
    given = False
    for key in ("keep_id", "target_project", "deletion"):
        value = getattr(parsed_args, key)
        if value is not None:
            options[key] = value
            given = True
    if parsed_args.deletion_grace is not None:
        options["deletion_grace_minutes"] = _positive(
            parsed_args.deletion_grace, "--deletion-grace", minimum=0)
        given = True
    return options if given else None


class CreatePolicy(command.ShowOne):
    """Create a protection policy: keep the images it selects
    replicated to a peer cloud.

    Select images with --tag, --property, --visibility and/or
    --name-pattern (at least one; all must match).
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("name", metavar="<name>",
                            help="Name of the policy (unique in the "
                                 "project)")
        _add_fields(parser, create=True)
        return parser

    def take_action(self, parsed_args):
        selector = _selector(parsed_args)
        if not any(selector.get(k) for k in ("tags", "properties",
                                             "visibility",
                                             "name_pattern")):
            raise exceptions.CommandError(
                "Select the images to protect with --tag, --property, "
                "--visibility and/or --name-pattern")
        values = _values(parsed_args)
        values.update(name=parsed_args.name, selector=selector)
        options = _options(parsed_args)
        if options:
            values["options"] = options
        client = self.app.client_manager.dtn
        return _show(common.call(client.policies.create, **values))


class ListPolicy(command.Lister):
    """List protection policies with their RPO state, newest first."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument(
            "--peer", metavar="<peer>",
            help="Only policies to this peer")
        parser.add_argument(
            "--all-projects", action="store_true",
            help="Policies of every project (admin only)")
        parser.add_argument(
            "--long", action="store_true",
            help="Show more columns: project, selector, last sync")
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.dtn
        found = common.call(client.policies.list, peer=parsed_args.peer,
                            all_projects=parsed_args.all_projects)
        cols = COLUMNS + (LONG_COLUMNS if parsed_args.long else ())
        return _rows([flatten(p) for p in found], cols)


class _OnePolicy(command.ShowOne):

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("policy", metavar="<policy>",
                            help="Policy (name or ID)")
        return parser


class ShowPolicy(_OnePolicy):
    """Show a protection policy: selector, options, RPO state and the
    count of its images in each state.
    """

    def take_action(self, parsed_args):
        client = self.app.client_manager.dtn
        return _show(find(client, parsed_args.policy))


class SetPolicy(_OnePolicy):
    """Change a protection policy.

    --tag and --property replace the policy's tags and properties;
    --no-tag and --no-property remove them.
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("--name", metavar="<name>",
                            help="New name of the policy")
        _add_fields(parser, create=False)
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.dtn
        policy = find(client, parsed_args.policy)
        values = _values(parsed_args)
        if parsed_args.name is not None:
            values["name"] = parsed_args.name
        if any(x for x in (parsed_args.tags, parsed_args.properties,
                           parsed_args.visibility, parsed_args.projects,
                           parsed_args.no_tag, parsed_args.no_property)) \
                or parsed_args.name_pattern is not None:
            values["selector"] = _selector(parsed_args,
                                           policy.get("selector"))
        options = _options(parsed_args, policy.get("options"))
        if options is not None:
            values["options"] = options
        if not values:
            raise exceptions.CommandError("Nothing to change: give at "
                                          "least one option")
        return _show(common.call(client.policies.update, policy["id"],
                                 **values))


class DeletePolicy(command.Command):
    """Delete protection policies (the replicas made stay)."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("policies", metavar="<policy>", nargs="+",
                            help="Policy to delete (name or ID; repeat "
                                 "for several)")
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.dtn
        errors = []
        for name in parsed_args.policies:
            try:
                policy = find(client, name)
                common.call(client.policies.delete, policy["id"])
            except exceptions.CommandError as exc:
                errors.append("%s: %s" % (name, exc))
        if errors:
            raise exceptions.CommandError(
                "Failed to delete %d of %d policies:\n%s"
                % (len(errors), len(parsed_args.policies),
                   "\n".join(errors)))


class SyncPolicy(command.Lister):
    """Replicate now what a protection policy selects and the peer
    lacks; prints the migrations started.
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("policy", metavar="<policy>",
                            help="Policy (name or ID)")
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.dtn
        policy = find(client, parsed_args.policy)
        result = common.call(client.policies.sync, policy["id"]) or {}
        return osc_migrations._rows(result.get("migrations") or [],
                                    osc_migrations.RESULT_COLUMNS)


class ListPolicyImage(command.Lister):
    """List the images a protection policy protects, and their
    replication state.
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("policy", metavar="<policy>",
                            help="Policy (name or ID)")
        parser.add_argument(
            "--state", metavar="<state>", action="append",
            choices=states.POLICY_IMAGE_STATES,
            help="Only images in this state (%s; repeat for several)"
                 % ", ".join(states.POLICY_IMAGE_STATES))
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.dtn
        policy = find(client, parsed_args.policy)
        found = common.call(client.policies.images, policy["id"],
                            state=parsed_args.state)
        return _rows(found, IMAGE_COLUMNS)


# Failover and failback, in the cloud that holds a policy's replicas.

#: Fields of ``failover``: the policy's, then the reverse policy and
#: the count of promoted images after its role.
FAILOVER_EXTRA = ("reverse_policy_id", "reverse_policy_name", "promoted")
#: Fields of ``failback``.
FAILBACK_FIELDS = ("policy_id", "name", "role", "reverse_policy_id",
                   "reverse_policy_name", "complete", "migrations",
                   "migration_ids")


class ListColumn(columns.FormattableColumn):
    """IDs one a line in tables; the list in json/yaml."""

    def human_readable(self):
        return "\n".join(str(v) for v in self._value or ())

    def machine_readable(self):
        return list(self._value or ())


class Failover(command.ShowOne):
    """Fail over a protection policy: make this cloud (the one holding
    its replicas) primary for their images.

    Run in the surviving cloud, on the policy learnt from the peer
    (same ID and name as there; an administrator's name is looked up in
    every project).  Each replica becomes a first-class image and a
    reverse policy towards the peer is prepared, to send back later
    ('openstack dtn failback') what changes here.  Safe to run again.
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("policy", metavar="<policy>",
                            help="Policy (name or ID)")
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.dtn
        policy = common.find_policy(client, parsed_args.policy)
        result = common.call(client.policies.failover, policy["id"]) or {}
        flat = flatten(result.get("policy") or policy)
        reverse = result.get("reverse_policy") or {}
        flat.update(reverse_policy_id=reverse.get("id"),
                    reverse_policy_name=reverse.get("name"),
                    promoted=result.get("promoted"))
        order = []
        for field in SHOW_FIELDS:
            order.append(field)
            if field == "role":
                order.extend(FAILOVER_EXTRA)
        fields = [f for f in order if f in flat]
        fields += sorted(set(flat) - set(fields))
        return fields, common.properties(flat, fields,
                                         formatters=FORMATTERS)


def _migration_ids(answer):
    """The ids of the migrations a failback answer started."""
    return [m["id"] for m in answer.get("migrations") or () if m.get("id")]


class Failback(command.ShowOne):
    """Fail back a failed-over protection policy: send back to the peer
    what was created or changed here since the failover.

    Images whose bytes the peer already holds are not sent.  The
    failback is complete when nothing waits any more: the policy is
    then a replica again and the reverse policy is disabled.  Without
    --wait, run it again until complete is True; with --wait, wait for
    the migrations and fail back again until complete (exit 1 on a
    timeout or a failed migration).
    """

    failed = None

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("policy", metavar="<policy>",
                            help="Policy (name or ID)")
        parser.add_argument(
            "--wait", action="store_true",
            help="Wait for the migrations and fail back again until "
                 "complete; exit 1 on a timeout or a failed migration")
        osc_migrations._add_wait_options(parser)
        return parser

    def _until_complete(self, client, policy_id, parsed_args, result,
                        seen):
        """Wait for each round's migrations and fail back again, until
        complete; the last answer.
        """
        timeout = parsed_args.timeout
        deadline = None if timeout is None else time.monotonic() + timeout

        def round_complete():
            nonlocal result
            ids = _migration_ids(result)
            if ids:
                left = None if deadline is None else \
                    max(0.0, deadline - time.monotonic())
                waiter = common.Waiter(client,
                                       self.app.stderr or sys.stderr,
                                       interval=parsed_args.interval,
                                       timeout=left)
                self.failed = common.failures(waiter.wait(ids))
                if self.failed is not None:
                    return True
            # Nothing started but not complete (the engine is between
            # two steps), or the round's migrations ended: ask again.
            result = common.call(client.policies.failback, policy_id) or {}
            seen.update(dict.fromkeys(_migration_ids(result)))
            return result.get("complete")

        if not result.get("complete") and not polling.poll(
                round_complete, timeout, parsed_args.interval):
            raise exceptions.CommandError(
                "Failback of policy %s not complete after %d s; run "
                "'openstack dtn failback %s' again"
                % (policy_id, timeout, policy_id))
        return result

    def take_action(self, parsed_args):
        osc_migrations._check_wait_options(parsed_args)
        client = self.app.client_manager.dtn
        policy = common.find_policy(client, parsed_args.policy)
        result = common.call(client.policies.failback, policy["id"]) or {}
        seen = dict.fromkeys(_migration_ids(result))
        if parsed_args.wait:
            result = self._until_complete(client, policy["id"],
                                          parsed_args, result, seen)
        current = result.get("policy") or policy
        reverse = result.get("reverse_policy") or {}
        flat = {"policy_id": current.get("id"), "name": current.get("name"),
                "role": current.get("role"),
                "reverse_policy_id": reverse.get("id"),
                "reverse_policy_name": reverse.get("name"),
                "complete": bool(result.get("complete")),
                "migrations": len(seen), "migration_ids": list(seen)}
        return FAILBACK_FIELDS, common.properties(
            flat, FAILBACK_FIELDS, formatters={"migration_ids": ListColumn})

    def run(self, parsed_args):
        status = super().run(parsed_args)
        if self.failed is not None:
            raise exceptions.CommandError(
                "%s\nRun 'openstack dtn failback %s' again to retry."
                % (self.failed, parsed_args.policy))
        return status
