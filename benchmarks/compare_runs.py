"""Side by side: several runs of ``benchmarks.migration``, labelled.

For settings that need the clouds started afresh (``--no-direct-io``),
one migration benchmark run cannot interleave them; run the benchmark
alternately with and without the setting, then put the runs together::

    python -m benchmarks.compare_runs --what pipelined \\
        --run direct=/tmp/mig-direct-1 --run buffered=/tmp/mig-buffered-1 \\
        --run direct=/tmp/mig-direct-2 --run buffered=/tmp/mig-buffered-2 \\
        --out doc/source/benchmarks/direct-io

Every repetition of every run of a label counts as one value.  Writes
``table.rst`` (seconds, and CPU-s per GiB of each engine and agent, of
their sum and of Glance B, as median (min–max)), ``cpu.png`` and
``results.json`` (the values and each run's settings and command).
"""

import argparse
import collections
import json
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(_HERE)
if _REPO not in sys.path:
    sys.path.insert(0, _REPO)

from benchmarks import report  # noqa: E402

DTN = ("engine-a", "agent-a", "agent-b", "engine-b")
SHOWN = DTN + ("glance-b",)
GiB = 1 << 30


def load(label_dirs, what):
    """label -> {'seconds': [...], process: [...CPU-s/GiB], 'runs': [...]}
    in the order the labels first appear.
    """
    out = collections.OrderedDict()
    for label, directory in label_dirs:
        with open(os.path.join(directory, "results.json")) as f:
            data = json.load(f)
        gib = data["settings"]["size"] / GiB
        entry = out.setdefault(label, collections.defaultdict(list))
        entry["runs"].append({"dir": directory, "command": data["command"],
                              "settings": data["settings"]})
        for s in data["samples"]:
            if s.get("what") != what or s.get("seconds") is None:
                continue
            cpu = s["extra"]["cpu_seconds"]
            entry["seconds"].append(s["seconds"])
            for p in SHOWN:
                entry[p].append(cpu.get(p, 0.0) / gib)
            entry["dtn-migrate"].append(sum(cpu.get(p, 0.0)
                                            for p in DTN) / gib)
    return out


def table(runs):
    columns = ("seconds", "dtn-migrate") + SHOWN
    headers = ["run", "repetitions", "seconds"] + [
        "%s CPU-s/GiB" % c for c in columns[1:]]
    rows = []
    for label, entry in runs.items():
        rows.append([label, len(entry["seconds"])] + [
            report.fmt_range(report.summarize(entry[c]), 2) for c in columns])
    if len(runs) == 2:
        (a, ea), (b, eb) = runs.items()
        rows.append(["%s / %s (medians)" % (a, b), ""] + [
            report.fmt(report.ratio(report.summarize(ea[c])["median"],
                                    report.summarize(eb[c])["median"]), 2)
            for c in columns])
    return report.rst_table(headers, rows)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--run", action="append", required=True,
                   metavar="LABEL=DIR", help="a migration benchmark's --out")
    p.add_argument("--what", default="pipelined")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    pairs = []
    for item in args.run:
        label, sep, directory = item.partition("=")
        if not sep or not label or not directory:
            p.error("--run wants LABEL=DIR, got %r" % item)
        pairs.append((label, directory))
    runs = load(pairs, args.what)
    os.makedirs(args.out, exist_ok=True)
    text = table(runs)
    report.write_text(os.path.join(args.out, "table.rst"), text)
    values = {label: {p: report.summarize(e[p])
                      for p in ("dtn-migrate",) + SHOWN}
              for label, e in runs.items()}
    report.grouped_bars(os.path.join(args.out, "cpu.png"),
                        ["dtn-migrate"] + list(SHOWN), list(runs), values,
                        ylabel="CPU-s per GiB", digits=1,
                        title="%s migration, CPU per GiB" % args.what,
                        figsize=(7.5, 3.4))
    report.write_json(os.path.join(args.out, "results.json"), {
        "command": report.command_line(), "what": args.what,
        "runs": {label: dict(e) for label, e in runs.items()}})
    print(text)


if __name__ == "__main__":
    main()
