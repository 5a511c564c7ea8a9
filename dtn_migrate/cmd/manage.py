"""Console entry point: dtn-migrate-manage (operator and runbook tool).

    dtn-migrate-manage transfer start --host SRC --peer DST PATH...
    dtn-migrate-manage transfer show|wait|cancel|resume --host SRC ID
    dtn-migrate-manage transfer list --host SRC
    dtn-migrate-manage transfer incoming --host DST [ID]
    dtn-migrate-manage nfs advise --link 10gbit [--rtt MS] [--server DTN]
        [--export DIR] [--client HOST] [--mount-point DIR] [--json]
    dtn-migrate-manage nfs check [PATH] [--mountinfo FILE]

Every ``transfer`` command talks to the agent on DTN ``--host`` over the
message bus of the configuration given with --config-file.  Results are
JSON on stdout; ``wait`` draws a progress bar on stderr and exits 0 when
the transfer completes, 1 when it fails and 3 when it was cancelled.

The ``nfs`` commands need no bus.  ``advise`` prints the client mount
and the DTN export settings for a link; ``check`` prints the staging
mount (default ``[staging] path``) as JSON and exits 0 when it follows
the ``[staging]`` profile, 1 when it deviates and 3 when the path is not
on NFS at all.
"""

import argparse
import dataclasses
import json
import socket
import sys
import time
import urllib.parse

from oslo_config import cfg
import oslo_messaging as messaging

from dtn_migrate.agent import rpcapi
from dtn_migrate import config
from dtn_migrate import exception
from dtn_migrate import rpc
from dtn_migrate.staging import backend as staging_backend
from dtn_migrate.staging import factory
from dtn_migrate.staging import nfsmount
from dtn_migrate.transfer import cli as transfer_cli

CONF = config.CONF
EXIT = {"complete": 0, "failed": 1, "cancelled": 3}
NFS_EXIT = {"ok": 0, "deviations": 1, "not_nfs": 3}


def _print(data):
    print(json.dumps(data, indent=1, sort_keys=True))


def _api():
    return rpcapi.AgentAPI(timeout=CONF.command.timeout, retry=3)


def _wait(api, host, transfer_id, progress):
    while True:
        status = api.get_transfer({}, host, transfer_id)
        if progress and "bytes_total" in status:
            sys.stderr.write("\r" + transfer_cli.progress_line(status))
            sys.stderr.flush()
        if status.get("state") in EXIT:
            if progress:
                sys.stderr.write("\n")
            return status
        time.sleep(0.5)


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


def add_command_parsers(subparsers):
    add_nfs_parsers(subparsers)
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
        print("error: %s" % exc, file=sys.stderr)
        rc = 1
    except messaging.MessagingTimeout:
        print("error: no answer from the agent on %s within %d s (is it "
              "running and on this message bus?)"
              % (CONF.command.dtn, CONF.command.timeout), file=sys.stderr)
        rc = 1
    finally:
        rpc.cleanup()
    sys.exit(rc or 0)
