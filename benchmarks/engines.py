"""Active/active engines: a batch of migrations on 1, 2 and 3 engines,
and the takeover of a migration after kill -9 of its engine.

Two local clouds start as the functional tests start them
(``benchmarks._clouds.engines_pair``: Keystone, Glance, agent and engine
per cloud, each on its RabbitMQ vhost), with a private MariaDB and a
private ZooKeeper.  Cloud A's engines run on a database and jobboard
namespace of their own for each measurement; cloud B keeps its single
engine.  Every engine runs at the default settings of
``[task_flow]`` (ZooKeeper session 6 s).

``batch``     for each repetition, the configurations ``local`` (one
              engine, no jobboard: the embedded default), then 1, 2 and
              3 engines on the jobboard, in an order that rotates from
              one repetition to the next: ``--images`` images of
              ``--size`` MiB (uploaded once, each of other data) migrated
              in one request (``force``: each a new copy).  Recorded: the
              wall time from the request to the last migration complete,
              the CPU seconds (user + system) of A's engines, of B's
              engine and of both agents over it, and how many migrations
              each engine ran (its ``owner``).
``takeover``  three engines; one migration of ``--takeover-size`` MiB
              sent at ``--rate`` bytes/s (another when it completes);
              ``--kills`` times: once its bytes cross and a random
              0-2 s more, kill -9 of its owner, then the seconds to the
              new owner's claim (the row's owner changes) and to the new
              owner's first write of the record (its progress), read
              from the database; the killed engine starts again.

Results: ``results.json``, ``results.rst`` (medians and min-max) and
``engines.png`` in ``--out``.

Run from the repository root as root::

    .venv/bin/python -m benchmarks.engines --reps 3 --kills 10
    # a quick check (about 4 min, 1.5 of them the clouds' start)
    .venv/bin/python -m benchmarks.engines --smoke
    # the report again from a run's JSON
    .venv/bin/python -m benchmarks.engines --from-json DIR/results.json \\
        --out DIR
"""

import argparse
import collections
import os
import random
import sys
import time
import uuid

from benchmarks import _clouds
from benchmarks import common
from benchmarks import report
from benchmarks import workloads
from dtn_migrate.db import api as db_api

MiB = 1 << 20
CONFIGS = ("local", "1", "2", "3")
LABELS = {"local": "1 engine, no jobboard", "1": "1 engine",
          "2": "2 engines", "3": "3 engines"}
FINAL = ("complete", "failed", "cancelled")
#: --smoke: the options of a quick check.
SMOKE = {"reps": 1, "images": 4, "kills": 2}


