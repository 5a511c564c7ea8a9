"""Columns and progress drawing shared by the ``openstack dtn`` commands."""

import contextlib
import signal
import threading
import time

from cliff import columns
from osc_lib import exceptions
from osc_lib import utils
from oslo_utils import timeutils
from oslo_utils import uuidutils

from dtn_migrate.client import exceptions as client_exc
from dtn_migrate.client import progress as client_progress
from dtn_migrate.common import states
from dtn_migrate.common import text
from dtn_migrate.common import units


class BlankColumn(columns.FormattableColumn):
    """A value not set: blank in tables, as the formatted columns' (a
    size, rate, progress or ETA not known), rather than ``None``; null
    in json/yaml.
    """

    def human_readable(self):
        return ""

    def machine_readable(self):
        return None

    # After every value in a sorted column (--sort-column), as None was.
    def __lt__(self, other):
        return False

    def __gt__(self, other):
        return not isinstance(other, BlankColumn)


def properties(item, fields, formatters=None):
    """``item``'s values of ``fields`` (osc-lib's get_dict_properties),
    each formatted by its column of ``formatters``, and blank when not
    set.
    """
    return tuple(BlankColumn(None) if value is None else value
                 for value in utils.get_dict_properties(
                     item, fields, formatters=formatters))


def human_bytes(value):
    return "" if value is None else units.human(value)


class BytesColumn(columns.FormattableColumn):
    """A byte count: ``1.2 GiB`` in tables, the integer in json/yaml."""

    def human_readable(self):
        return human_bytes(self._value)

    def machine_readable(self):
        return self._value


class RateColumn(columns.FormattableColumn):
    """Bytes per second: ``310.0 MiB/s``; the number in json/yaml."""

    def human_readable(self):
        return "" if self._value is None else units.rate(self._value)

    def machine_readable(self):
        return self._value


class ProgressColumn(columns.FormattableColumn):
    """A fraction 0..1: ``42.0%``; the fraction in json/yaml."""

    def human_readable(self):
        return "" if self._value is None else \
            "%.1f%%" % (100.0 * float(self._value))

    def machine_readable(self):
        return self._value


class SecondsColumn(columns.FormattableColumn):
    """Seconds left: ``01:05``; the number in json/yaml."""

    def human_readable(self):
        return "" if self._value is None else \
            client_progress.duration(self._value)

    def machine_readable(self):
        return self._value


class StageBytesColumn(columns.FormattableColumn):
    """Bytes per stage: ``export=2.0 GiB, transfer=1.1 GiB, import=0 B``;
    the dict in json/yaml.
    """

    def human_readable(self):
        value = self._value or {}
        return ", ".join("%s=%s" % (stage, human_bytes(value.get(stage)))
                         for stage in states.STAGES
                         if stage in value)

    def machine_readable(self):
        return dict(self._value or {})


class EventsColumn(columns.FormattableColumn):
    """The stage timeline, one event a line; the list in json/yaml."""

    def human_readable(self):
        lines = []
        for event in self._value or ():
            parts = [event.get("created_at") or "",
                     event.get("stage") or "-", event.get("event") or ""]
            if event.get("bytes") is not None:
                parts.append(human_bytes(event["bytes"]))
            if event.get("message"):
                parts.append(client_progress.first_line(event["message"]))
            lines.append(" ".join(parts))
        return "\n".join(lines)

    def machine_readable(self):
        return list(self._value or ())


def check_limit(value):
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = 0
    if number < 1:
        raise exceptions.CommandError(
            "--limit must be a positive integer, not %r" % value)
    return number


def check_time(value, option):
    """An ISO 8601 time as given, or CommandError naming ``option``."""
    try:
        timeutils.parse_isotime(value)
    except ValueError:
        raise exceptions.CommandError(
            "%s must be an ISO 8601 time such as 2026-11-24T10:00:00Z, "
            "not %r" % (option, value))
    return value


