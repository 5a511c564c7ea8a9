"""Views of the admin protection policies panel: all projects."""

from dtn_migrate.dashboard.content.admin_migrations import \
    views as admin_mig_views
from dtn_migrate.dashboard.content.admin_policies import tables
from dtn_migrate.dashboard.content.policies import views


class IndexView(views.IndexView):
    table_class = tables.AdminPoliciesTable
    all_projects = True

    def get_data(self):
        policies = super().get_data()
        if policies:
            names = admin_mig_views.project_names(self.request)
            for policy in policies:
                policy.project_name = names.get(policy.project_id)
        return policies


class DetailView(views.DetailView):
    dashboard = "admin"
    table_classes = (views.pol_tables.ImagesTable,
                     views.pol_tables.DrillsTable,
                     tables.AdminPoliciesTable)
