"""Console entry point: dtn-migrate-manage (operator and runbook tool).

    dtn-migrate-manage transfer start --host SRC --peer DST PATH...
    dtn-migrate-manage transfer show|wait|cancel|resume --host SRC ID
    dtn-migrate-manage transfer list --host SRC
    dtn-migrate-manage transfer incoming --host DST [ID]
    dtn-migrate-manage nfs advise --link 10gbit [--rtt MS] [--server DTN]
        [--export DIR] [--client HOST] [--mount-point DIR] [--json]
    dtn-migrate-manage nfs check [PATH] [--mountinfo FILE]
    dtn-migrate-manage migrate --peer PEER (--image ID [ID...] | --tag TAG
        | --property KEY=VALUE...) [--keep-id] [--visibility V]
        [--target-project P] [--no-verify] [--mode pipelined|serial]
        [--force] [--transfer-option KEY=JSON...] [--request-id UUID]
        [--no-wait] [--timeout SECONDS]
    dtn-migrate-manage migration list [--request-id ID] [--direction D]
        [--state S...]
    dtn-migrate-manage migration show|cancel|retry ID
    dtn-migrate-manage migration wait (ID | --request-id ID) [--timeout S]
    dtn-migrate-manage db sync [--revision REV] | db version

Every ``transfer`` command talks to the agent on DTN ``--host`` over the
message bus of the configuration given with --config-file.  Results are
JSON on stdout; ``wait`` draws a progress bar on stderr and exits 0 when
the transfer completes, 1 when it fails and 3 when it was cancelled.

The ``nfs`` commands need no bus.  ``advise`` prints the client mount
and the DTN export settings for a link; ``check`` prints the staging
mount (default ``[staging] path``) as JSON and exits 0 when it follows
the ``[staging]`` profile, 1 when it deviates and 3 when the path is not
on NFS at all.

``db sync`` creates or upgrades the tables of ``[database] connection``
(migration records, their events); ``db version`` prints its revision.

``migrate`` and ``migration`` talk to the migration engine of the cloud
whose bus is in --config-file.  ``migrate`` prints the request (JSON),
then, unless --no-wait, draws one progress line per migration on stderr
and prints the final records (JSON).  ``migrate`` and ``migration wait``
exit 0 when every migration completes, 1 when one failed, 3 when one was
cancelled (none failed) and 4 on --timeout (the migrations go on).  An
error from the engine, or no answer from it, exits 2.
"""

import argparse
import contextlib
import dataclasses
import functools
import json
import signal
import socket
import sys
import threading
import time
import urllib.parse
import uuid

from oslo_config import cfg
import oslo_messaging as messaging

from dtn_migrate.agent import rpcapi
from dtn_migrate.cmd import _errors
from dtn_migrate.client import progress as client_progress
from dtn_migrate import config
from dtn_migrate import context
from dtn_migrate.common import states
from dtn_migrate.db import migration as db_migration
from dtn_migrate.engine import rpcapi as engine_rpcapi
from dtn_migrate import exception
from dtn_migrate import rpc
from dtn_migrate.staging import backend as staging_backend
from dtn_migrate.staging import factory
from dtn_migrate.staging import nfsmount
from dtn_migrate.transfer import cli as transfer_cli
from dtn_migrate.common import polling

CONF = config.CONF
EXIT = {"complete": 0, "failed": 1, "cancelled": 3}
NFS_EXIT = {"ok": 0, "deviations": 1, "not_nfs": 3}
ERROR_EXIT = 2
TIMEOUT_EXIT = 4
POLL_INTERVAL = 1.0
#: Seconds an RPC call may take beyond its timeout before it is given up.
BUS_GRACE = 10
NO_BUS = ("cannot reach the message bus within %g s (is the broker of "
          "transport_url running and reachable?)")
NO_ANSWER = ("the migration engine did not answer within %g s (is "
             "dtn-migrate-engine running on this cloud's message bus?)")


def _print(data):
    print(json.dumps(data, indent=1, sort_keys=True))


class BusTimeout(_errors.CommandError):
    """An RPC call outlived its deadline (the broker is unreachable)."""


