"""``openstack dtn migrate`` and ``openstack dtn migration ...``."""

import logging
import sys

from osc_lib.cli import parseractions
from osc_lib.command import command
from osc_lib import exceptions

from dtn_migrate.client import migrations as client_migrations
from dtn_migrate.common import states
from dtn_migrate.osc.v1 import common

LOG = logging.getLogger(__name__)

#: (key, heading) of ``migration list``; LONG_COLUMNS added by --long.
COLUMNS = (("id", "ID"), ("image_name", "Image Name"), ("peer", "Peer"),
           ("direction", "Direction"), ("state", "State"),
           ("stage", "Stage"), ("progress", "Progress"),
           ("updated_at", "Updated At"))
LONG_COLUMNS = (("image_id", "Image ID"), ("request_id", "Request ID"),
                ("size", "Size"), ("bytes", "Bytes"), ("rate", "Rate"),
                ("eta", "ETA"), ("attempt", "Attempt"), ("error", "Error"),
                ("project_id", "Project"), ("created_at", "Created At"),
                ("finished_at", "Finished At"))
#: Columns of ``migrate`` and ``migration wait``.
RESULT_COLUMNS = (("id", "ID"), ("image_id", "Image ID"),
                  ("image_name", "Image Name"), ("peer", "Peer"),
                  ("state", "State"), ("progress", "Progress"),
                  ("peer_image_id", "Peer Image ID"), ("error", "Error"),
                  ("request_id", "Request ID"))
#: Columns of ``migrate``: the result's, and whether each migration is
#: an existing one the request got (see :func:`reused_line`).
MIGRATE_COLUMNS = RESULT_COLUMNS + (("reused", "Reused"),)
#: Fields of ``migration show``, in this order.
SHOW_FIELDS = ("id", "request_id", "image_id", "image_name", "peer",
               "direction", "state", "peer_silent_since", "stage", "mode",
               "attempt", "size",
               "progress", "rate", "eta", "bytes", "error",
               "peer_image_id", "peer_image_hash", "os_hash_value",
               "project_id", "user_id", "created_at", "updated_at",
               "started_at", "finished_at", "events")
FORMATTERS = {"progress": common.ProgressColumn,
              "size": common.BytesColumn,
              "bytes": common.StageBytesColumn,
              "rate": common.RateColumn,
              "eta": common.SecondsColumn,
              "events": common.EventsColumn}


def _rows(migrations, columns):
    keys = [key for key, _ in columns]
    return ([heading for _, heading in columns],
            [common.properties(m, keys, formatters=FORMATTERS)
             for m in migrations])


def _show(migration):
    fields = [f for f in SHOW_FIELDS if f in migration]
    fields += sorted(set(migration) - set(SHOW_FIELDS))
    return fields, common.properties(migration, fields,
                                     formatters=FORMATTERS)


def reused_line(migration):
    """What stderr says of a migration the request got rather than
    started: which one, and since when.
    """
    state = migration.get("state")
    since = migration.get("finished_at") if state == "complete" else None
    since = since or migration.get("created_at")
    line = "Image %s: reused migration %s, %s since %s" % (
        migration.get("image_name") or migration.get("image_id"),
        migration.get("id"), state, since)
    if state == "complete":
        line += " (the peer holds its copy; --force makes another)"
    return line


def _add_wait_options(parser):
    parser.add_argument(
        "--interval", metavar="<seconds>", type=float, default=2.0,
        help="Seconds between polls of the API while waiting "
             "(default 2)")
    parser.add_argument(
        "--timeout", metavar="<seconds>", type=float, default=None,
        help="Give up waiting after this many seconds (the migrations "
             "go on; default: no limit)")


def _check_wait_options(parsed_args):
    if parsed_args.interval <= 0:
        raise exceptions.CommandError("--interval must be positive")
    if parsed_args.timeout is not None and parsed_args.timeout <= 0:
        raise exceptions.CommandError("--timeout must be positive")


class _WaitingLister(command.Lister):
    """A Lister that, after printing the migrations it waited for,
    exits 1 with their errors when any failed or was cancelled.
    """

    failed = None

    def _wait(self, client, parsed_args, ids, reused=()):
        waiter = common.Waiter(client, self.app.stderr or sys.stderr,
                               interval=parsed_args.interval,
                               timeout=parsed_args.timeout, reused=reused)
        done = waiter.wait(ids)
        self.failed = common.failures(done)
        return done

    def run(self, parsed_args):
        status = super().run(parsed_args)
        if self.failed is not None:
            raise self.failed
        return status


