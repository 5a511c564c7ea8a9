# The project's "Protection Policies" panel.
PANEL = 'dtn_policies'
PANEL_DASHBOARD = 'project'
PANEL_GROUP = 'disaster_recovery'
ADD_PANEL = 'dtn_migrate.dashboard.content.policies.panel.PoliciesPanel'