@contextlib.contextmanager
def _deadline(seconds):
    """Raise BusTimeout in the block after ``seconds``.

    ``retry`` bounds sending only: oslo.messaging connects the reply
    queue of a call again and again while the broker is down.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(signum, frame):
        raise BusTimeout()

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class _Bounded:
    """An RPC API whose every call ends within its timeout + BUS_GRACE."""

    def __init__(self, api, timeout):
        self._api = api
        self._seconds = timeout + BUS_GRACE

    def __getattr__(self, name):
        method = getattr(self._api, name)

        @functools.wraps(method)
        def call(*args, **kwargs):
            with _deadline(self._seconds):
                return method(*args, **kwargs)
        return call


def _api():
    return _Bounded(rpcapi.AgentAPI(timeout=CONF.command.timeout, retry=3),
                    CONF.command.timeout)


def _wait(api, host, transfer_id, progress):
    def ended():
        status = api.get_transfer({}, host, transfer_id)
        if progress and "bytes_total" in status:
            sys.stderr.write("\r" + transfer_cli.progress_line(status))
            sys.stderr.flush()
        return status if status.get("state") in EXIT else None

    status = polling.poll(ended, interval=0.5, clock=time.monotonic,
                          sleep=time.sleep)
    if progress:
        sys.stderr.write("\n")
    return status


class TransferCommands:
    """Transfers between DTNs, through the source DTN's agent."""

    def start(self):
        c = CONF.command
        options = {}
        for item in c.option or ():
            key, _, value = item.partition("=")
            options[key] = json.loads(value) if value else True
        api = _api()
        status = api.start_transfer({}, c.dtn, c.peer, list(c.paths),
                                    options or None, c.transfer_id)
        if c.wait:
            status = _wait(api, c.dtn, status["transfer_id"], c.progress)
        _print(status)
        return EXIT.get(status.get("state"), 0) if c.wait else 0

    def show(self):
        _print(_api().get_transfer({}, CONF.command.dtn,
                                   CONF.command.transfer_id))

    def wait(self):
        status = _wait(_api(), CONF.command.dtn, CONF.command.transfer_id,
                       CONF.command.progress)
        _print(status)
        return EXIT[status["state"]]

    def list(self):
        _print(_api().list_transfers({}, CONF.command.dtn))

    def cancel(self):
        _print(_api().cancel_transfer({}, CONF.command.dtn,
                                      CONF.command.transfer_id))

    def resume(self):
        _print(_api().resume_transfer({}, CONF.command.dtn,
                                      CONF.command.transfer_id))

    def incoming(self):
        _print(_api().get_incoming({}, CONF.command.dtn,
                                   CONF.command.transfer_id))


class NfsCommands:
    """The NFS mount between cloud controller and DTN (no bus needed)."""

    def advise(self):
        c = CONF.command
        server, export = _staging_url()
        try:
            advice = nfsmount.advise(
                c.link, rtt=c.rtt / 1000.0,
                server=c.server or server or "dtn",
                export=c.export or export or "/export/staging",
                client=c.client,
                mount_point=c.mount_point or CONF.staging.path,
                version=c.nfs_version, proto=c.proto,
                server_sync=c.server_sync)
        except ValueError as exc:
            print("error: %s" % exc, file=sys.stderr)
            return 2
        if c.json:
            _print(advice.to_dict())
        else:
            sys.stdout.write(advice.render())
        return 0

    def check(self):
        c = CONF.command
        path = c.path or CONF.staging.path
        result = {"path": path, "mount": None, "deviations": [],
                  "notes": []}
        try:
            mount = nfsmount.inspect(path, c.mountinfo)
        except staging_backend.BadMount as exc:
            result.update(status="not_nfs", error=str(exc))
            if CONF.staging.allow_local:
                result["notes"].append(
                    "[staging] allow_local is set: staging would accept "
                    "this path")
            _print(result)
            return NFS_EXIT["not_nfs"]
        profile = factory.profile(CONF.staging)
        deviations = nfsmount.check(mount, profile)
        result.update(mount=mount.to_dict(), deviations=deviations,
                      profile=dataclasses.asdict(profile),
                      status="deviations" if deviations else "ok")
        result["notes"].append(
            "the DTN's export mode (knfsd sync/async, ganesha NFS_Commit) "
            "is not visible from the client")
        if deviations and CONF.staging.mount_check != "refuse":
            result["notes"].append(
                "[staging] mount_check=%s: staging would %s"
                % (CONF.staging.mount_check,
                   "warn and proceed" if CONF.staging.mount_check == "warn"
                   else "proceed"))
        _print(result)
        return NFS_EXIT[result["status"]]


def _message(exc):
    """One line for ``exc`` (a remote exception's str() ends with the
    engine's traceback; its ``message`` does not).
    """
    return client_progress.first_line(
        getattr(exc, "message", None) or exc) or type(exc).__name__