class Migrate(_WaitingLister):
    """Migrate images to a peer cloud through the DTNs.

    Give images by id or name, or select them with --tag and/or
    --property.  With --wait, draw each migration's progress per stage
    (bytes, rate, ETA) and exit 1 with the error when any fails.

    An image the project already migrated to the peer gets that
    migration (Reused: True, and a line on stderr) when it runs with the
    same options, or completed with the copy asked for (the same
    --keep-id, --visibility and --target-project); other options make a
    new migration, or are refused while one runs.
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument(
            "images", metavar="<image>", nargs="*",
            help="Image to migrate (name or ID; repeat for several)")
        parser.add_argument(
            "--peer", metavar="<peer>", required=True,
            help="Peer DTN (cloud) to migrate to (required)")
        parser.add_argument(
            "--tag", metavar="<tag>",
            help="Migrate the images that carry this tag")
        parser.add_argument(
            "--property", metavar="<key=value>", dest="properties",
            action=parseractions.KeyValueAction,
            help="Migrate the images with this property (repeat for "
                 "several; with --tag, images must match all)")
        parser.add_argument(
            "--keep-id", action="store_true", default=None,
            help="Give each image the same ID in the peer cloud")
        parser.add_argument(
            "--visibility", metavar="<visibility>",
            choices=states.VISIBILITIES,
            help="Visibility of the imported images (%s; default: the "
                 "source image's); the peer decides which it allows" %
                 ", ".join(states.VISIBILITIES))
        parser.add_argument(
            "--target-project", metavar="<project-id>",
            help="Project of the peer cloud to import into (an ID there; "
                 "the peer decides which it allows)")
        parser.add_argument(
            "--mode", metavar="<mode>", choices=states.MODES,
            help="pipelined (export, transfer and import overlap) or "
                 "serial (default: the engine's [engine] mode)")
        parser.add_argument(
            "--force", action="store_true", default=None,
            help="Migrate again an image the peer already holds a "
                 "verified copy of (refused while a migration of the "
                 "image to the peer runs)")
        parser.add_argument(
            "--no-verify", dest="verify", action="store_false",
            default=None,
            help="Do not compare the peer's image metadata with the "
                 "source's (the hash is always checked)")
        parser.add_argument(
            "--request-id", metavar="<request-id>",
            help="ID of this request (a UUID), so that sending it again "
                 "is safe: the same ID answers with the same migrations")
        parser.add_argument(
            "--wait", action="store_true",
            help="Wait for the migrations to finish, drawing progress")
        _add_wait_options(parser)
        return parser

    def take_action(self, parsed_args):
        _check_wait_options(parsed_args)
        if parsed_args.images and (parsed_args.tag or
                                   parsed_args.properties):
            raise exceptions.CommandError(
                "Give images, or select them with --tag/--property; not "
                "both")
        if not (parsed_args.images or parsed_args.tag or
                parsed_args.properties):
            raise exceptions.CommandError(
                "Give the images to migrate, or select them with --tag "
                "and/or --property")
        common.check_uuid(parsed_args.request_id, "--request-id")
        client = self.app.client_manager.dtn
        images = None
        if parsed_args.images:
            image_client = getattr(self.app.client_manager, "image", None)
            images = []
            for value in parsed_args.images:
                image_id = common.image_id(image_client, value)
                if image_id not in images:
                    images.append(image_id)
        options = {}
        for key in ("keep_id", "visibility", "target_project", "mode",
                    "force", "verify"):
            value = getattr(parsed_args, key)
            if value is not None:
                options[key] = value
        result = common.call(
            client.migrations.create, parsed_args.peer, images=images,
            tag=parsed_args.tag, properties=parsed_args.properties,
            options=options, request_id=parsed_args.request_id)
        migrations = result.get("migrations") or []
        LOG.debug("Request %s to %s: migrations %s", result.get(
            "request_id"), parsed_args.peer, [m["id"] for m in migrations])
        reused = {m["id"] for m in migrations if m.get("reused")}
        stderr = self.app.stderr or sys.stderr
        for migration in migrations:
            if migration["id"] in reused:
                stderr.write(reused_line(migration) + "\n")
        if parsed_args.wait and migrations:
            migrations = self._wait(client, parsed_args,
                                    [m["id"] for m in migrations], reused)
        return _rows([dict(m, reused=m["id"] in reused) for m in migrations],
                     MIGRATE_COLUMNS)


class WaitMigration(_WaitingLister):
    """Wait for migrations to finish, drawing their progress.

    Exits 1 with the errors when any fails or is cancelled; Ctrl-C stops
    waiting without cancelling anything.
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument(
            "migrations", metavar="<migration>", nargs="+",
            help="Migration ID (repeat for several)")
        _add_wait_options(parser)
        return parser

    def take_action(self, parsed_args):
        _check_wait_options(parsed_args)
        client = self.app.client_manager.dtn
        ids = list(dict.fromkeys(parsed_args.migrations))
        return _rows(self._wait(client, parsed_args, ids), RESULT_COLUMNS)


