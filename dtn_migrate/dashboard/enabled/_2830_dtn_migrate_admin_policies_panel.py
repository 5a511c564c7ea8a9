# The admin "Protection Policies" panel: the policies of every project.
PANEL = 'dtn_policies'
PANEL_DASHBOARD = 'admin'
PANEL_GROUP = 'disaster_recovery'
ADD_PANEL = ('dtn_migrate.dashboard.content.admin_policies.panel.'
             'AdminPoliciesPanel')