class Bench:
    def __init__(self, args):
        self.args = args
        self.scope = None
        self.seed = 0
        self.results = {"machine": report.machine_info(),
                        "command": report.command_line(),
                        "options": {k: v for k, v in vars(args).items()
                                    if k not in ("out", "from_json")},
                        "batch": [], "takeover": []}

    # The clouds.
    def start(self):
        self.scope, self.a, self.b, self.mariadb, self.zookeeper = \
            _clouds.engines_pair("dtnm-bench-engines-")
        self.a.engine.stop()
        client = self.a.admin()
        self.sources = [self.upload(client, self.args.size, "batch-%02d" % i)
                        for i in range(self.args.images)]
        self.big = self.upload(client, self.args.takeover_size, "takeover")

    def upload(self, client, mib, name):
        """An image of ``mib`` MiB of pseudo-random data on A, each of
        other data.
        """
        self.seed += 1
        path = os.path.join(self.scope.workdir, "upload")
        workloads.write_file(path, mib * MiB, 0, seed=self.seed)
        image = client.images.create(name="bench-%s" % name,
                                     disk_format="raw",
                                     container_format="bare")
        with open(path, "rb") as f:
            client.images.upload(image["id"], f)
        os.unlink(path)
        return _clouds.wait_image(client, image["id"])

    def close(self):
        if self.scope is not None:
            self.scope.close()

    def engines(self, config):
        """A's engines of ``config`` (CONFIGS), started and answering, on
        a new database (and jobboard namespace).
        """
        tag = uuid.uuid4().hex[:8]
        persistence = self.mariadb.database("dtnm_bench_%s" % tag)
        extra = {}
        if config != "local":
            extra["task_flow"] = {
                "jobboard_enabled": "true",
                "jobboard_backend_port": str(self.zookeeper.port),
                "jobboard_backend_namespace": "dtnm-bench-%s" % tag}
        a = self.a
        engines = []
        for i in range(1 if config == "local" else int(config)):
            engine = _clouds.Engine(
                self.scope.workdir, "%s-%s-%d" % (a.engine_name, tag, i),
                a.broker.url(), a.agent_name, a.glance_auth(), a.staging,
                persistence, extra=extra)
            self.scope.addCleanup(engine.discard)
            engine.start()
            engines.append(engine)
        for engine in engines:
            engine.wait_ready(a.bus.engine)
        return engines, persistence

    def row(self, persistence, migration_id):
        db = db_api.Database(connection=persistence)
        try:
            return db.migration_get(migration_id)
        finally:
            db.dispose()

    def wait(self, cond, what, timeout=None, interval=0.05):
        deadline = time.monotonic() + (timeout or self.args.timeout)
        while True:
            value = cond()
            if value:
                return value
            if time.monotonic() >= deadline:
                raise common.BenchError("timed out waiting for %s" % what)
            time.sleep(interval)

    def cpu(self, engines):
        stats = common.proc_stats()
        procs = {"engines A": [e.proc.pid for e in engines],
                 "engine B": [self.b.engine.proc.pid],
                 "agents": [self.a.agent.proc.pid, self.b.agent.proc.pid]}
        return {k: sum(common.tree_cpu(p, stats) or 0.0 for p in pids)
                for k, pids in procs.items()}

    def clear_b(self):
        """B's copies go (they would fill the tmpfs)."""
        client = self.b.admin()
        for image in list(client.images.list()):
            client.images.delete(image["id"])

    # Measurements.
    def batch(self, rep, config):
        engines, persistence = self.engines(config)
        try:
            before = self.cpu(engines)
            t0 = time.monotonic()
            req = self.a.bus.engine.migrate(
                _clouds.ADMIN, self.b.agent_name,
                images=[s["id"] for s in self.sources],
                options={"force": True})
            recs = self.wait(lambda: (lambda r: r if r and all(
                m["state"] in FINAL for m in r) else None)(
                self.a.bus.engine.list_migrations(
                    _clouds.ADMIN, request_id=req["request_id"])),
                "the batch", interval=0.2)
            wall = time.monotonic() - t0
            after = self.cpu(engines)
            rows = [self.row(persistence, r["migration_id"]) for r in recs]
        finally:
            for engine in engines:
                engine.discard()
        bad = [r for r in recs if r["state"] != "complete"]
        if bad:
            raise common.BenchError("%s: %s" % (bad[0]["state"],
                                                bad[0].get("error")))
        owners = collections.Counter(r.get("owner") for r in rows)
        # The claims of each migration (1: run by one engine, once).
        epochs = collections.Counter(r.get("epoch") for r in rows)
        # Where a slow batch lost its time: its slowest migration.
        slowest = max(rows, key=lambda r: r["finished_at"] - r["created_at"])
        result = {"rep": rep, "config": config, "seconds": wall,
                  "cpu": {k: after[k] - before[k] for k in after},
                  "owners": sorted(owners.values(), reverse=True),
                  "epochs": {str(k): v for k, v in sorted(epochs.items())},
                  "slowest": {
                      "seconds": (slowest["finished_at"] -
                                  slowest["created_at"]).total_seconds(),
                      "queued": (slowest["started_at"] -
                                 slowest["created_at"]).total_seconds()
                      if slowest["started_at"] else None,
                      "migration_id": slowest["id"]}}
        print("batch rep %d %-6s %6.1f s  cpu %s  spread %s  epochs %s  "
              "slowest %s" % (rep, config, wall,
                              {k: round(v, 1) for k, v in
                               result["cpu"].items()}, result["owners"],
                              result["epochs"], result["slowest"]),
              flush=True)
        self.results["batch"].append(result)
        self.clear_b()

    def takeover(self):
        engines, persistence = self.engines("3")
        by_name = {e.name: e for e in engines}
        mid = None
        killed = collections.Counter()
        try:
            for kill in range(self.args.kills):
                # A migration taken over jobboard_max_claims (5) times
                # would fail as a poison job: each gets 3 kills at most,
                # then runs to its end before the next one starts (force
                # is refused while one runs).
                if killed[mid] >= 3:
                    self.wait(lambda: self.row(persistence, mid)["state"]
                              in FINAL, "the migration killed under")
                mid, first = self.under_way(persistence, mid)
                killed[mid] += 1
                owner = by_name[first["owner"]]
                t0 = time.monotonic()
                owner.kill9()
                taken = self.wait(lambda: (lambda r: r if r.get("owner") not
                                           in (owner.name, None) else None)(
                    self.row(persistence, mid)), "another engine to take it")
                claimed = time.monotonic() - t0
                self.wait(lambda: self.row(persistence, mid)["updated_at"] >
                          taken["updated_at"], "the new owner's progress")
                progress = time.monotonic() - t0
                print("kill %d: claimed %.2f s, progress %.2f s (%s)"
                      % (kill + 1, claimed, progress, _stage(first)),
                      flush=True)
                self.results["takeover"].append(
                    {"kill": kill + 1, "claimed": claimed,
                     "progress": progress, "stage": _stage(first)})
                owner.start()
                owner.wait_ready(self.a.bus.engine)
            self.wait(lambda: self.row(persistence, mid)["state"] in FINAL,
                      "the last migration")
        finally:
            for engine in engines:
                engine.discard()
        self.clear_b()

    def under_way(self, persistence, mid):
        """(migration id, row) of a migration of the big image whose
        bytes cross, a random 0-2 s after they began to: ``mid``, or a
        new one when it ended (before or meanwhile).
        """
        while True:
            if mid is None or self.row(persistence, mid)["state"] in FINAL:
                mid = self.migrate_big()
            row = self.wait(lambda: (lambda r: r if r["state"] in FINAL or (
                r["state"] == "running" and r.get("owner") and
                (r.get("bytes_transfer") or 0) > 0) else None)(
                self.row(persistence, mid)), "the migration under way")
            if row["state"] in FINAL:
                continue
            time.sleep(random.uniform(0, 2))
            row = self.row(persistence, mid)
            if row["state"] not in FINAL:
                return mid, row

    def migrate_big(self):
        req = self.a.bus.engine.migrate(
            _clouds.ADMIN, self.b.agent_name, images=[self.big["id"]],
            options={"force": True,
                     "transfer_options": {"rate_limit": self.args.rate}})
        return req["migrations"][0]["migration_id"]

    def run(self):
        for rep in range(self.args.reps):
            shift = rep % len(CONFIGS)
            for config in CONFIGS[shift:] + CONFIGS[:shift]:
                self.batch(rep, config)
        if self.args.kills:
            self.takeover()


