"""The admin policies table: every project, with a project column."""

from django.utils.translation import gettext_lazy as _
from horizon import tables

from dtn_migrate.dashboard.content.admin_migrations import \
    tables as admin_mig_tables
from dtn_migrate.dashboard.content.policies import tables as pol_tables


class AdminUpdateRow(pol_tables.UpdateRow):
    pass


class AdminPoliciesTable(pol_tables.PoliciesTable):
    name = tables.WrappingColumn("name", verbose_name=_("Name"),
                                 link="horizon:admin:dtn_policies:detail")
    project = tables.Column(admin_mig_tables.project_label,
                            verbose_name=_("Project"))
    dashboard = "admin"

    class Meta(object):
        name = "policies"
        verbose_name = _("Protection Policies")
        row_class = AdminUpdateRow
        status_columns = ["rpo_state"]
        columns = ("project", "name", "peer", "mode", "rpo_target",
                   "rpo_state", "rpo_age", "replicated", "pending",
                   "failed", "enabled")
        table_actions = (pol_tables.DeletePolicy,)
        row_actions = (pol_tables.SyncPolicy, pol_tables.StartDrill,
                       pol_tables.DeletePolicy)
