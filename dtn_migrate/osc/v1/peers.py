"""``openstack dtn peer list|show``: peer DTNs and their health."""

from osc_lib.command import command

from dtn_migrate.osc.v1 import common

COLUMNS = (("name", "Name"), ("address", "Address"), ("port", "Port"),
           ("reachable", "Reachable"), ("rtt_ms", "RTT (ms)"),
           ("last_throughput", "Last Throughput"),
           ("last_transfer_at", "Last Transfer At"),
           ("checked_at", "Checked At"), ("error", "Error"))
FIELDS = tuple(key for key, _ in COLUMNS)
FORMATTERS = {"last_throughput": common.RateColumn}


def _columns(peers):
    """The columns the API's answer holds: a caller without
    ``dtn:peer:show:details`` gets no address, port nor error.
    """
    present = set().union(*peers) if peers else set(FIELDS)
    return [(key, heading) for key, heading in COLUMNS if key in present]


class ListPeer(command.Lister):
    """List the peer DTNs: reachability, round-trip time and the last
    measured throughput, as this cloud's DTN agent sees them (and, for
    administrators, their addresses and the errors of their probes).
    """

    def take_action(self, parsed_args):
        peers = common.call(self.app.client_manager.dtn.peers.list)
        columns = _columns(peers)
        fields = [key for key, _ in columns]
        return ([heading for _, heading in columns],
                [common.properties(p, fields, formatters=FORMATTERS)
                 for p in peers])


class ShowPeer(command.ShowOne):
    """Show one peer DTN's health."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("peer", metavar="<peer>", help="Peer name")
        return parser

    def take_action(self, parsed_args):
        peer = common.call(self.app.client_manager.dtn.peers.get,
                           parsed_args.peer)
        fields = [f for f in FIELDS if f in peer]
        fields += sorted(set(peer) - set(FIELDS))
        return fields, common.properties(peer, fields,
                                         formatters=FORMATTERS)
