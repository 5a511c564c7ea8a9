"""Views of the admin migrations panel: all projects."""

import logging

from openstack_dashboard.api import glance
from openstack_dashboard.api import keystone

from dtn_migrate.dashboard.content.admin_migrations import tables
from dtn_migrate.dashboard.content.migrations import views

LOG = logging.getLogger(__name__)


def project_names(request):
    """{project id: name} from Keystone; empty when it cannot be read
    (the table then shows the ids).
    """
    try:
        projects, _more = keystone.tenant_list(request)
    except Exception as exc:
        LOG.warning("Unable to read the project names: %s", exc)
        return {}
    return {p.id: p.name for p in projects}


def import_owner(request, migration):
    """The project an incoming migration's image was imported into
    (its owner in this cloud's Glance), or None when it is not known
    (not imported yet, or Glance does not answer).
    """
    for image_id in (migration.get("peer_image_id"),
                     migration.get("image_id")):
        if not image_id:
            continue
        try:
            owner = getattr(glance.image_get(request, image_id), "owner",
                            None)
        except Exception as exc:
            LOG.debug("No owner of image %s: %s", image_id, exc)
            continue
        if owner:
            return owner
    return None


class IndexView(views.IndexView):
    table_class = tables.AdminMigrationsTable
    all_projects = True

    def get_data(self):
        migrations = super().get_data()
        if migrations:
            names = project_names(self.request)
            for migration in migrations:
                migration.project_name = names.get(migration.project_id)
                if migration.get("direction") == "incoming" and \
                        not migration.get("project_id"):
                    owner = import_owner(self.request, migration)
                    if owner:
                        migration.import_project = names.get(owner, owner)
        return migrations


class DetailView(views.DetailView):
    dashboard = "admin"

    def actions_table_class(self):
        return tables.AdminMigrationsTable
