"""The stage timeline and the events of one migration's detail page."""

from django.utils.translation import gettext_lazy as _
from horizon import tables

from dtn_migrate.common import states
from dtn_migrate.dashboard import utils


class Stage(object):
    """One row of the timeline: a stage's times and bytes."""

    def __init__(self, name, started=None, finished=None, nbytes=None,
                 outcome=None):
        self.id = name
        self.name = name
        self.started = started
        self.finished = finished
        self.bytes = nbytes
        self.outcome = outcome

    @property
    def duration(self):
        start = utils.parse_time(self.started)
        end = utils.parse_time(self.finished)
        if start is None or end is None:
            return None
        return (end - start).total_seconds()


def _latest_attempt(events):
    """The events since the last retry: the attempt the bytes are of."""
    events = list(events or ())
    for i in range(len(events) - 1, -1, -1):
        if events[i].get("event") == "retried":
            return events[i + 1:]
    return events


def timeline(migration):
    """The Stage rows of a migration's latest attempt, from its events
    and bytes.
    """
    nbytes = migration.get("bytes") or {}
    latest = _latest_attempt(migration.get("events"))
    rows = []
    for name in states.STAGES:
        stage = Stage(name, nbytes=nbytes.get(name))
        for event in latest:
            if event.get("stage") != name:
                continue
            kind = event.get("event")
            if kind == "started" and stage.started is None:
                stage.started = event.get("created_at")
            elif kind in ("finished", "failed", "cancelled"):
                stage.finished = event.get("created_at")
                stage.outcome = kind
        rows.append(stage)
    return rows


class Event(object):
    def __init__(self, index, event):
        self.id = str(index)
        self.stage = event.get("stage")
        self.event = event.get("event")
        self.message = event.get("message")
        self.bytes = event.get("bytes")
        self.created_at = event.get("created_at")


def events(migration):
    return [Event(i, e) for i, e in
            enumerate(migration.get("events") or (), start=1)]


def _bytes(value):
    return utils.human_bytes(value) if value else "-"


class StagesTable(tables.DataTable):
    name = tables.Column("name", verbose_name=_("Stage"))
    started = tables.Column("started", verbose_name=_("Started"),
                            filters=(utils.local_time,))
    finished = tables.Column("finished", verbose_name=_("Finished"),
                             filters=(utils.local_time,))
    duration = tables.Column("duration", verbose_name=_("Duration"),
                             filters=(utils.human_duration,),
                             empty_value="-")
    bytes = tables.Column("bytes", verbose_name=_("Bytes"),
                          filters=(_bytes,), empty_value="-")
    outcome = tables.Column("outcome", verbose_name=_("Outcome"),
                            empty_value="-")

    class Meta(object):
        name = "stages"
        verbose_name = _("Stage Timeline")


class EventsTable(tables.DataTable):
    created_at = tables.Column("created_at", verbose_name=_("Time"),
                               filters=(utils.local_time,))
    stage = tables.Column("stage", verbose_name=_("Stage"),
                          empty_value="-")
    event = tables.Column("event", verbose_name=_("Event"))
    bytes = tables.Column("bytes", verbose_name=_("Bytes"),
                          filters=(_bytes,), empty_value="-")
    message = tables.WrappingColumn("message", verbose_name=_("Message"),
                                    empty_value="-")

    class Meta(object):
        name = "events"
        verbose_name = _("Events")


def failed_stage(migration):
    """The stage that failed, for a failed migration: that of the
    latest attempt's last ``failed`` event naming one (the record's
    events, when it has them), else the record's stage; None for a
    migration that did not fail.
    """
    if migration.get("state") != "failed":
        return None
    for event in reversed(_latest_attempt(migration.get("events"))):
        if event.get("event") == "failed" and event.get("stage"):
            return event["stage"]
    return migration.get("stage")
