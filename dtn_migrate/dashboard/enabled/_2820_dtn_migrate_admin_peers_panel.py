# The admin "Peer Clouds" panel.
PANEL = 'dtn_peers'
PANEL_DASHBOARD = 'admin'
PANEL_GROUP = 'disaster_recovery'
ADD_PANEL = ('dtn_migrate.dashboard.content.admin_peers.panel.'
             'AdminPeersPanel')
