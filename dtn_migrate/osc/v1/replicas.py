"""``openstack dtn replica list``: the replica catalog."""

from osc_lib.command import command

from dtn_migrate.common import states
from dtn_migrate.osc.v1 import common
from dtn_migrate.osc.v1 import protection_policies

COLUMNS = (("id", "ID"), ("direction", "Direction"), ("peer", "Peer"),
           ("source_image_id", "Source Image ID"),
           ("replica_image_id", "Replica Image ID"),
           ("image_name", "Image Name"), ("state", "State"),
           ("policy_id", "Policy ID"), ("verified_at", "Verified At"))
FORMATTERS = {"size": common.BytesColumn}


class ListReplica(command.Lister):
    """List the replica catalog: which image is a replica of which
    (outgoing: this cloud's images replicated to a peer; incoming: the
    replicas this cloud holds).
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("--peer", metavar="<peer>",
                            help="Only replicas to or from this peer")
        parser.add_argument("--direction", metavar="<direction>",
                            choices=states.DIRECTIONS,
                            help="outgoing or incoming")
        parser.add_argument("--policy", metavar="<policy>",
                            help="Only the replicas of this policy "
                                 "(name or ID)")
        parser.add_argument("--all-projects", action="store_true",
                            help="Replicas of every project (admin only)")
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.dtn
        policy_id = None
        if parsed_args.policy:
            policy_id = protection_policies.find(
                client, parsed_args.policy)["id"]
        found = common.call(client.replicas.list, peer=parsed_args.peer,
                            direction=parsed_args.direction,
                            policy_id=policy_id,
                            all_projects=parsed_args.all_projects)
        keys = [key for key, _ in COLUMNS]
        return ([heading for _, heading in COLUMNS],
                [common.properties(r, keys, formatters=FORMATTERS)
                 for r in found])
