"""The admin migrations table: every project, with its project and
direction columns.
"""

from django.utils.translation import gettext_lazy as _
from horizon import tables

from dtn_migrate.dashboard import cells
from dtn_migrate.dashboard.content.migrations import tables as mig_tables

DIRECTION_DISPLAY = (
    ("outgoing", _("Outgoing")),
    ("incoming", _("Incoming")),
)


def project_label(migration):
    """The project's name when the view found it, else its id.  An
    incoming migration has no project of this cloud's users: the
    project its image was imported into when the view found it, else
    the service's (where an import goes unless the peer's rules map it
    elsewhere).
    """
    name = getattr(migration, "project_name", None) or \
        migration.get("project_id")
    if name:
        return name
    if migration.get("direction") == "incoming":
        imported = getattr(migration, "import_project", None)
        if imported:
            return _("%s (imported into)") % imported
        return _("Service project (import)")
    return None


class AdminUpdateRow(mig_tables.UpdateRow):
    pass


class AdminMigrationsTable(mig_tables.MigrationsTable):
    image = cells.EllipsisColumn(
        mig_tables.image_label, verbose_name=_("Image"),
        link="horizon:admin:dtn_migrations:detail")
    project = tables.Column(project_label, verbose_name=_("Project"),
                            empty_value="-")
    direction = tables.Column("direction", verbose_name=_("Direction"),
                              display_choices=DIRECTION_DISPLAY,
                              empty_value="-")

    class Meta(object):
        name = "migrations"
        verbose_name = _("Migrations")
        row_class = AdminUpdateRow
        status_columns = ["state"]
        columns = ("project", "direction", "image", "peer", "state",
                   "stage", "progress", "reason", "created")
        table_actions = (mig_tables.MigrationFilter,
                         mig_tables.CancelMigration)
        row_actions = (mig_tables.CancelMigration,
                       mig_tables.RetryMigration)