def _error(text):
    print("error: %s" % text, file=sys.stderr)
    return ERROR_EXIT


def _silence(exc):
    """Why an engine call ended in ``exc``, a MessagingTimeout (no
    answer) or a BusTimeout (no bus).
    """
    if isinstance(exc, BusTimeout):
        return NO_BUS % (CONF.command.rpc_timeout + BUS_GRACE)
    return NO_ANSWER % CONF.command.rpc_timeout


def _engine_errors(func):
    """Report an engine error, or its silence, on one line; exit 2."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except exception.DtnMigrateException as exc:
            return _error(_message(exc))
        except (messaging.MessagingTimeout, BusTimeout) as exc:
            return _error(_silence(exc))
        except messaging.RemoteError as exc:
            return _error("the migration engine failed: %s: %s"
                          % (exc.exc_type,
                             client_progress.first_line(exc.value)))
        except messaging.MessagingException as exc:
            return _error("message bus: %s" % _message(exc))
        except KeyboardInterrupt:
            print("\ninterrupted: the migrations go on", file=sys.stderr)
            return 130
    return wrapper


#: Who the engine logs as the caller of the bus-only commands.
SERVICE = "dtn-migrate-manage"


def _ctxt():
    """The context of a bus-only command's request to the engine: an
    administrator's, naming this tool (an empty one is refused).
    """
    return context.get_service_context(SERVICE).to_dict()


def _engine_api():
    timeout = CONF.command.rpc_timeout
    return _Bounded(engine_rpcapi.EngineAPI(timeout=timeout, retry=3),
                    timeout)


def _follow(api, records, request_id=None, timeout=None):
    """Poll the migrations of ``records`` until all are final or
    ``timeout`` seconds pass; returns (latest records, timed out).
    """
    ids = [r["migration_id"] for r in records]
    reused = {r["migration_id"] for r in records if r.get("reused")}
    current = {r["migration_id"]: r for r in records}
    progress = client_progress.Progress(sys.stderr)
    pending = []

    def settled():
        if pending:
            listed = {}
            if request_id:
                # Reused migrations belong to an earlier request: asked
                # alone.
                listed = {r["migration_id"]: r for r in api.list_migrations(
                    _ctxt(), request_id=request_id)}
            for i in pending:
                record = listed.get(i) or api.get_migration(_ctxt(), i)
                current[i] = dict(record, reused=True) if i in reused \
                    else record
        progress.draw([current[i] for i in ids])
        pending[:] = [i for i in ids if current[i].get("state")
                      not in states.FINAL_STATES]
        return not pending

    done = polling.poll(settled, timeout, POLL_INTERVAL,
                        clock=time.monotonic, sleep=time.sleep)
    return [current[i] for i in ids], not done


def _exit_code(records):
    states = {r.get("state") for r in records}
    if "failed" in states:
        return EXIT["failed"]
    if "cancelled" in states:
        return EXIT["cancelled"]
    return EXIT["complete"]


def _wait_and_print(api, records, request_id, timeout, again):
    """Follow, print the final records and return the exit code;
    ``again`` is the command that follows them further.
    """
    final, timed_out = _follow(api, records, request_id, timeout)
    _print(final if request_id else final[0])
    if timed_out:
        left = [r for r in final
                if r.get("state") not in states.FINAL_STATES]
        print("timeout: %d of %d migrations unfinished after %g s; they "
              "go on (dtn-migrate-manage %s)"
              % (len(left), len(final), timeout, again), file=sys.stderr)
        return TIMEOUT_EXIT
    return _exit_code(final)


class MigrationCommands:
    """Image migrations, through this cloud's migration engine."""

    @_engine_errors
    def migrate(self):
        c = CONF.command
        if c.images and (c.tag or c.properties):
            return _error("give --image, or --tag and/or --property, not "
                          "both")
        if not (c.images or c.tag or c.properties):
            return _error("give --image, --tag or --property")
        options = {k: getattr(c, k) for k in (
            "keep_id", "visibility", "target_project", "verify", "mode",
            "force") if getattr(c, k) is not None}
        if c.transfer_options:
            options["transfer_options"] = c.transfer_options
        selector = None
        if not c.images:
            selector = {k: v for k, v in (("tag", c.tag),
                                          ("properties", c.properties)) if v}
        # Chosen here, so that a request lost in a timeout can be named.
        request_id = c.request_id or uuid.uuid4().hex
        api = _engine_api()
        try:
            request = api.migrate(_ctxt(), c.peer, images=c.images or None,
                                  selector=selector,
                                  options=options or None,
                                  request_id=request_id)
        except (messaging.MessagingTimeout, BusTimeout) as exc:
            return _error(
                _silence(exc) + "; if the engine got the request, "
                "'dtn-migrate-manage migration list --request-id %s' shows "
                "it, and rerunning with --request-id %s is safe"
                % (request_id, request_id))
        _print(request)
        sys.stdout.flush()
        if c.no_wait:
            return 0
        return _wait_and_print(
            api, request["migrations"], request["request_id"], c.timeout,
            "migration wait --request-id %s" % request["request_id"])

    @_engine_errors
    def list(self):
        c = CONF.command
        kwargs = {}
        if c.states:
            kwargs["filters"] = {"state": c.states}
        _print(_engine_api().list_migrations(
            _ctxt(), request_id=c.request_id, direction=c.direction,
            **kwargs))

    @_engine_errors
    def show(self):
        _print(_engine_api().get_migration(_ctxt(),
                                           CONF.command.migration_id))

    @_engine_errors
    def wait(self):
        c = CONF.command
        if bool(c.migration_id) == bool(c.request_id):
            return _error("give a migration ID or --request-id")
        api = _engine_api()
        if c.request_id:
            records = api.list_migrations(_ctxt(), request_id=c.request_id)
            if not records:
                return _error("request %s has no migrations"
                              % c.request_id)
            again = "migration wait --request-id %s" % c.request_id
            return _wait_and_print(api, records, c.request_id, c.timeout,
                                   again)
        record = api.get_migration(_ctxt(), c.migration_id)
        return _wait_and_print(api, [record], None, c.timeout,
                               "migration wait %s" % c.migration_id)

    @_engine_errors
    def cancel(self):
        _print(_engine_api().cancel_migration(_ctxt(),
                                              CONF.command.migration_id))

    @_engine_errors
    def retry(self):
        _print(_engine_api().retry_migration(_ctxt(),
                                             CONF.command.migration_id))


