# The project's "Peer Clouds" panel.
PANEL = 'dtn_peers'
PANEL_DASHBOARD = 'project'
PANEL_GROUP = 'disaster_recovery'
ADD_PANEL = 'dtn_migrate.dashboard.content.peers.panel.PeersPanel'