def _stage(row):
    """Where ``row``'s migration was when it was read: its stage, and
    how much of it crossed the DTN link ("transfer 41 %").
    """
    size = row.get("size") or 0
    done = (row.get("bytes_transfer") or 0) / size if size else 0.0
    return "%s %.0f %%" % (row.get("stage") or "-", 100.0 * done)


def summary(results):
    batch = {}
    for config in CONFIGS:
        rows = [r for r in results["batch"] if r["config"] == config]
        if not rows:
            continue
        batch[config] = {
            "seconds": report.summarize([r["seconds"] for r in rows]),
            "cpu": {k: report.summarize([r["cpu"][k] for r in rows])
                    for k in rows[0]["cpu"]},
            "owners": [r["owners"] for r in rows]}
    local = (batch.get("local") or {}).get("seconds", {}).get("median")
    for config, row in batch.items():
        row["speedup"] = report.ratio(local, row["seconds"]["median"])
    kills = results["takeover"]
    return {"batch": batch,
            "takeover": {k: report.summarize([t[k] for t in kills])
                         for k in ("claimed", "progress")}}


def render_rst(results, summ):
    opts = results["options"]
    rows = []
    for config, row in summ["batch"].items():
        rows.append([LABELS[config], report.fmt_range(row["seconds"]),
                     report.fmt(row["speedup"], 2),
                     report.fmt_range(row["cpu"]["engines A"]),
                     report.fmt_range(row["cpu"]["engine B"]),
                     report.fmt_range(row["cpu"]["agents"]),
                     " ".join("/".join(map(str, o)) for o in row["owners"])])
    batch = (["engines of A", "batch (s)", "speedup", "CPU-s A's engines",
              "CPU-s B's engine", "CPU-s agents", "migrations per engine"],
             rows)
    take = summ["takeover"]
    kills = (["kill -9 of the owner to", "min", "median", "max"],
             [[what, report.fmt(take[key]["min"], 2),
               report.fmt(take[key]["median"], 2),
               report.fmt(take[key]["max"], 2)]
              for key, what in (("claimed", "the new owner's claim (s)"),
                                ("progress", "its first progress (s)"))
              if take[key]["n"]])
    lines = ["%d images of %d MiB in one request, %d repetitions; "
             "takeover: %d kills, %d MiB at %d B/s."
             % (opts["images"], opts["size"], opts["reps"],
                len(results["takeover"]), opts["takeover_size"],
                opts["rate"]), ""]
    for headers, rows in (batch, kills):
        if rows:
            lines.append(report.rst_table(headers, rows))
    lines.append("Command::\n\n    %s\n" % results["command"])
    return "\n".join(lines)


