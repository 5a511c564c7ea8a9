"""The admin migrations table: every project, with a project column."""

from django.utils.translation import gettext_lazy as _
from horizon import tables

from dtn_migrate.dashboard.content.migrations import tables as mig_tables


def project_label(migration):
    """The project's name when the view found it, else its id."""
    return getattr(migration, "project_name", None) or \
        migration.get("project_id")


class AdminUpdateRow(mig_tables.UpdateRow):
    pass


class AdminMigrationsTable(mig_tables.MigrationsTable):
    image = tables.WrappingColumn(
        mig_tables.image_label, verbose_name=_("Image"),
        link="horizon:admin:dtn_migrations:detail")
    project = tables.Column(project_label, verbose_name=_("Project"))

    class Meta(object):
        name = "migrations"
        verbose_name = _("Migrations")
        row_class = AdminUpdateRow
        status_columns = ["state"]
        columns = ("project", "image", "peer", "state", "stage",
                   "progress", "created")
        table_actions = (mig_tables.MigrationFilter,
                         mig_tables.CancelMigration)
        row_actions = (mig_tables.CancelMigration,
                       mig_tables.RetryMigration)
