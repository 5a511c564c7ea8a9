"""The migrations table: live rows, progress bar, filters, actions."""

from django.template import loader
from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext_lazy
from horizon import exceptions
from horizon import tables
from openstack_dashboard import policy as horizon_policy

from dtn_migrate.common import states
from dtn_migrate.common import text
from dtn_migrate.dashboard import api
from dtn_migrate.dashboard import cells
from dtn_migrate.dashboard.content.migrations import stages
from dtn_migrate.dashboard import policy
from dtn_migrate.dashboard import utils

#: Final states; queued and running are "pending" for the row updates.
STATUS_CHOICES = (
    ("queued", None),
    ("running", None),
    ("complete", True),
    ("failed", False),
    ("cancelled", False),
)
STATE_DISPLAY = (
    ("queued", _("Queued")),
    ("running", _("Running")),
    ("complete", _("Complete")),
    ("failed", _("Failed")),
    ("cancelled", _("Cancelled")),
)
STAGE_DISPLAY = (
    ("preflight", _("Preflight")),
    ("export", _("Export")),
    ("transfer", _("Transfer")),
    ("import", _("Import")),
)
DETAIL_URL = "horizon:project:dtn_migrations:detail"


def _target(datum):
    return {"project_id": getattr(datum, "project_id", None)}


class MigrateLink(tables.LinkAction):
    """Open the "Migrate to peer cloud" form."""

    name = "migrate"
    verbose_name = _("Migrate to Peer Cloud")
    url = "horizon:project:dtn_migrations:migrate"
    classes = ("ajax-modal",)
    icon = "share"
    policy_rules = policy.MIGRATION_CREATE


class _MigrationAction(tables.BatchAction):
    """A row action calling the API, whose errors become messages."""

    allowed_states = ()
    #: The name of the api function called with (request, id).
    api_call = None
    failure = ""

    def get_policy_target(self, request, datum=None):
        return _target(datum) if datum is not None else {}

    def allowed(self, request, datum=None):
        if datum is None:
            return True
        return getattr(datum, "state", None) in self.allowed_states

    def action(self, request, obj_id):
        try:
            getattr(api, self.api_call)(request, obj_id)
        except Exception:
            exceptions.handle(request, self.failure % {"id": obj_id},
                              escalate=True)


class CancelMigration(_MigrationAction):
    name = "cancel"
    action_type = "danger"
    icon = "stop"
    policy_rules = policy.MIGRATION_CANCEL
    allowed_states = states.ACTIVE_STATES
    help_text = _("The migration stops where it is; it may be retried.")
    api_call = "migration_cancel"
    failure = _("Unable to cancel migration %(id)s.")

    @staticmethod
    def action_present(count):
        return ngettext_lazy("Cancel Migration", "Cancel Migrations", count)

    @staticmethod
    def action_past(count):
        return ngettext_lazy("Cancelled Migration", "Cancelled Migrations",
                             count)


class RetryMigration(_MigrationAction):
    name = "retry"
    icon = "repeat"
    policy_rules = policy.MIGRATION_RETRY
    allowed_states = states.UNSUCCESSFUL_STATES
    help_text = _("A new attempt of the migration starts.")
    api_call = "migration_retry"
    failure = _("Unable to retry migration %(id)s.")

    def allowed(self, request, datum=None):
        if datum is not None and \
                getattr(datum, "direction", "outgoing") != "outgoing":
            return False
        return super().allowed(request, datum)

    @staticmethod
    def action_present(count):
        return ngettext_lazy("Retry Migration", "Retry Migrations", count)

    @staticmethod
    def action_past(count):
        return ngettext_lazy("Retried Migration", "Retried Migrations",
                             count)


class MigrationFilter(tables.FilterAction):
    """Server-side filter: the API filters by state or by peer."""

    filter_type = "server"
    filter_choices = (
        ("state", _("State ="), True,
         _("queued, running, complete, failed or cancelled")),
        ("peer", _("Peer ="), True),
    )


class UpdateRow(tables.Row):
    """Rows of unfinished migrations are refreshed by AJAX."""

    ajax = True

    def get_data(self, request, migration_id):
        return api.migration_get(request, migration_id)