class DbCommands:
    """The database of migration records ([database] connection)."""

    def sync(self):
        db_migration.db_sync(CONF, CONF.command.revision)
        print("database at revision %s" % db_migration.db_version(CONF))
        return 0

    def version(self):
        print(db_migration.db_version(CONF) or "none (run 'db sync')")
        return 0


def add_db_parsers(subparsers):
    commands = DbCommands()
    parser = subparsers.add_parser("db", help=DbCommands.__doc__)
    actions = parser.add_subparsers(dest="action", required=True)
    p = actions.add_parser("sync", help="create or upgrade the tables")
    p.add_argument("--revision", default="head",
                   help="alembic revision (default: the latest)")
    p.set_defaults(bus=False, func=commands.sync)
    p = actions.add_parser("version", help="the database's revision")
    p.set_defaults(bus=False, func=commands.version)


def _link_rate(text):
    try:
        return nfsmount.parse_rate(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc))


def _rtt_ms(text):
    try:
        value = float(text)
    except ValueError:
        value = -1
    if not 0 < value < 10 ** 5:
        raise argparse.ArgumentTypeError("not a round-trip time in "
                                         "milliseconds: %r" % text)
    return value


def _staging_url():
    """(server, export) of ``[staging] url``, or (None, None)."""
    try:
        url = urllib.parse.urlsplit(CONF.staging.url or "")
        host = url.hostname
    except ValueError:
        return None, None
    if url.scheme != "nfs" or not host:
        return None, None
    return host, url.path or None


