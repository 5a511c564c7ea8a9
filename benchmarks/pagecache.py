"""What writing new file data costs on this machine, in CPU-s per GiB.

Every stage of a migration writes a new file: Glance A's store, A's
staging copy, B's staging copy, Glance B's store.  The kernel copies
each byte into a page-cache page it has just allocated.  On a virtual
machine whose free memory goes back to the host (virtio-balloon free
page reporting, as on the Firecracker VMs these benchmarks run on), a
page that was free for a while must be backed by the host again the
next time it is used, and the writer pays for it inside that copy.

This measures that cost apart from dtn-migrate, with the writer's own
system CPU time (``os.times``), interleaved over ``--reps``:

``reported``
    1 GiB written to a new file after ``--settle`` seconds with no file
    of the run in the page cache (what the free page reporting sees as
    free for long enough to give back).
``recycled``
    1 GiB written to a new file right after an equally large file was
    deleted: the pages freed are taken again before they are reported.
``O_DIRECT``
    1 GiB written to a new file with ``O_DIRECT`` from one resident
    buffer, then ``fdatasync``, after ``--settle`` seconds like
    ``reported``: no page-cache page is taken at all.  (The buffered
    cases leave writeback to the kernel's threads, whose CPU is not
    counted here.)
``memcpy``
    1 GiB copied between two resident buffers in user space: the copy
    alone.

    .venv/bin/python -m benchmarks.pagecache --reps 5 \\
        --out doc/source/benchmarks/pagecache
"""

import argparse
import mmap
import os
import time

from benchmarks import report

GiB = 1 << 30
BLOCK = 1 << 20
CASES = ("reported", "recycled", "O_DIRECT", "memcpy")


def _write(path, block, size, flags=0):
    """System CPU-s of writing ``size`` bytes of ``block`` to new
    ``path`` (the file is left there); with ``os.O_DIRECT`` in
    ``flags``, its ``fdatasync`` included.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | flags,
                 0o600)
    try:
        before = os.times()
        for offset in range(0, size, len(block)):
            os.pwrite(fd, block, offset)
        if flags:
            os.fdatasync(fd)
        after = os.times()
    finally:
        os.close(fd)
    return after.system - before.system


def _memcpy(size):
    """CPU-s (user + system) of copying ``size`` bytes between two
    resident buffers.
    """
    src, dst = mmap.mmap(-1, BLOCK * 64), mmap.mmap(-1, BLOCK * 64)
    src.write(os.urandom(len(src)))
    dst.write(bytes(len(dst)))           # both resident before timing
    view_s, view_d = memoryview(src), memoryview(dst)
    before = os.times()
    for _ in range(size // len(src)):
        view_d[:] = view_s
    after = os.times()
    view_s.release()
    view_d.release()
    src.close()
    dst.close()
    return (after.user - before.user) + (after.system - before.system)


def measure(directory, reps, settle, size=GiB, log=print):
    """{case: [CPU-s per GiB, one per repetition]}."""
    block = mmap.mmap(-1, BLOCK)        # page-aligned, for O_DIRECT
    block.write(os.urandom(BLOCK))
    path = os.path.join(directory, "dtnm-pagecache-%d" % os.getpid())
    old = path + ".old"
    results = {case: [] for case in CASES}
    per_gib = GiB / size
    try:
        for rep in range(reps):
            # reported: nothing of ours cached for ``settle`` seconds.
            for p in (path, old):
                if os.path.exists(p):
                    os.unlink(p)
            time.sleep(settle)
            results["reported"].append(_write(path, block, size) * per_gib)
            # recycled: the pages of the file just deleted are taken
            # again at once.
            os.rename(path, old)
            os.unlink(old)
            results["recycled"].append(_write(path, block, size) * per_gib)
            os.unlink(path)
            time.sleep(settle)
            results["O_DIRECT"].append(
                _write(path, block, size, os.O_DIRECT) * per_gib)
            results["memcpy"].append(_memcpy(size) * per_gib)
            log("repetition %d: %s" % (rep + 1, ", ".join(
                "%s %.2f" % (c, results[c][-1]) for c in CASES)))
    finally:
        for p in (path, old):
            if os.path.exists(p):
                os.unlink(p)
        block.close()
    return results


def _page_reporting():
    """The kernel's word on free page reporting, if it said one."""
    try:
        with open("/proc/cmdline") as f:
            words = f.read().split()
    except OSError:
        return None
    return " ".join(w for w in words if w.startswith("page_reporting")) \
        or None


def emit(out, results, settings):
    summary = {c: report.summarize(v) for c, v in results.items()}
    rows = [[c, report.fmt_range(summary[c], 2),
             " ".join("%.2f" % v for v in results[c])] for c in CASES]
    headers = ["case", "CPU-s per GiB: median (min–max)",
               "each repetition"]
    rec, rep = summary["recycled"]["median"], summary["reported"]["median"]
    ratio = report.ratio(rep, rec)
    text = [report.rst_table(headers, rows,
                             title="Writing 1 GiB of new file data"),
            "",
            "reported / recycled (medians): %s" % report.fmt(ratio, 2),
            "", "Command::", "", "    " + settings["command"], ""]
    os.makedirs(out, exist_ok=True)
    report.write_text(os.path.join(out, "table.rst"), "\n".join(text))
    report.write_json(os.path.join(out, "results.json"),
                      dict(settings, results=results, summary=summary))
    report.grouped_bars(
        os.path.join(out, "pagecache.png"), groups=["1 GiB"],
        series=list(CASES),
        values={c: {"1 GiB": (summary[c]["median"], summary[c]["min"],
                              summary[c]["max"])} for c in CASES},
        ylabel="CPU-s per GiB", title="Writing new file data", digits=2)
    print(report.text_table(headers, rows))
    print("reported / recycled (medians): %s" % report.fmt(ratio, 2))


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.pagecache",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", default="/var/tmp",
                   help="file system written to (default /var/tmp, where "
                        "benchmarks.migration keeps its stores)")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--settle", type=float, default=10.0,
                   help="seconds with nothing cached before a 'reported' "
                        "write (default 10)")
    p.add_argument("--out", default="doc/source/benchmarks/pagecache")
    args = p.parse_args(argv)
    if args.reps < 1:
        p.error("--reps must be at least 1")
    if args.settle < 0:
        p.error("--settle must not be negative")
    settings = {"command": report.command_line(), "dir": args.dir,
                "reps": args.reps, "settle": args.settle,
                "page_reporting": _page_reporting(),
                "machine": report.machine_info()}
    emit(args.out, measure(args.dir, args.reps, args.settle), settings)


if __name__ == "__main__":
    main()