def stage_bytes(migration):
    """(stage, bytes it moved) of each stage a migration has begun: the
    API's ``bytes``, never progress times size.
    """
    moved = migration.get("bytes") or {}
    names = ("import",) if migration.get("direction") == "incoming" \
        else states.STAGES
    complete = migration.get("state") == "complete"
    return [(name, utils.human_bytes(moved.get(name) or 0))
            for name in names if moved.get(name) or complete]


def progress_cell(migration):
    """The progress bar with the bytes each stage moved, rate, ETA and
    whether the peer answers (HTML).
    """
    size = migration.get("size")
    progress = migration.get("progress") or 0.0
    if migration.get("state") == "complete":
        progress = 1.0
    running = migration.get("state") == "running"
    silent = migration.get("peer_silent_since") if running else None
    context = {
        "percent": utils.percent(progress),
        "state": migration.get("state"),
        "stages": stage_bytes(migration) if size else [],
        "size": utils.human_bytes(size) if size else None,
        "rate": utils.human_rate(migration.get("rate"))
        if running and migration.get("rate") else None,
        "eta": utils.human_duration(migration.get("eta"))
        if running and migration.get("eta") is not None else None,
        "peer_silent_since": "%s UTC" % utils.local_time(silent)
        if silent else None,
    }
    return loader.render_to_string("dtn_migrate/migrations/_progress.html",
                                   context)


def image_label(migration):
    return migration.get("image_name") or migration.get("image_id")


def stage_label(migration):
    """The stage the migration is in; for a failed one, the stage that
    failed, said so.
    """
    names = dict(STAGE_DISPLAY)
    failed = stages.failed_stage(migration)
    if failed:
        return _("%s (failed)") % names.get(failed, failed)
    stage = migration.get("stage")
    return names.get(stage, stage) if stage else None


def failure_reason(migration):
    """Why a failed or cancelled migration ended: its error; None for
    the others.
    """
    if migration.get("state") not in states.UNSUCCESSFUL_STATES:
        return None
    return migration.get("error") or None


def usable_row_actions(table):
    """The row actions whose policy lets the table's user run them on
    a migration of the user's project.
    """
    return [action for action in table._meta.row_actions
            if horizon_policy.check(action.policy_rules, table.request)]


class MigrationsTable(tables.DataTable):
    image = cells.EllipsisColumn(image_label, verbose_name=_("Image"),
                                 link=DETAIL_URL)
    peer = cells.EllipsisColumn("peer", verbose_name=_("Peer"),
                                css="dtn-peer")
    state = tables.Column("state", verbose_name=_("State"), status=True,
                          status_choices=STATUS_CHOICES,
                          display_choices=STATE_DISPLAY)
    stage = tables.Column(stage_label, verbose_name=_("Stage"),
                          empty_value="-")
    progress = tables.Column(progress_cell, verbose_name=_("Progress"),
                             classes=("dtn-progress",))
    reason = cells.EllipsisColumn(failure_reason,
                                  verbose_name=_("Failure Reason"),
                                  limit=text.LIMIT, css="dtn-reason",
                                  empty_value="-")
    created = tables.Column("created_at", verbose_name=_("Created"),
                            filters=(utils.since,),
                            attrs={"data-type": "timesince"})

    def __init__(self, request, *args, **kwargs):
        super().__init__(request, *args, **kwargs)
        # A reader, who may run no row action, sees no Actions column.
        if "actions" in self.columns and not usable_row_actions(self):
            del self.columns["actions"]

    def get_object_display(self, datum):
        return image_label(datum) or datum.id

    def get_object_by_id(self, lookup):
        """The row's migration; one the table does not list (filtered
        out, or acted on from its detail page) is read from the API.
        """
        try:
            return super().get_object_by_id(lookup)
        except exceptions.Http302:
            try:
                return api.migration_get(self.request, lookup)
            except Exception:
                pass
            raise

    class Meta(object):
        name = "migrations"
        verbose_name = _("Migrations")
        row_class = UpdateRow
        status_columns = ["state"]
        table_actions = (MigrationFilter, MigrateLink, CancelMigration)
        row_actions = (CancelMigration, RetryMigration)


def detail_url(migration_id, dashboard="project"):
    return reverse("horizon:%s:dtn_migrations:detail" % dashboard,
                   args=(migration_id,))
