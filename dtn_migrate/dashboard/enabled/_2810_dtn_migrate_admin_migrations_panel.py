# The admin "Migrations" panel: the migrations of every project.
PANEL = 'dtn_migrations'
PANEL_DASHBOARD = 'admin'
PANEL_GROUP = 'disaster_recovery'
ADD_PANEL = ('dtn_migrate.dashboard.content.admin_migrations.panel.'
             'AdminMigrationsPanel')
