"""The "Migrate to Peer Cloud" row action of Horizon's Images table.

:func:`register` adds it to the project Images table (the Django one:
``ANGULAR_FEATURES['images_panel'] = False``); the customization module
(:mod:`dtn_migrate.dashboard.customization`) calls it when Horizon
builds its URLs.
"""

import urllib.parse

from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from horizon import tables

from dtn_migrate.dashboard import api
from dtn_migrate.dashboard import policy

ACTION_NAME = "dtn_migrate"


class MigrateImage(tables.LinkAction):
    """Open the migrate form with this image preselected."""

    name = ACTION_NAME
    verbose_name = _("Migrate to Peer Cloud")
    url = "horizon:project:dtn_migrations:migrate"
    classes = ("ajax-modal",)
    icon = "share"
    policy_rules = policy.MIGRATION_CREATE

    def get_link_url(self, datum=None):
        base_url = reverse(self.url)
        if datum is None:
            return base_url
        query = urllib.parse.urlencode({"image_id": datum.id})
        return "%s?%s" % (base_url, query)

    def allowed(self, request, datum=None):
        if datum is not None and getattr(datum, "status", "active") \
                not in ("active",):
            return False
        try:
            return api.is_enabled(request)
        except Exception:
            return False


def register(table_class=None):
    """Add the row action to ``table_class`` (the project Images table
    by default) once; returns the table class.
    """
    if table_class is None:
        from openstack_dashboard.dashboards.project.images.images import \
            tables as image_tables
        table_class = image_tables.ImagesTable
    if ACTION_NAME in table_class.base_actions:
        return table_class
    row_actions = list(table_class._meta.row_actions)
    # Before the destructive actions, which Horizon keeps last.
    position = len(row_actions)
    for index, action in enumerate(row_actions):
        if issubclass(action, tables.DeleteAction):
            position = index
            break
    row_actions.insert(position, MigrateImage)
    table_class._meta.row_actions = tuple(row_actions)
    table_class.base_actions[ACTION_NAME] = MigrateImage()
    return table_class


def unregister(table_class):
    """Remove the row action again (for tests)."""
    table_class._meta.row_actions = tuple(
        a for a in table_class._meta.row_actions if a is not MigrateImage)
    table_class.base_actions.pop(ACTION_NAME, None)
