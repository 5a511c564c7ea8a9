"""Django application of the dtn-migrate Horizon plugin."""

from django.apps import AppConfig


class DtnMigrateDashboardConfig(AppConfig):
    """Templates and static files of the plugin; no models."""

    name = "dtn_migrate.dashboard"
    label = "dtn_migrate_dashboard"
    verbose_name = "dtn-migrate dashboard"