def add_nfs_parsers(subparsers):
    parser = subparsers.add_parser("nfs", help=NfsCommands.__doc__)
    parser.set_defaults(bus=False)
    actions = parser.add_subparsers(dest="action", required=True)
    commands = NfsCommands()

    p = actions.add_parser(
        "advise", help="recommended client mount and DTN export settings")
    p.add_argument("--link", type=_link_rate, required=True,
                   help="link rate between controller and DTN: 1gbit, "
                        "10gbit, 400mbit or bits per second")
    p.add_argument("--rtt", type=_rtt_ms, default=1.0,
                   help="round-trip time in milliseconds (default 1)")
    p.add_argument("--server",
                   help="DTN name or address (default: from [staging] "
                        "url, else 'dtn')")
    p.add_argument("--export",
                   help="exported directory on the DTN (default: from "
                        "[staging] url, else /export/staging)")
    p.add_argument("--client", default=socket.gethostname(),
                   help="the controller as the DTN sees it (default: "
                        "this host's name)")
    p.add_argument("--mount-point", dest="mount_point",
                   help="where the controller mounts the export (default: "
                        "[staging] path)")
    p.add_argument("--nfs-version", dest="nfs_version", default="4.2",
                   choices=["3", "4", "4.0", "4.1", "4.2"],
                   help="NFS version to mount (default 4.2)")
    p.add_argument("--proto", default="tcp",
                   choices=list(nfsmount.GOOD_PROTOS),
                   help="transport (default tcp)")
    p.add_argument("--server-sync", dest="server_sync",
                   action="store_true",
                   help="sync export: slower, but knfsd's COMMIT then "
                        "means the bytes are on the DTN's disk")
    p.add_argument("--json", action="store_true",
                   help="print the advice as JSON")
    p.set_defaults(func=commands.advise)

    p = actions.add_parser(
        "check", help="show the staging mount and its deviations from the "
                      "profile (JSON); exit 1 if off profile, 3 if not NFS")
    p.add_argument("path", nargs="?",
                   help="directory to check (default: [staging] path)")
    p.add_argument("--mountinfo", default="/proc/self/mountinfo",
                   help="mount table to read (e.g. /proc/PID/mountinfo "
                        "of a process in another mount namespace)")
    p.set_defaults(func=commands.check)


def _key_value(text):
    key, sep, value = text.partition("=")
    if not sep or not key or not value:
        raise argparse.ArgumentTypeError("expected KEY=VALUE, got %r" % text)
    return key, value


def _key_json(text):
    """KEY=JSON; a value that is not JSON is taken as a string."""
    key, value = _key_value(text)
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


def _uuid(text):
    try:
        return uuid.UUID(text).hex
    except ValueError:
        raise argparse.ArgumentTypeError("not a UUID: %r" % text)


def _seconds(text):
    try:
        value = float(text)
    except ValueError:
        value = -1
    if value <= 0:
        raise argparse.ArgumentTypeError("not a number of seconds: %r"
                                         % text)
    return value


class _Mapping(argparse.Action):
    """Repeatable KEY=VALUE into a dict; a key given twice is refused."""

    def __call__(self, parser, namespace, values, option_string=None):
        key, value = values
        mapping = dict(getattr(namespace, self.dest, None) or {})
        if key in mapping:
            parser.error("%s %s given twice" % (option_string, key))
        mapping[key] = value
        setattr(namespace, self.dest, mapping)


def add_migration_parsers(subparsers):
    commands = MigrationCommands()

    def common(p, func, timeout=False):
        p.add_argument("--rpc-timeout", dest="rpc_timeout", type=_seconds,
                       default=60, metavar="SECONDS",
                       help="seconds to wait for each answer of the engine "
                            "(default 60)")
        if timeout:
            p.add_argument("--timeout", type=_seconds, metavar="SECONDS",
                           help="stop following after SECONDS and exit 4 "
                                "(the migrations go on)")
        p.set_defaults(bus=True, func=func)

    p = subparsers.add_parser(
        "migrate", help="migrate images to a peer cloud through this "
                        "cloud's migration engine")
    p.add_argument("--peer", required=True,
                   help="the peer cloud's DTN, as this cloud's DTN knows it")
    g = p.add_argument_group("images: --image, or --tag and/or --property")
    g.add_argument("--image", dest="images", action="extend", nargs="+",
                   metavar="ID", help="image id (repeatable)")
    g.add_argument("--tag", help="the active images with this tag")
    g.add_argument("--property", dest="properties", action=_Mapping,
                   type=_key_value, metavar="KEY=VALUE",
                   help="the active images with this property value "
                        "(repeatable: all must match)")
    g = p.add_argument_group("migration options (default: the engine's)")
    g.add_argument("--keep-id", dest="keep_id", action="store_true",
                   default=None,
                   help="give the peer's image the same id")
    g.add_argument("--visibility", choices=states.VISIBILITIES,
                   help="visibility of the peer's image (default: the "
                        "source image's)")
    g.add_argument("--target-project", dest="target_project",
                   metavar="PROJECT",
                   help="project owning the peer's image")
    g.add_argument("--no-verify", dest="verify", action="store_false",
                   default=None,
                   help="do not compare the peer's image metadata with "
                        "the source's (the hash is always checked)")
    g.add_argument("--mode", choices=states.MODES,
                   help="pipelined: export, transfer and import overlap; "
                        "serial: one after the other ([engine] mode)")
    g.add_argument("--force", action="store_true", default=None,
                   help="migrate again an image already migrated "
                        "unchanged")
    g.add_argument("--transfer-option", dest="transfer_options",
                   action=_Mapping, type=_key_json, metavar="KEY=JSON",
                   help="DTN transfer option, e.g. streams=8 (repeatable)")
    p.add_argument("--request-id", dest="request_id", type=_uuid,
                   metavar="UUID",
                   help="idempotency key (default: a new one)")
    p.add_argument("--no-wait", dest="no_wait", action="store_true",
                   help="print the request and exit")
    common(p, commands.migrate, timeout=True)

    parser = subparsers.add_parser("migration",
                                   help=MigrationCommands.__doc__)
    actions = parser.add_subparsers(dest="action", required=True)
    p = actions.add_parser("list", help="migrations of this cloud")
    common(p, commands.list)
    p.add_argument("--request-id", dest="request_id", type=_uuid,
                   metavar="UUID")
    p.add_argument("--direction", choices=["outgoing", "incoming"])
    p.add_argument("--state", dest="states", action="append",
                   choices=states.ACTIVE_STATES +
                   states.FINAL_STATES,
                   help="only migrations in this state (repeatable)")
    for name, help_ in (("show", "a migration, with its events"),
                        ("cancel", "cancel a migration"),
                        ("retry", "run a failed or cancelled outgoing "
                                  "migration again, resuming its data")):
        p = actions.add_parser(name, help=help_)
        common(p, getattr(commands, name))
        p.add_argument("migration_id", metavar="ID")
    p = actions.add_parser(
        "wait", help="follow a migration, or a request's, until final")
    common(p, commands.wait, timeout=True)
    p.add_argument("migration_id", metavar="ID", nargs="?")
    p.add_argument("--request-id", dest="request_id", type=_uuid,
                   metavar="UUID", help="every migration of a request")


