"""``openstack dtn drill ...``: disaster-recovery drills of protection
policies, run in the cloud that holds the replicas (there, the policy
is the one the incoming replicas brought, with the same ID and name).
"""

from cliff import columns
from osc_lib.command import command
from osc_lib import exceptions

from dtn_migrate.client import progress
from dtn_migrate.common import states
from dtn_migrate.osc.v1 import common
from dtn_migrate.osc.v1 import migrations as osc_migrations

#: (key, heading) of ``drill list``; "policy" is the policy's name (its
#: ID when the drill has none).
COLUMNS = (("id", "ID"), ("policy", "Policy"), ("state", "State"),
           ("images_total", "Images"), ("images_intact", "Intact"),
           ("images_bad", "Bad"), ("rto_seconds", "RTO (s)"),
           ("started_at", "Started"))
#: Fields of ``drill show`` and ``drill start``, in this order.
SHOW_FIELDS = ("id", "policy_id", "policy_name", "project_id", "state",
               "clone", "images_total", "images_intact", "images_bad",
               "rto_seconds", "error", "started_at", "finished_at",
               "created_at", "updated_at", "images")


class ReportImagesColumn(columns.FormattableColumn):
    """The report's images, one a line: ``<name> <replica id>:
    <status>[ (<error>)]``; the list of checks in json/yaml.
    """

    def human_readable(self):
        lines = []
        for image in self._value or ():
            line = "%s %s: %s" % (
                image.get("image_name") or image.get("source_image_id")
                or "-", image.get("replica_image_id") or "-",
                image.get("status") or "-")
            if image.get("error"):
                line += " (%s)" % progress.first_line(image["error"])
            lines.append(line)
        return "\n".join(lines)

    def machine_readable(self):
        return list(self._value or ())


FORMATTERS = {"images": ReportImagesColumn}


def flatten(drill):
    """The API's Drill with the report's images as an ``images`` field
    (when it has a report) and ``policy`` for the listing.
    """
    out = {k: v for k, v in drill.items() if k != "report"}
    if "report" in drill:
        out["images"] = (drill.get("report") or {}).get("images") or []
    out["policy"] = drill.get("policy_name") or drill.get("policy_id")
    return out


def _show(drill):
    flat = flatten(drill)
    fields = [f for f in SHOW_FIELDS if f in flat]
    fields += sorted(set(flat) - set(SHOW_FIELDS) - {"policy"})
    return fields, common.properties(flat, fields,
                                     formatters=FORMATTERS)


def failure(drill):
    """A CommandError saying why the drill did not pass, or None."""
    if drill.get("state") == "passed":
        return None
    text = "Drill %s of policy %s %s" % (
        drill.get("id"), drill.get("policy_name") or drill.get("policy_id"),
        drill.get("state"))
    if drill.get("error"):
        text += ": %s" % progress.first_line(drill["error"])
    elif drill.get("images_bad"):
        text += ": %s of %s replica(s) bad" % (drill["images_bad"],
                                               drill.get("images_total"))
    return exceptions.CommandError(text)


def find(client, name_or_id):
    """The policy of this ID or name, in every project for an
    administrator (see common.find_policy).
    """
    return common.find_policy(client, name_or_id)


class StartDrill(command.ShowOne):
    """Start a drill of a protection policy in this cloud (the one that
    holds its replicas): check every replica and measure the time to
    recover (RTO).

    With --wait, show the finished drill and exit 1 unless it passed.
    """

    failed = None

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("policy", metavar="<policy>",
                            help="Policy (name or ID)")
        parser.add_argument(
            "--clone", action="store_true",
            help="Also clone each replica into a hidden image (then "
                 "removed): proves the replicas can be used")
        parser.add_argument(
            "--wait", action="store_true",
            help="Wait for the drill to finish; exit 1 unless it passed")
        osc_migrations._add_wait_options(parser)
        return parser

    def take_action(self, parsed_args):
        osc_migrations._check_wait_options(parsed_args)
        client = self.app.client_manager.dtn
        policy = find(client, parsed_args.policy)
        drill = common.call(client.drills.start, policy["id"],
                            clone=parsed_args.clone)
        if parsed_args.wait:
            with common.ctrl_c_between_polls() as pause:
                drill = common.call(client.drills.wait, drill["id"],
                                    timeout=parsed_args.timeout,
                                    interval=parsed_args.interval,
                                    sleep=pause)
            self.failed = failure(drill)
        return _show(drill)

    def run(self, parsed_args):
        status = super().run(parsed_args)
        if self.failed is not None:
            raise self.failed
        return status


class ListDrill(command.Lister):
    """List drills, newest first."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("--policy", metavar="<policy>",
                            help="Only the drills of this policy (name "
                                 "or ID)")
        parser.add_argument(
            "--state", metavar="<state>", action="append",
            choices=states.DRILL_STATES,
            help="Only drills in this state (%s; repeat for several)"
                 % ", ".join(states.DRILL_STATES))
        parser.add_argument("--all-projects", action="store_true",
                            help="Drills of every project (admin only)")
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.dtn
        policy_id = None
        if parsed_args.policy:
            policy_id = find(client, parsed_args.policy)["id"]
        found = common.call(client.drills.list, policy_id=policy_id,
                            state=parsed_args.state,
                            all_projects=parsed_args.all_projects)
        keys = [key for key, _ in COLUMNS]
        return ([heading for _, heading in COLUMNS],
                [common.properties(flatten(d), keys,
                                   formatters=FORMATTERS)
                 for d in found])


class ShowDrill(command.ShowOne):
    """Show a drill and its report: the check of every replica."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("drill", metavar="<drill>", help="Drill ID")
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.dtn
        return _show(common.call(client.drills.get, parsed_args.drill))
