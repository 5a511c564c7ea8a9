"""The admin "Migrations" panel: the migrations of every project."""

from django.utils.translation import gettext_lazy as _
import horizon

from dtn_migrate.dashboard import policy


class AdminMigrationsPanel(horizon.Panel):
    name = _("Migrations")
    slug = "dtn_migrations"
    permissions = ("openstack.services.dtn-migration",)
    policy_rules = policy.MIGRATION_LIST_ALL
