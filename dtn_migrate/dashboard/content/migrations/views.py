"""Views of the project's migrations panel (the admin panel subclasses
them with ``dashboard = "admin"``)."""

from django.conf import settings
from django.urls import reverse
from django.urls import reverse_lazy
from django.utils.translation import gettext_lazy as _
from horizon import exceptions
from horizon import forms
from horizon import tables
from horizon.utils import memoized

from dtn_migrate.common import states
from dtn_migrate.dashboard import cells
from dtn_migrate.dashboard.content.migrations import forms as mig_forms
from dtn_migrate.dashboard.content.migrations import stages
from dtn_migrate.dashboard.content.migrations import tables as mig_tables
from dtn_migrate.dashboard import api
from dtn_migrate.dashboard import utils

#: Detail fields shown in the <dl>, in order: (key, label).
DETAIL_FIELDS = (
    ("id", _("ID")),
    ("state", _("State")),
    ("stage", _("Stage")),
    ("image_id", _("Image ID")),
    ("image_name", _("Image Name")),
    ("peer", _("Peer")),
    ("direction", _("Direction")),
    ("mode", _("Mode")),
    ("attempt", _("Attempt")),
    ("size", _("Size")),
    ("progress", _("Progress")),
    ("peer_image_id", _("Peer Image ID")),
    ("peer_image_hash", _("Peer Image Hash")),
    ("os_hash_value", _("Source Image Hash")),
    ("project_id", _("Project ID")),
    ("request_id", _("Request ID")),
    ("created_at", _("Created")),
    ("started_at", _("Started")),
    ("finished_at", _("Finished")),
    ("error", _("Error")),
)


class IndexView(tables.DataTableView):
    table_class = mig_tables.MigrationsTable
    template_name = "dtn_migrate/migrations/index.html"
    page_title = _("Migrations")
    all_projects = False

    def get_data(self):
        filters = self.get_filters()
        try:
            return api.migration_list(self.request,
                                      all_projects=self.all_projects,
                                      **filters)
        except Exception:
            exceptions.handle(self.request,
                              _("Unable to retrieve the migrations."))
            return []


class MigrateView(forms.ModalFormView):
    form_class = mig_forms.MigrateForm
    form_id = "dtn_migrate_form"
    template_name = "dtn_migrate/migrations/migrate.html"
    modal_id = "dtn_migrate_modal"
    page_title = _("Migrate to Peer Cloud")
    submit_label = _("Migrate")
    submit_url = reverse_lazy("horizon:project:dtn_migrations:migrate")
    success_url = reverse_lazy("horizon:project:dtn_migrations:index")

    def get_initial(self):
        initial = {"mode": "pipelined"}
        image_ids = [i for i in self.request.GET.getlist("image_id") if i]
        if image_ids:
            initial["images"] = image_ids
        return initial

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        query = self.request.GET.urlencode()
        if query:
            context["submit_url"] = "%s?%s" % (self.submit_url, query)
        return context


class DetailView(tables.MultiTableView):
    table_classes = (stages.StagesTable, stages.EventsTable)
    template_name = "dtn_migrate/migrations/detail.html"
    page_title = "{{ migration.name }}"
    dashboard = "project"

    def index_url(self):
        return reverse("horizon:%s:dtn_migrations:index" % self.dashboard)

    @memoized.memoized_method
    def get_migration(self):
        try:
            return api.migration_get(self.request,
                                     self.kwargs["migration_id"])
        except Exception:
            exceptions.handle(
                self.request,
                _("Unable to retrieve migration %s.")
                % self.kwargs["migration_id"], redirect=self.index_url())

    def get_stages_data(self):
        return stages.timeline(self.get_migration())

    def get_events_data(self):
        return stages.events(self.get_migration())

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        migration = self.get_migration()
        context["migration"] = migration
        context["fields"] = detail_fields(migration)
        context["verified"] = utils.verified(migration)
        context["progress"] = mig_tables.progress_cell(migration)
        context["url"] = self.index_url()
        context["live"] = migration.get("state") in states.ACTIVE_STATES
        context["poll_interval"] = settings.HORIZON_CONFIG.get(
            "ajax_poll_interval", 2500)
        table = self.actions_table_class()(self.request)
        context["actions"] = table.render_row_actions(migration)
        return context

    def actions_table_class(self):
        return mig_tables.MigrationsTable


_CHOICES = {"state": dict(mig_tables.STATE_DISPLAY),
            "stage": dict(mig_tables.STAGE_DISPLAY)}
#: Values of 128 characters (sha512), kept on one line.
_HASHES = ("peer_image_hash", "os_hash_value")


def _display(key, value):
    if value is None or value == "":
        return "-"
    if key in _CHOICES:
        return _CHOICES[key].get(value, value)
    if key in _HASHES:
        return cells.ellipsis(value)
    if key == "size":
        return "%s (%d bytes)" % (utils.human_bytes(value), value)
    if key == "progress":
        return "%.1f %%" % utils.percent(value)
    if key.endswith("_at"):
        return utils.local_time(value)
    return value


def detail_fields(migration):
    """(key, label, display value) of the detail page's <dl>."""
    return [(key, label, mig_tables.stage_label(migration) or "-"
             if key == "stage" else _display(key, migration.get(key)))
            for key, label in DETAIL_FIELDS]
