# The project's "Migrations" panel.
PANEL = 'dtn_migrations'
PANEL_DASHBOARD = 'project'
PANEL_GROUP = 'disaster_recovery'
ADD_PANEL = ('dtn_migrate.dashboard.content.migrations.panel.'
             'MigrationsPanel')
