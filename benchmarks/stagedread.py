"""The import's read of a staged file, with and without reused buffers.

Engine B reads the staged (received) file with
:func:`dtn_migrate.staging.stream.open_staged` and sends each block to
Glance B.  This measures that read apart from Glance: one staged file
on ``--dir`` (the local backend, ``O_DIRECT`` where the file system
takes it), read whole by ``open_staged`` as the import does (no sha512
of its own), each block sent over a local socket to a thread that
drains it, as an HTTP upload would.  The process's CPU-s (user +
system, all threads) per GiB, interleaved over ``--reps``:

``copied``
    ``reuse_buffers=False``: each block read into the reader's aligned
    scratch buffer, then copied into a new bytes object.
``reused``
    ``reuse_buffers=True`` (what the import uses): each block read in
    place into one of ``queue_depth + 1`` pooled buffers and sent from
    there.

    .venv/bin/python -m benchmarks.stagedread --size 2G --reps 5 \\
        --out doc/source/benchmarks/stagedread
"""

import argparse
import os
import shutil
import socket
import tempfile
import threading
import time

from benchmarks import report
from dtn_migrate.staging import localfs
from dtn_migrate.staging import stream as staging_stream

GiB = 1 << 30
MiB = 1 << 20
CASES = ("copied", "reused")


def _size(text):
    units = {"K": 1 << 10, "M": MiB, "G": GiB}
    text = text.strip().upper()
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def _stage(backend, name, size):
    """A staged file of ``size`` random-looking bytes, written direct."""
    block = os.urandom(4 * MiB)
    with backend.open_write(name) as w:
        for offset in range(0, size, len(block)):
            w.pwrite(block[:min(len(block), size - offset)], offset)
        w.commit()


def _drain(sock):
    buf = bytearray(4 * MiB)
    while sock.recv_into(buf):
        pass


def _read_once(backend, name, size, reuse):
    """(CPU-s, seconds) of reading ``name`` whole and sending it."""
    tx, rx = socket.socketpair()
    drainer = threading.Thread(target=_drain, args=(rx,), daemon=True)
    drainer.start()
    before, t0 = os.times(), time.monotonic()
    try:
        with staging_stream.open_staged(backend, name, size, digest=False,
                                        reuse_buffers=reuse) as stream:
            for block in stream:
                tx.sendall(block)
    finally:
        tx.close()
        drainer.join()
        rx.close()
    after = os.times()
    cpu = (after.user - before.user) + (after.system - before.system)
    return cpu, time.monotonic() - t0


def measure(directory, size, reps, log=print):
    """{case: [(CPU-s per GiB, MB/s), one per repetition]}."""
    root = tempfile.mkdtemp(prefix="dtnm-stagedread-", dir=directory)
    results = {case: [] for case in CASES}
    try:
        backend = localfs.LocalBackend(root)
        _stage(backend, "img", size)
        for rep in range(reps):
            order = CASES if rep % 2 == 0 else CASES[::-1]
            for case in order:
                cpu, seconds = _read_once(backend, "img", size,
                                          case == "reused")
                results[case].append((cpu * GiB / size,
                                      size / seconds / 1e6))
            log("repetition %d: %s" % (rep + 1, ", ".join(
                "%s %.3f CPU-s/GiB" % (c, results[c][-1][0])
                for c in CASES)))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return results


def emit(out, results, settings):
    cpu = {c: report.summarize([v[0] for v in results[c]]) for c in CASES}
    mbs = {c: report.summarize([v[1] for v in results[c]]) for c in CASES}
    rows = [[c, report.fmt_range(cpu[c], 3), report.fmt_range(mbs[c], 0),
             " ".join("%.3f" % v[0] for v in results[c])] for c in CASES]
    headers = ["case", "CPU-s per GiB: median (min–max)",
               "MB/s: median (min–max)", "CPU-s per GiB, each repetition"]
    ratio = report.ratio(cpu["reused"]["median"], cpu["copied"]["median"])
    apart = cpu["reused"]["max"] < cpu["copied"]["min"]
    verdict = "reused / copied CPU (medians): %s; the ranges %s" % (
        report.fmt(ratio, 2), "are apart" if apart else "overlap")
    text = [report.rst_table(headers, rows, title="Reading a staged %s "
                             "file for an upload" % settings["size"]),
            "", verdict, "", "Command::", "",
            "    " + settings["command"], ""]
    os.makedirs(out, exist_ok=True)
    report.write_text(os.path.join(out, "table.rst"), "\n".join(text))
    report.write_json(os.path.join(out, "results.json"),
                      dict(settings, results=results,
                           summary={"cpu": cpu, "mb_s": mbs}))
    report.grouped_bars(
        os.path.join(out, "cpu.png"), groups=[settings["size"]],
        series=list(CASES),
        values={c: {settings["size"]: (cpu[c]["median"], cpu[c]["min"],
                                       cpu[c]["max"])} for c in CASES},
        ylabel="CPU-s per GiB", title="Import read of a staged file",
        digits=3)
    print(report.text_table(headers, rows))
    print(verdict)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.stagedread",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", default="/var/tmp",
                   help="file system of the staged file (default /var/tmp, "
                        "where benchmarks.migration keeps its staging)")
    p.add_argument("--size", default="2G")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--out", default="doc/source/benchmarks/stagedread")
    args = p.parse_args(argv)
    if args.reps < 1:
        p.error("--reps must be at least 1")
    try:
        size = _size(args.size)
    except ValueError:
        p.error("--size: not a size: %r" % args.size)
    if size < 1:
        p.error("--size must be positive")
    settings = {"command": report.command_line(), "dir": args.dir,
                "size": args.size, "reps": args.reps,
                "machine": report.machine_info()}
    emit(args.out, measure(args.dir, size, args.reps), settings)


if __name__ == "__main__":
    main()
