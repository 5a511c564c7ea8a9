"""Migrations: create, list, show, cancel, retry and wait."""

import datetime
import time
import uuid

import tenacity

from dtn_migrate.client import exceptions
from dtn_migrate.client import listing
from dtn_migrate.client import polling
from dtn_migrate.common import states

SORT_KEYS = ("created_at", "updated_at", "state", "image_name", "peer",
             "progress", "id")
SORT_DIRS = ("asc", "desc")


def _isotime(value):
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.timezone.utc).replace(
                tzinfo=None)
        return value.isoformat() + "Z"
    return value


def is_final(migration):
    return bool(migration) and migration.get("state") in states.FINAL_STATES


class MigrationManager:

    def __init__(self, client):
        self.client = client

    def create(self, peer, images=None, tag=None, properties=None,
               options=None, request_id=None, retries=2):
        """Ask for migrations of ``images`` (ids), or of the images that
        carry ``tag`` and/or ``properties``, to ``peer``.

        ``request_id`` (generated when not given) makes the request safe
        to send again: the same id answers with the same records.  So an
        API that cannot be reached or answers 502/503/504 is asked again,
        up to ``retries`` times (after 1 s, then 2 s...).
        Returns ``{"request_id": ..., "migrations": [...]}``.
        """
        body = {"peer": peer,
                "request_id": request_id or str(uuid.uuid4())}
        if images is not None:
            body["images"] = list(images)
        if tag is not None:
            body["tag"] = tag
        if properties is not None:
            body["properties"] = dict(properties)
        if options:
            body["options"] = dict(options)
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(polling.TRANSIENT),
            stop=tenacity.stop_after_attempt(1 + max(0, retries)),
            wait=tenacity.wait_exponential(multiplier=1, max=8),
            reraise=True)
        return retrying(self.client.post, "/migrations", body)

    def list(self, state=None, image_id=None, peer=None, direction=None,
             request_id=None, changes_since=None, marker=None, limit=None,
             sort_key=None, sort_dir=None, all_projects=False,
             page_size=None):
        """Migrations, newest first unless sorted otherwise.

        Follows the API's "next" links until ``limit`` migrations are
        read, or all of them when ``limit`` is None.  ``page_size``
        bounds each request (at most MAX_PAGE).  ``state`` may be one
        state or a list of them.  ``changes_since`` is a
        datetime (naive means UTC) or an ISO 8601 string.
        """
        params = {}
        for key, value in (("state", state), ("image_id", image_id),
                           ("peer", peer), ("direction", direction),
                           ("request_id", request_id),
                           ("changes-since", _isotime(changes_since)),
                           ("sort_key", sort_key),
                           ("sort_dir", sort_dir)):
            if value is not None:
                params[key] = list(value) if isinstance(
                    value, (list, tuple, set)) else value
        if all_projects:
            params["all_projects"] = "true"
        return listing.list_all(self.client, "/migrations", "migrations",
                                dict(params, marker=marker), limit,
                                page_size)

    def get(self, migration_id):
        """A migration with its ``events`` (the stage timeline)."""
        body = self.client.get("/migrations/%s" % listing.quote(migration_id))
        return body["migration"]

    def _action(self, migration_id, action):
        body = self.client.post("/migrations/%s/action"
                                % listing.quote(migration_id), {action: None})
        return body["migration"]

    def cancel(self, migration_id):
        """Cancel a queued or running migration; returns it."""
        return self._action(migration_id, "cancel")

    def retry(self, migration_id):
        """Try a failed or cancelled outgoing migration again."""
        return self._action(migration_id, "retry")

    def wait(self, migration_ids, callback=None, interval=2.0,
             timeout=None, outage=120.0, sleep=time.sleep):
        """Poll migrations until each is complete, failed or cancelled.

        ``migration_ids``: one id (returns that migration) or a list
        (returns the list, in the same order).  ``callback(migrations)``
        is called after every poll with the latest record of each.  An
        API that cannot be reached, or answers 502/503/504, is polled
        again for up to ``outage`` seconds in a row.  Raises WaitTimeout
        after ``timeout`` seconds (None: no limit).  Failed or cancelled
        migrations are returned, not raised: the caller decides.
        """
        single = isinstance(migration_ids, str)
        ids = [migration_ids] if single else list(migration_ids)
        if not ids:
            return []
        latest = {}

        def ended():
            for mid in ids:
                if not is_final(latest.get(mid)):
                    latest[mid] = self.get(mid)
            current = [latest[mid] for mid in ids]
            if callback is not None:
                callback(current)
            return all(is_final(m) for m in current) and current

        current = polling.poll(ended, interval, timeout, outage, sleep)
        if current is None:
            pending = [mid for mid in ids if not is_final(latest.get(mid))]
            raise exceptions.WaitTimeout(
                "%d migration(s) not finished after %d s: %s"
                % (len(pending), timeout, ", ".join(pending)))
        return current[0] if single else current
