"""The protection policies table, and the images and drills tables of a
policy's detail page.

The policy rows refresh themselves by AJAX while images wait for their
replica or the recovery point is not ``ok`` (at risk, or not computed
yet), so that a "Sync Now" can be watched from the table.
"""

from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext_lazy
from horizon import exceptions
from horizon import messages
from horizon import tables
from openstack_dashboard import policy as horizon_policy

from dtn_migrate.dashboard import api
from dtn_migrate.dashboard import policy
from dtn_migrate.dashboard import utils

#: The recovery point's grades as a status: at risk (and not computed
#: yet) is indeterminate, breached is bad.
RPO_STATUS_CHOICES = (
    ("ok", True),
    ("at-risk", None),
    ("breached", False),
)
RPO_DISPLAY = (
    ("ok", _("OK")),
    ("at-risk", _("At Risk")),
    ("breached", _("Breached")),
)
MODE_DISPLAY = (
    ("continuous", _("Continuous")),
    ("scheduled", _("Scheduled")),
    ("manual", _("Manual")),
)
ROLE_DISPLAY = (
    ("primary", _("Primary")),
    ("replica", _("Replica")),
)
IMAGE_STATUS_CHOICES = (
    ("pending", None),
    ("syncing", None),
    ("replicated", True),
    ("failed", False),
    ("deleting", None),
    ("removed", True),
)
IMAGE_STATE_DISPLAY = (
    ("pending", _("Pending")),
    ("syncing", _("Syncing")),
    ("replicated", _("Replicated")),
    ("failed", _("Failed")),
    ("deleting", _("Deleting replica")),
    ("removed", _("Removed")),
)
DRILL_STATUS_CHOICES = (
    ("running", None),
    ("passed", True),
    ("failed", False),
    ("error", False),
)
DRILL_STATE_DISPLAY = (
    ("running", _("Running")),
    ("passed", _("Passed")),
    ("failed", _("Failed")),
    ("error", _("Error")),
)


def _target(datum):
    return {"project_id": getattr(datum, "project_id", None)}


def detail_url(policy_id, dashboard="project"):
    return reverse("horizon:%s:dtn_policies:detail" % dashboard,
                   args=(policy_id,))


class CreatePolicyLink(tables.LinkAction):
    """Open the "Create Policy" form."""

    name = "create"
    verbose_name = _("Create Policy")
    url = "horizon:project:dtn_policies:create"
    classes = ("ajax-modal",)
    icon = "plus"
    policy_rules = policy.POLICY_CREATE


class _PolicyAction(tables.BatchAction):
    """A row action calling the API, whose errors become messages."""

    #: The roles (primary, replica) of the policies it applies to.
    roles = ("primary", "replica")

    def get_policy_target(self, request, datum=None):
        return _target(datum) if datum is not None else {}

    def allowed(self, request, datum=None):
        if datum is None:
            return True
        return (getattr(datum, "role", None) or "primary") in self.roles


class SyncPolicy(_PolicyAction):
    name = "sync"
    icon = "refresh"
    policy_rules = policy.POLICY_SYNC
    roles = ("primary",)
    help_text = _("Replicate now what the policy selects and the peer "
                  "does not hold yet.")

    @staticmethod
    def action_present(count):
        return ngettext_lazy("Sync Now", "Sync Now", count)

    @staticmethod
    def action_past(count):
        return ngettext_lazy("Sync started", "Sync started", count)

    def action(self, request, obj_id):
        try:
            _policy, started = api.policy_sync(request, obj_id)
        except Exception:
            exceptions.handle(request,
                              _("Unable to sync policy %s.") % obj_id,
                              escalate=True)
        if started:
            names = ", ".join(m.name for m in started)
            messages.info(request, _("%(count)d image(s) to replicate: "
                                     "%(names)s")
                          % {"count": len(started), "names": names})
        else:
            messages.info(request, _("Nothing to replicate: the peer "
                                     "holds every image the policy "
                                     "selects."))


class StartDrill(_PolicyAction):
    """Check the replicas of a policy, in the cloud that holds them."""

    name = "drill"
    icon = "check"
    policy_rules = policy.DRILL_START
    roles = ("replica",)
    help_text = _("Check every replica of the policy and measure the "
                  "time it takes to make them usable.")

    @staticmethod
    def action_present(count):
        return ngettext_lazy("Start Drill", "Start Drills", count)

    @staticmethod
    def action_past(count):
        return ngettext_lazy("Started Drill", "Started Drills", count)

    def action(self, request, obj_id):
        try:
            api.drill_start(request, obj_id)
        except Exception:
            exceptions.handle(request,
                              _("Unable to start a drill of policy %s.")
                              % obj_id, escalate=True)


class DeletePolicy(_PolicyAction, tables.DeleteAction):
    policy_rules = policy.POLICY_DELETE
    help_text = _("The replicas already made stay on the peer.")

    def allowed(self, request, datum=None):
        # A replica policy's loss is a failback's: an administrator's.
        if datum is not None and \
                (getattr(datum, "role", None) or "primary") != "primary" \
                and not horizon_policy.check(
                    policy.POLICY_DELETE_NON_PRIMARY, request,
                    self.get_policy_target(request, datum)):
            return False
        return super().allowed(request, datum)

    @staticmethod
    def action_present(count):
        return ngettext_lazy("Delete Policy", "Delete Policies", count)

    @staticmethod
    def action_past(count):
        return ngettext_lazy("Deleted Policy", "Deleted Policies", count)

    def delete(self, request, obj_id):
        try:
            api.policy_delete(request, obj_id)
        except Exception:
            exceptions.handle(request,
                              _("Unable to delete policy %s.") % obj_id,
                              escalate=True)

    def get_success_url(self, request=None):
        # From the detail page too: the policy is gone, back to the list.
        return self.table.index_url()


