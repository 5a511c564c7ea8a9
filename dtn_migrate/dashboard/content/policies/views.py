"""Views of the project's protection policies panel (the admin panel
subclasses them with ``dashboard = "admin"``)."""

import json

from django.conf import settings
from django.urls import reverse
from django.urls import reverse_lazy
from django.utils.translation import gettext_lazy as _
from horizon import exceptions
from horizon import forms
from horizon import tables
from horizon.utils import memoized

from dtn_migrate.dashboard.content.policies import forms as pol_forms
from dtn_migrate.dashboard.content.policies import tables as pol_tables
from dtn_migrate.dashboard import api
from dtn_migrate.dashboard import utils

#: Detail fields shown in the <dl>, in order: (key, label).
DETAIL_FIELDS = (
    ("id", _("ID")),
    ("name", _("Name")),
    ("description", _("Description")),
    ("role", _("Role")),
    ("peer", _("Peer")),
    ("mode", _("Mode")),
    ("schedule", _("Schedule")),
    ("enabled", _("Enabled")),
    ("selector", _("Selector")),
    ("options", _("Options")),
    ("rpo_target", _("RPO Target (min)")),
    ("rpo_state", _("RPO State")),
    ("rpo_seconds", _("RPO Age")),
    ("rpo_checked_at", _("RPO Checked")),
    ("images", _("Images")),
    ("project_id", _("Project ID")),
    ("last_sync_at", _("Last Sync")),
    ("last_error", _("Last Error")),
    ("created_at", _("Created")),
    ("updated_at", _("Updated")),
)


class IndexView(tables.DataTableView):
    table_class = pol_tables.PoliciesTable
    template_name = "dtn_migrate/policies/index.html"
    page_title = _("Protection Policies")
    all_projects = False

    def get_data(self):
        try:
            return api.policy_list(self.request,
                                   all_projects=self.all_projects)
        except Exception:
            exceptions.handle(self.request,
                              _("Unable to retrieve the policies."))
            return []


class CreateView(forms.ModalFormView):
    form_class = pol_forms.CreatePolicyForm
    form_id = "dtn_create_policy_form"
    template_name = "dtn_migrate/policies/create.html"
    modal_id = "dtn_create_policy_modal"
    page_title = _("Create Policy")
    submit_label = _("Create Policy")
    submit_url = reverse_lazy("horizon:project:dtn_policies:create")
    success_url = reverse_lazy("horizon:project:dtn_policies:index")

    def get_initial(self):
        return {"mode": "continuous", "rpo_minutes": 60}


class DetailView(tables.MultiTableView):
    """A policy's fields, its images and its drills.  The policies table
    is there for its row actions, shown in the page header and posted
    to this page.
    """

    table_classes = (pol_tables.ImagesTable, pol_tables.DrillsTable,
                     pol_tables.PoliciesTable)
    template_name = "dtn_migrate/policies/detail.html"
    page_title = "{{ policy.name }}"
    dashboard = "project"

    def index_url(self):
        return reverse("horizon:%s:dtn_policies:index" % self.dashboard)

    def get_tables(self):
        found = super().get_tables()
        for table in found.values():
            table.dashboard = self.dashboard
        return found

    @memoized.memoized_method
    def get_policy(self):
        try:
            return api.policy_get(self.request, self.kwargs["policy_id"])
        except Exception:
            exceptions.handle(
                self.request,
                _("Unable to retrieve policy %s.")
                % self.kwargs["policy_id"], redirect=self.index_url())

    def get_policies_data(self):
        return [self.get_policy()]

    def get_images_data(self):
        policy_id = self.get_policy().id
        try:
            images = api.policy_images(self.request, policy_id)
        except Exception:
            exceptions.handle(self.request,
                              _("Unable to retrieve the images of policy "
                                "%s.") % policy_id)
            return []
        for image in images:
            if image.get("migration_id"):
                image.migration_url = reverse(
                    "horizon:%s:dtn_migrations:detail" % self.dashboard,
                    args=(image.get("migration_id"),))
        return images

    def get_drills_data(self):
        policy_id = self.get_policy().id
        try:
            return api.drill_list(self.request, policy_id=policy_id)
        except Exception:
            exceptions.handle(self.request,
                              _("Unable to retrieve the drills of policy "
                                "%s.") % policy_id)
            return []

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        policy = self.get_policy()
        context["policy"] = policy
        context["fields"] = detail_fields(policy)
        context["url"] = self.request.path
        context["replica"] = policy.get("role") == "replica"
        context["poll_interval"] = settings.HORIZON_CONFIG.get(
            "ajax_poll_interval", 2500)
        table = self._tables["policies"]
        context["actions"] = table.render_row_actions(policy)
        return context


_CHOICES = {"mode": dict(pol_tables.MODE_DISPLAY),
            "rpo_state": dict(pol_tables.RPO_DISPLAY),
            "role": dict(pol_tables.ROLE_DISPLAY)}


def _json(value):
    """A selector or options: ``tags=["gold"], keep_id=false`` (the
    entries that are set).
    """
    return ", ".join("%s=%s" % (k, json.dumps(v, sort_keys=True))
                     for k, v in sorted((value or {}).items())
                     if v not in (None, [], {})) or "-"


def _value(policy, key):
    if key == "rpo_target":
        return policy.rpo_target
    if key == "rpo_state":
        return policy.rpo_state
    if key == "rpo_seconds":
        return policy.rpo_seconds
    if key == "rpo_checked_at":
        return (policy.get("rpo") or {}).get("checked_at")
    return policy.get(key)


def _display(key, value):
    if key == "enabled":
        return _("Yes") if value else _("No")
    if key in ("selector", "options"):
        return _json(value)
    if key == "images":
        counts = value or {}
        return ", ".join("%s %s" % (counts.get(state) or 0, label)
                         for state, label in pol_tables.IMAGE_STATE_DISPLAY)
    if value is None or value == "":
        return "-"
    if key in _CHOICES:
        return _CHOICES[key].get(value, value)
    if key == "rpo_seconds":
        return utils.human_duration(value)
    if key.endswith("_at"):
        return utils.local_time(value)
    return value


def detail_fields(policy):
    """(key, label, display value) of the detail page's <dl>."""
    return [(key, label, _display(key, _value(policy, key)))
            for key, label in DETAIL_FIELDS]