def plot(results, summ, path):
    plt = report.pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    configs = list(summ["batch"])
    for i, config in enumerate(configs):
        report.range_bar(left, i, summ["batch"][config]["seconds"], 0)
    left.set_xticks(range(len(configs)))
    left.set_xticklabels([LABELS[c] for c in configs], rotation=15)
    left.set_ylabel("batch wall time (s)")
    kills = results["takeover"]
    if kills:
        right.plot([k["kill"] for k in kills],
                   [k["claimed"] for k in kills], "o-", label="claimed")
        right.plot([k["kill"] for k in kills],
                   [k["progress"] for k in kills], "s-",
                   label="first progress")
        right.set_xlabel("kill")
        right.set_ylabel("seconds after kill -9")
        right.legend()
    report.save_figure(fig, path)


def write(results, out):
    summ = results["summary"] = summary(results)
    path = report.write_json(os.path.join(out, "results.json"), results)

    def table():
        text = render_rst(results, summ)
        report.write_text(os.path.join(out, "results.rst"), text)
        print(text)

    def figure():
        plot(results, summ, os.path.join(out, "engines.png"))
    return report.render(
        path, "python -m benchmarks.engines --from-json %s --out %s"
        % (path, out), table, figure)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.engines",
                                description=__doc__.split("\n")[0])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--images", type=int, default=12,
                   help="images of the batch")
    p.add_argument("--size", type=int, default=8,
                   help="MiB of each image of the batch")
    p.add_argument("--kills", type=int, default=10)
    p.add_argument("--takeover-size", type=int, default=32,
                   help="MiB of the migration killed under")
    p.add_argument("--rate", type=int, default=2 * MiB,
                   help="bytes/s of the migration killed under")
    p.add_argument("--timeout", type=int, default=600,
                   help="longest wait for one step, seconds")
    report.add_output(p, "engines")
    report.add_smoke(p, "engines", SMOKE, "about 4 min")
    args = p.parse_args(argv)
    if args.from_json:
        return write(report.load_json(args.from_json), args.out)
    report.apply_smoke(args, p, "engines", SMOKE)
    if min(args.images, args.size, args.takeover_size, args.rate) < 1 or \
            min(args.reps, args.kills) < 0:
        p.error("--images, --size, --takeover-size and --rate must be "
                "positive, --reps and --kills not negative")
    report.require_plotting()
    return report.measure(Bench(args), args.out, write)


if __name__ == "__main__":
    sys.exit(main())
