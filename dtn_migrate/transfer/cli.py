"""``dtn-migrate-transfer``: run a sink or a source without the agent.

For runbooks, the demo and the benchmarks: it needs no message bus and
imports nothing from OpenStack, so it starts in a fraction of a second.

    dtn-migrate-transfer serve --root DIR --listen HOST:PORT --key-file K
    dtn-migrate-transfer send --peer HOST:PORT --key-file K \\
        --state-dir DIR [--transfer-id ID] FILE...

``send`` resumes a transfer whose ``--transfer-id`` already has state in
``--state-dir``; rerunning the same command after a crash is enough.
Exit status: 0 complete, 1 failed, 3 cancelled, 2 bad usage.
"""

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
import uuid

from dtn_migrate.common import units
from dtn_migrate.transfer import config
from dtn_migrate.transfer import dataset
from dtn_migrate.transfer import errors
from dtn_migrate.transfer import paths
from dtn_migrate.transfer.wire import auth


def size(text):
    """'4M' -> 4194304 (binary units, optional trailing 'iB' or 'B')."""
    try:
        return units.size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc))


def host_port(text):
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError("expected HOST:PORT, got %r" % text)
    return host.strip("[]") or "0.0.0.0", int(port)


def progress_line(s, width=30):
    frac = s["bytes_done"] / s["bytes_total"] if s["bytes_total"] else 1.0
    filled = int(frac * width)
    eta = s.get("eta")
    eta_text = "--:--" if eta is None else units.duration(eta)
    return "[%s%s] %5.1f%% %s/%s %s ETA %s" % (
        "#" * filled, "." * (width - filled), 100 * frac,
        units.human(s["bytes_done"]), units.human(s["bytes_total"]),
        units.rate(s["rate"]), eta_text)


def _tuning(parser):
    g = parser.add_argument_group("tuning")
    d = config.TransferConfig()
    g.add_argument("--object-size", type=size, default=d.object_size)
    g.add_argument("--no-direct-io", dest="direct_io", action="store_false",
                   default=None,
                   help="read and write every object through the page "
                        "cache (no O_DIRECT)")
    g.add_argument("--streams", type=int, default=d.streams)
    g.add_argument("--io-threads", type=int, default=d.io_threads)
    g.add_argument("--buffer-pool", type=size, default=d.buffer_pool_bytes)
    g.add_argument("--window", type=size, default=d.window_bytes,
                   help="bytes sent but not yet durable at the sink")
    g.add_argument("--sync-bytes", type=size, default=d.sync_bytes)
    g.add_argument("--sync-interval", type=float, default=d.sync_interval)
    g.add_argument("--socket-buffer", type=size,
                   default=d.socket_buffer_bytes)
    g.add_argument("--transport", choices=config.TRANSPORTS,
                   default=d.transport)
    g.add_argument("--tcp-user-timeout", type=float,
                   default=d.tcp_user_timeout)
    g.add_argument("--no-frame-auth", dest="frame_auth",
                   action="store_false", default=None,
                   help="source: do not tag frames; sink: accept sources "
                        "that do not (trusted links only)")
    g.add_argument("--compression", choices=config.COMPRESSIONS,
                   default=None,
                   help="source: zstd per object (default %s)"
                        % d.compression)
    g.add_argument("--compression-level", type=int, default=None)
    g.add_argument("--no-zero-extents", dest="zero_extents",
                   action="store_false", default=None,
                   help="send all-zero objects as bytes")
    g.add_argument("--rdma-device",
                   help="RDMA device (default: the first usable one)")
    g.add_argument("--rdma-port", type=int, default=1)
    g.add_argument("--rdma-gid-index", type=int,
                   help="GID index (default: the first RoCE v2 GID, as "
                        "the agent picks)")
    g.add_argument("-v", "--verbose", action="count", default=0)


def _config(args):
    fields = dict(
        object_size=args.object_size, streams=args.streams,
        io_threads=args.io_threads, buffer_pool_bytes=args.buffer_pool,
        window_bytes=args.window, sync_bytes=args.sync_bytes,
        sync_interval=args.sync_interval,
        socket_buffer_bytes=args.socket_buffer, transport=args.transport,
        tcp_user_timeout=args.tcp_user_timeout)
    for name in ("logger", "log_method", "rate_limit", "reconnect_deadline",
                 "preallocate", "direct_io", "verify_sha512", "min_free_bytes",
                 "frame_auth", "compression", "compression_level",
                 "zero_extents"):
        if getattr(args, name, None) is not None:
            fields[name] = getattr(args, name)
    return config.TransferConfig(**fields)


def _rdma(cfg, args):
    if cfg.transport == "tcp":
        return None
    from dtn_migrate.transfer.transport import rdma
    # The agent's defaults ([rdma] gid_index unset: a RoCE v2 GID), so
    # that both ends of a transfer route alike.
    dev, reason = rdma.probe(getattr(args, "rdma_device", None),
                             getattr(args, "rdma_port", 1),
                             getattr(args, "rdma_gid_index", None))
    if dev is None:
        logging.getLogger(__name__).info("RDMA not used: %s", reason)
    return dev