class ListMigration(command.Lister):
    """List migrations, newest first."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument(
            "--state", metavar="<state>", action="append",
            choices=states.STATES,
            help="Only migrations in this state (%s; repeat for several)"
                 % ", ".join(states.STATES))
        parser.add_argument(
            "--image", metavar="<image>",
            help="Only migrations of this image (name or ID)")
        parser.add_argument(
            "--peer", metavar="<peer>",
            help="Only migrations to or from this peer")
        parser.add_argument(
            "--direction", metavar="<direction>",
            choices=states.DIRECTIONS,
            help="outgoing (to a peer) or incoming (from one)")
        parser.add_argument(
            "--request-id", metavar="<request-id>",
            help="Only migrations of this request")
        parser.add_argument(
            "--changes-since", metavar="<time>",
            help="Only migrations updated at or after this ISO 8601 time")
        parser.add_argument(
            "--limit", metavar="<n>",
            help="Show at most this many migrations (default: all)")
        parser.add_argument(
            "--marker", metavar="<migration>",
            help="Start after this migration (the last one of a previous "
                 "page)")
        parser.add_argument(
            "--sort-key", metavar="<key>",
            choices=client_migrations.SORT_KEYS,
            help="Sort by this field (%s; default created_at)"
                 % ", ".join(client_migrations.SORT_KEYS))
        parser.add_argument(
            "--sort-dir", metavar="<dir>",
            choices=client_migrations.SORT_DIRS,
            help="asc or desc (default desc)")
        parser.add_argument(
            "--all-projects", action="store_true",
            help="Migrations of every project (admin only)")
        parser.add_argument(
            "--long", action="store_true",
            help="Show more columns: bytes per stage, rate, ETA, error...")
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.dtn
        limit = None
        if parsed_args.limit is not None:
            limit = common.check_limit(parsed_args.limit)
        if parsed_args.changes_since is not None:
            common.check_time(parsed_args.changes_since, "--changes-since")
        common.check_uuid(parsed_args.request_id, "--request-id")
        image_id = None
        if parsed_args.image:
            image_id = common.image_id(
                getattr(self.app.client_manager, "image", None),
                parsed_args.image)
        migrations = common.call(
            client.migrations.list, state=parsed_args.state,
            image_id=image_id, peer=parsed_args.peer,
            direction=parsed_args.direction,
            request_id=parsed_args.request_id,
            changes_since=parsed_args.changes_since,
            marker=parsed_args.marker, limit=limit,
            sort_key=parsed_args.sort_key, sort_dir=parsed_args.sort_dir,
            all_projects=parsed_args.all_projects)
        columns = COLUMNS + (LONG_COLUMNS if parsed_args.long else ())
        return _rows(migrations, columns)


class _OneMigration(command.ShowOne):
    """A command on one migration, by ID, that shows its record."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("migration", metavar="<migration>",
                            help="Migration ID")
        return parser

    def call(self, migrations, migration_id):
        raise NotImplementedError

    def take_action(self, parsed_args):
        client = self.app.client_manager.dtn
        return _show(common.call(self.call, client.migrations,
                                 parsed_args.migration))


class ShowMigration(_OneMigration):
    """Show a migration: stage bytes, rate, ETA and its event timeline."""

    def call(self, migrations, migration_id):
        return migrations.get(migration_id)


class CancelMigration(_OneMigration):
    """Cancel a queued or running migration."""

    def call(self, migrations, migration_id):
        return migrations.cancel(migration_id)


class RetryMigration(_OneMigration):
    """Try a failed or cancelled outgoing migration again, resuming what
    was already done.
    """

    def call(self, migrations, migration_id):
        return migrations.retry(migration_id)
