"""Console entry point: dtn-migrate-manage (operator and runbook tool).

    dtn-migrate-manage transfer start --host SRC --peer DST PATH...
    dtn-migrate-manage transfer show|wait|cancel|resume --host SRC ID
    dtn-migrate-manage transfer list --host SRC
    dtn-migrate-manage transfer incoming --host DST [ID]

Every command talks to the agent on DTN ``--host`` over the message bus
of the configuration given with --config-file.  Results are JSON on
stdout; ``wait`` draws a progress bar on stderr and exits 0 when the
transfer completes, 1 when it fails and 3 when it was cancelled.
"""

import json
import sys
import time

from oslo_config import cfg
import oslo_messaging as messaging

from dtn_migrate.agent import rpcapi
from dtn_migrate import config
from dtn_migrate import exception
from dtn_migrate import rpc
from dtn_migrate.transfer import cli as transfer_cli

CONF = config.CONF
EXIT = {"complete": 0, "failed": 1, "cancelled": 3}


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


def add_command_parsers(subparsers):
    parser = subparsers.add_parser("transfer", help=TransferCommands.__doc__)
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