def cmd_serve(args):
    from dtn_migrate.transfer.sink import server as sink
    cfg = _config(args)
    key = auth.load_key(path=args.key_file)
    tls = None
    if args.tls_cert:
        tls = auth.server_context(args.tls_cert, args.tls_key, args.tls_ca)
    host, port = args.listen
    server = sink.SinkServer(paths.StagingRoot(args.root), cfg, args.name,
                             lambda peer: key, host=host, port=port,
                             tls_context=tls, rdma_device=_rdma(cfg, args))
    server.start()
    print("listening on %s:%d" % (host, server.port), flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *a: stop.set())
    stop.wait()
    server.stop()
    return 0


def cmd_send(args):
    from dtn_migrate.transfer.source import transfer as source
    cfg = _config(args)
    key = auth.load_key(path=args.key_file)
    host, port = args.peer
    tls = None
    if args.tls_ca:
        tls = auth.client_context(args.tls_ca, args.tls_cert, args.tls_key)
    peer = source.Peer(args.peer_name or "sink", host, port, key, tls,
                       args.server_name)
    tid = args.transfer_id or uuid.uuid4().hex
    tid = uuid.UUID(tid).hex
    tdir = os.path.join(args.state_dir, tid)
    if os.path.exists(os.path.join(tdir, "manifest.json")):
        manifest = dataset.Manifest.load(tdir)
    else:
        if not args.files:
            raise SystemExit("no files given and no saved transfer %s" % tid)
        hashes = {}
        if args.manifest:
            with open(args.manifest) as f:
                hashes = {e["name"]: e.get("sha512")
                          for e in json.load(f)["files"]}
        root = args.root or os.getcwd()
        specs = dataset.expand(root, args.files, hashes)
        manifest = dataset.Manifest.new(peer.name, specs,
                                        {"object_size": cfg.object_size},
                                        transfer_id=tid)
    transfer = source.SourceTransfer(manifest, peer, cfg, args.state_dir,
                                     args.name, rdma_device=_rdma(cfg, args))
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *a: transfer.cancel())
    runner = threading.Thread(target=transfer.run, daemon=True)
    started = time.monotonic()
    runner.start()
    while runner.is_alive():
        runner.join(0.5)
        if args.progress:
            snap = transfer.progress.snapshot()
            sys.stderr.write("\r" + progress_line(snap))
            sys.stderr.flush()
    status = transfer.status()
    transfer.close()
    if args.progress:
        sys.stderr.write("\r" + progress_line(status) + "\n")
    status["seconds"] = round(time.monotonic() - started, 3)
    status["bytes"] = status["bytes_total"]
    if args.json:
        print(json.dumps(status), flush=True)
    elif status["state"] != "complete":
        print("transfer %s %s: %s" % (tid, status["state"], status["error"]),
              file=sys.stderr)
    return {"complete": 0, "cancelled": 3}.get(status["state"], 1)


def parser():
    p = argparse.ArgumentParser(prog="dtn-migrate-transfer",
                                description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", help="receive transfers into a directory")
    s.add_argument("--root", required=True, help="staging root")
    s.add_argument("--listen", type=host_port, default=("0.0.0.0", 47100))
    s.add_argument("--key-file", required=True)
    s.add_argument("--name", default="sink")
    s.add_argument("--tls-cert")
    s.add_argument("--tls-key")
    s.add_argument("--tls-ca", help="require client certificates from it")
    s.add_argument("--no-preallocate", dest="preallocate",
                   action="store_false", default=None)
    s.add_argument("--min-free", dest="min_free_bytes", type=size)
    _tuning(s)
    s.set_defaults(func=cmd_serve)

    c = sub.add_parser("send", help="send files to a sink")
    c.add_argument("files", nargs="*", metavar="FILE")
    c.add_argument("--peer", type=host_port, required=True)
    c.add_argument("--peer-name",
                   help="the sink's name (its serve --name; default "
                   "sink): a sink of another name refuses the connection")
    c.add_argument("--key-file", required=True)
    c.add_argument("--name", default="source",
                   help="this source's name, as the sink knows it")
    c.add_argument("--state-dir", required=True,
                   help="where the manifest and object log live")
    c.add_argument("--root", help="files are named relative to this "
                   "(default: the current directory)")
    c.add_argument("--transfer-id", help="resume or create this transfer")
    c.add_argument("--manifest", help="JSON with known sha512 per name")
    c.add_argument("--logger", choices=config.LOGGERS)
    c.add_argument("--log-method", choices=config.LOG_METHODS)
    c.add_argument("--no-verify", dest="verify_sha512",
                   action="store_false", default=None,
                   help="skip the whole-file sha512 (objects keep xxh3)")
    c.add_argument("--rate-limit", type=size, help="bytes per second")
    c.add_argument("--reconnect-deadline", type=float)
    c.add_argument("--tls-ca")
    c.add_argument("--tls-cert")
    c.add_argument("--tls-key")
    c.add_argument("--server-name")
    c.add_argument("--progress", action="store_true")
    c.add_argument("--json", action="store_true")
    _tuning(c)
    c.set_defaults(func=cmd_send)
    return p


def main(argv=None):
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=[logging.WARNING, logging.INFO, logging.DEBUG][
            min(args.verbose, 2)],
        format="%(asctime)s %(process)d %(levelname)s %(name)s: "
               "%(message)s")
    try:
        return args.func(args)
    except (errors.TransferError, ValueError, OSError) as exc:
        print("dtn-migrate-transfer: %s" % exc, file=sys.stderr)
        return 1