def add_command_parsers(subparsers):
    add_nfs_parsers(subparsers)
    add_db_parsers(subparsers)
    add_migration_parsers(subparsers)
    parser = subparsers.add_parser("transfer", help=TransferCommands.__doc__)
    parser.set_defaults(bus=True)
    actions = parser.add_subparsers(dest="action", required=True)

    def action(name, help_, transfer_id=True):
        p = actions.add_parser(name, help=help_)
        p.add_argument("--host", dest="dtn", required=True,
                       help="DTN whose agent to ask")
        p.add_argument("--timeout", type=int, default=60,
                       help="RPC timeout in seconds")
        if transfer_id:
            p.add_argument("transfer_id")
        p.set_defaults(func=getattr(TransferCommands(), name))
        return p

    p = action("start", "send files from --host to --peer",
               transfer_id=False)
    p.add_argument("--peer", required=True, help="destination DTN name")
    p.add_argument("--transfer-id", help="idempotency key (UUID)")
    p.add_argument("--option", action="append",
                   help="per-transfer option KEY=JSON, e.g. streams=8")
    p.add_argument("--wait", action="store_true")
    p.add_argument("--progress", action="store_true")
    p.add_argument("paths", nargs="+",
                   help="files or directories under the source staging "
                        "root")
    action("show", "status of a transfer")
    p = action("wait", "wait for a transfer to finish")
    p.add_argument("--progress", action="store_true")
    action("list", "transfers of --host", transfer_id=False)
    action("cancel", "cancel a transfer (it can be resumed)")
    action("resume", "resume a failed or cancelled transfer")
    p = action("incoming", "what --host is receiving", transfer_id=False)
    p.add_argument("transfer_id", nargs="?")


command_opt = cfg.SubCommandOpt("command", title="Commands",
                                handler=add_command_parsers)


def main():
    CONF.register_cli_opt(command_opt)
    config.parse_args(sys.argv, configure_logging=False)
    if CONF.command.bus:
        rpc.init(CONF)
    try:
        rc = CONF.command.func()
    except exception.DtnMigrateException as exc:
        print("error: %s" % _message(exc), file=sys.stderr)
        rc = 1
    except messaging.MessagingTimeout:
        print("error: no answer from the agent on %s within %d s (is it "
              "running and on this message bus?)"
              % (CONF.command.dtn, CONF.command.timeout), file=sys.stderr)
        rc = 1
    except BusTimeout:
        print("error: " + NO_BUS % (CONF.command.timeout + BUS_GRACE),
              file=sys.stderr)
        rc = 1
    finally:
        rpc.cleanup()
    sys.exit(rc or 0)