def check_uuid(value, option):
    """``value`` when it is a UUID, or CommandError naming ``option``."""
    if value is not None and not uuidutils.is_uuid_like(value):
        raise exceptions.CommandError(
            "%s must be a UUID, such as %s, not %s"
            % (option, EXAMPLE_UUID, text.quote(value)))
    return value


#: The UUID the messages show.
EXAMPLE_UUID = "0b7e9c1d-5d8f-4a2b-9c61-3f2e8d7a6b54"


def image_id(image_client, value):
    """An image id for ``value``, an id or a name looked up in Glance."""
    if uuidutils.is_uuid_like(value):
        return value
    if image_client is None:
        raise exceptions.CommandError(
            "%s is not an image id, and no image service to look it up "
            "by name" % text.quote(value))
    try:
        return image_client.find_image(value, ignore_missing=False).id
    except Exception as exc:
        reason = str(exc)
    if value in reason:
        # The image service's own words name it: once, shortened.
        raise exceptions.CommandError("Cannot find image: %s" % reason.replace(
            value, text.shorten(value)))
    raise exceptions.CommandError(
        "Cannot find image %s: %s" % (text.quote(value), reason))


def call(func, *args, **kwargs):
    """``func(...)``; a client error becomes a CommandError with the
    API's message (the shell prints it and exits 1).
    """
    try:
        return func(*args, **kwargs)
    except client_exc.ClientException as exc:
        raise exceptions.CommandError(str(exc))


def _find_policy(client, name_or_id):
    try:
        return client.policies.find(name_or_id)
    except client_exc.HttpNotFound as exc:
        not_found = exc
    try:
        found = client.policies.list(name=name_or_id, all_projects=True)
    except (client_exc.HttpForbidden, client_exc.HttpBadRequest):
        found = []
    if len(found) == 1:
        return found[0]
    if found:
        raise exceptions.CommandError(
            "%d protection policies of several projects are named %s; "
            "give an ID" % (len(found), name_or_id))
    raise exceptions.CommandError(str(not_found))


def find_policy(client, name_or_id):
    """The protection policy of this ID or name.  In the replicas' cloud
    the policy belongs to the project the replicas were imported into,
    often not the caller's: an administrator's name that matches none of
    its own project's policies is looked up in every project (drills,
    failover, failback).
    """
    return call(_find_policy, client, name_or_id)


def progress_record(migration):
    """The record shape dtn-migrate-manage's progress lines read, from a
    REST Migration object.
    """
    stage = migration.get("stage")
    current = states.STAGES.index(stage) \
        if stage in states.STAGES else None
    counts = migration.get("bytes") or {}
    final = migration.get("state") in states.FINAL_STATES
    stages = {}
    for index, name in enumerate(states.STAGES):
        done = counts.get(name) or 0
        begun = done or (current is not None and index <= current) or \
            migration.get("state") == "complete"
        if not begun:
            continue
        st = {"done": done}
        if index == current and not final:
            st["rate"] = migration.get("rate")
        stages[name] = st
    return {"migration_id": migration.get("id"),
            "image_id": migration.get("image_id"),
            "image_name": migration.get("image_name"),
            "state": migration.get("state"),
            "progress": migration.get("progress"),
            "size": migration.get("size"),
            "error": migration.get("error"),
            "current_stage": stage if current is not None else None,
            "eta": None if final else migration.get("eta"),
            "peer_silent_since": migration.get("peer_silent_since"),
            "stages": stages}


class _Progress(client_progress.Progress):
    """dtn-migrate-manage's progress lines, plus the bytes the current
    stage has moved, e.g. ``... ETA 00:12 (transfer 1.0 GiB of 3.0
    GiB)``, where the terminal has room for them.
    """

    def line(self, record, columns=None):
        stage = record.get("current_stage")
        extra = ""
        if stage and record.get("state") not in \
                states.FINAL_STATES:
            done = (record["stages"].get(stage) or {}).get("done") or 0
            extra = " (%s %s" % (stage, human_bytes(done))
            if record.get("size"):
                extra += " of %s" % human_bytes(record["size"])
            extra += ")"
        text = super().line(record) + extra
        if columns is None or len(text) <= columns - 1:
            return text
        # No room: the stages say enough, and the line fits.
        return super().line(record, columns)


