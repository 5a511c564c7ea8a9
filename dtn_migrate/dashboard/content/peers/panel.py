"""The project's "Peer Clouds" panel."""

from django.utils.translation import gettext_lazy as _
import horizon

from dtn_migrate.dashboard import policy


class PeersPanel(horizon.Panel):
    name = _("Peer Clouds")
    slug = "dtn_peers"
    permissions = ("openstack.services.dtn-migration",)
    policy_rules = policy.PEER_LIST
