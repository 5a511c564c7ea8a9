"""The peers page."""

from django.utils.translation import gettext_lazy as _
from horizon import exceptions
from horizon import tables

from dtn_migrate.dashboard.content.peers import tables as peer_tables
from dtn_migrate.dashboard import api


class IndexView(tables.DataTableView):
    table_class = peer_tables.PeersTable
    template_name = "dtn_migrate/peers/index.html"
    page_title = _("Peer Clouds")

    def get_data(self):
        try:
            return api.peer_list(self.request)
        except Exception:
            exceptions.handle(self.request,
                              _("Unable to retrieve the peers."))
            return []