@contextlib.contextmanager
def ctrl_c_between_polls(slice_=0.1):
    """A ``sleep`` for poll loops in which Ctrl-C always takes effect.

    The first SIGINT only sets a flag, and the pause under way (or the
    next one) raises KeyboardInterrupt.  Raised by the default handler
    at whatever point the signal lands, it can be lost: a finalizer that
    runs at that moment prints it and goes on, and the loop would wait
    for ever.  A second SIGINT raises at once (a request that hangs).
    Outside the main thread, where no handler can be set, or where
    SIGINT is ignored (a command started in the background), a plain
    sleep.
    """
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        yield time.sleep
        return
    hit = []

    def on_sigint(signum, frame):
        if hit:
            raise KeyboardInterrupt()
        hit.append(signum)

    def pause(seconds):
        end = time.monotonic() + seconds
        while not hit:
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, slice_))
        raise KeyboardInterrupt()

    old = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield pause
    finally:
        signal.signal(signal.SIGINT, old)


class Waiter:
    """Waits for migrations, drawing their progress on ``stream``:
    redrawn in place on a terminal; otherwise a plain line when a
    migration's state or tenth of progress changes, and at least every
    ``period`` seconds while it runs.
    """

    def __init__(self, client, stream, interval=2.0, timeout=None,
                 period=30.0, clock=time.monotonic, reused=()):
        self.client = client
        #: Ids of the migrations a request got rather than started:
        #: their lines say "(reused)".
        self.reused = frozenset(reused)
        self.progress = _Progress(stream)
        self.stream = stream
        self.interval = interval
        self.timeout = timeout
        self.period = period
        self.clock = clock
        self.shown = {}                 # migration id -> time of its line

    def draw(self, migrations):
        records = [dict(progress_record(m),
                        reused=m.get("id") in self.reused)
                   for m in migrations]
        if not self.progress.tty:
            now = self.clock()
            for rec in records:
                mid = rec["migration_id"]
                if now - self.shown.get(mid, now) >= self.period and \
                        rec["state"] not in states.FINAL_STATES:
                    # Its line is due again, changed or not.
                    self.progress.printed.pop(mid, None)
            before = dict(self.progress.printed)
            self.progress.draw(records)
            for rec in records:
                mid = rec["migration_id"]
                if mid not in self.shown or \
                        self.progress.printed.get(mid) != before.get(mid):
                    self.shown[mid] = now
            return
        self.progress.draw(records)

    def wait(self, ids):
        """The final records of ``ids``; CommandError on a timeout or
        an API error; KeyboardInterrupt (Ctrl-C) stops waiting, and the
        migrations go on.
        """
        try:
            with ctrl_c_between_polls() as pause:
                return call(self.client.migrations.wait, list(ids),
                            callback=self.draw, interval=self.interval,
                            timeout=self.timeout, sleep=pause)
        except KeyboardInterrupt:
            self.stream.write(
                "\nStopped waiting; the migrations go on. Wait again with: "
                "openstack dtn migration wait %s\n" % " ".join(ids))
            self.stream.flush()
            raise


def failures(migrations):
    """A CommandError naming each failed or cancelled migration, or
    None when all completed.
    """
    bad = [m for m in migrations if m.get("state") != "complete"]
    if not bad:
        return None
    return exceptions.CommandError("\n".join(
        "Migration %s of image %s %s: %s" % (
            m.get("id"), m.get("image_name") or m.get("image_id"),
            m.get("state"), client_progress.first_line(m.get("error"))
            or "no error recorded")
        for m in bad))
