"""The peers table: health of the peer DTNs as the API reports it."""

from django.utils.translation import gettext_lazy as _
from horizon import tables

from dtn_migrate.dashboard import utils


def address(peer):
    if peer.get("port"):
        return "%s:%s" % (peer.get("address"), peer.get("port"))
    return peer.get("address")


def reachable(peer):
    return _("Yes") if peer.get("reachable") else _("No")


def rtt(peer):
    value = peer.get("rtt_ms")
    return "-" if value is None else "%.1f ms" % value


def throughput(peer):
    return utils.human_rate(peer.get("last_throughput"))


class PeersTable(tables.DataTable):
    name = tables.Column("name", verbose_name=_("Name"))
    address = tables.Column(address, verbose_name=_("Address"))
    reachable = tables.Column(reachable, verbose_name=_("Reachable"),
                              status=True,
                              status_choices=((_("Yes"), True),
                                              (_("No"), False)))
    rtt = tables.Column(rtt, verbose_name=_("Round-Trip Time"))
    throughput = tables.Column(throughput,
                               verbose_name=_("Last Throughput"))
    last_transfer = tables.Column("last_transfer_at",
                                  verbose_name=_("Last Transfer"),
                                  filters=(utils.since,))
    checked_at = tables.Column("checked_at", verbose_name=_("Checked"),
                               filters=(utils.since,))
    error = tables.WrappingColumn("error", verbose_name=_("Error"),
                                  empty_value="-")

    def get_object_id(self, datum):
        return datum.get("name")

    class Meta(object):
        name = "peers"
        verbose_name = _("Peers")