class UpdateRow(tables.Row):
    """Rows refresh while images wait or the RPO is not ``ok``."""

    ajax = True

    def get_data(self, request, policy_id):
        return api.policy_get(request, policy_id)

    @property
    def status(self):
        found = super().status
        if found is not False and getattr(self.datum, "pending", 0):
            return None
        return found


def rpo_age(policy):
    return utils.human_duration(policy.rpo_seconds)


def enabled(policy):
    return _("Yes") if policy.get("enabled") else _("No")


class PoliciesTable(tables.DataTable):
    name = tables.WrappingColumn("name", verbose_name=_("Name"),
                                 link="horizon:project:dtn_policies:detail")
    peer = tables.Column("peer", verbose_name=_("Peer"))
    mode = tables.Column("mode", verbose_name=_("Mode"),
                         display_choices=MODE_DISPLAY)
    rpo_target = tables.Column("rpo_target",
                               verbose_name=_("RPO Target (min)"),
                               empty_value="-")
    rpo_state = tables.Column("rpo_state", verbose_name=_("RPO State"),
                              status=True,
                              status_choices=RPO_STATUS_CHOICES,
                              display_choices=RPO_DISPLAY,
                              empty_value=_("Not computed"))
    rpo_age = tables.Column(rpo_age, verbose_name=_("RPO Age"))
    replicated = tables.Column("replicated", verbose_name=_("Replicated"))
    pending = tables.Column("pending", verbose_name=_("Pending"))
    failed = tables.Column("failed", verbose_name=_("Failed"))
    enabled = tables.Column(enabled, verbose_name=_("Enabled"))

    #: The dashboard whose panel the table is in.
    dashboard = "project"

    def index_url(self):
        return reverse("horizon:%s:dtn_policies:index" % self.dashboard)

    def get_object_display(self, datum):
        return datum.get("name") or datum.id

    def get_object_by_id(self, lookup):
        """The row's policy; one the table does not list (acted on from
        its detail page) is read from the API.
        """
        try:
            return super().get_object_by_id(lookup)
        except exceptions.Http302:
            try:
                return api.policy_get(self.request, lookup)
            except Exception:
                pass
            raise

    class Meta(object):
        name = "policies"
        verbose_name = _("Protection Policies")
        row_class = UpdateRow
        status_columns = ["rpo_state"]
        table_actions = (CreatePolicyLink, DeletePolicy)
        row_actions = (SyncPolicy, StartDrill, DeletePolicy)


def image_time(key):
    def value(image):
        return utils.local_time(image.get(key))
    value.__name__ = key
    return value


def migration_link(image):
    return image.get("migration_id") or "-"


class ImagesTable(tables.DataTable):
    name = tables.WrappingColumn("name", verbose_name=_("Image"))
    state = tables.Column("state", verbose_name=_("State"), status=True,
                          status_choices=IMAGE_STATUS_CHOICES,
                          display_choices=IMAGE_STATE_DISPLAY)
    changed_at = tables.Column(image_time("changed_at"),
                               verbose_name=_("Changed"))
    replicated_at = tables.Column(image_time("replicated_at"),
                                  verbose_name=_("Replicated"))
    migration = tables.Column(migration_link, verbose_name=_("Migration"),
                              link=lambda image: image.migration_url
                              if image.get("migration_id") else None)
    error = tables.WrappingColumn("error", verbose_name=_("Error"),
                                  empty_value="-")

    class Meta(object):
        name = "images"
        verbose_name = _("Images")


def drill_images(drill):
    total = drill.get("images_total")
    if total is None:
        return "-"
    return "%s / %s" % (drill.get("images_intact") or 0,
                        drill.get("images_bad") or 0)


def drill_rto(drill):
    return utils.human_duration(drill.get("rto_seconds"))


def drill_started(drill):
    return utils.local_time(drill.get("started_at") or
                            drill.get("created_at"))


class DrillRow(tables.Row):
    """A running drill's row refreshes itself until the drill ends."""

    ajax = True

    def get_data(self, request, drill_id):
        return api.drill_get(request, drill_id)


class DrillsTable(tables.DataTable):
    state = tables.Column("state", verbose_name=_("State"), status=True,
                          status_choices=DRILL_STATUS_CHOICES,
                          display_choices=DRILL_STATE_DISPLAY)
    images = tables.Column(drill_images, verbose_name=_("Intact / Bad"))
    rto = tables.Column(drill_rto, verbose_name=_("RTO"))
    started = tables.Column(drill_started, verbose_name=_("Started"))
    error = tables.WrappingColumn("error", verbose_name=_("Error"),
                                  empty_value="-")

    class Meta(object):
        name = "drills"
        verbose_name = _("Drills")
        row_class = DrillRow
        status_columns = ["state"]
