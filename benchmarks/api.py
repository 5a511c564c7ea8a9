"""Latency of dtn-migrate-api against Glance's API, same machine, same run.

Two local clouds start as the functional tests start them
(``benchmarks._clouds.api_pair``: Keystone, Glance, agent, engine and
dtn-migrate-api under uwsgi, per cloud).  Then:

* ROWS migration records go straight into cloud A's database (bulk SQL
  through the models' tables), each with three events, owned by alice's
  project (``demo``);
* ROWS images go straight into Glance A's SQLite database, cloned (new
  ids, names and times) from the rows of one image that Glance's own API
  created for alice, with its locations and properties: the shape Glance
  writes;
* a couple of migrations run through A's rate-limited DTN link the whole
  time (a new one starts whenever fewer than ``--background`` run).

Each repetition measures, as alice with the same token, in an order that
rotates from one repetition to the next:

``api-list``      ``GET /v1/migrations?limit=1000``
``glance-list``   ``GET /v2/images?limit=1000``
``api-show``      ``GET /v1/migrations/{id}`` (random records)
``glance-show``   ``GET /v2/images/{id}`` (random images)

and the CPU seconds (user + system) of each server's uwsgi process group
during its requests.  Results: ``results.json``, ``results.rst`` (p50 and
p99: median over repetitions, with their min-max; the API/Glance ratio)
and ``api.png`` in ``--out``.

Run from the repository root as root (private MariaDB not needed)::

    .venv/bin/python -m benchmarks.api --rows 100000 --reps 5
    # a quick check (about 4 min, 2 of them the clouds' start)
    .venv/bin/python -m benchmarks.api --smoke
    # the report again from a run's JSON
    .venv/bin/python -m benchmarks.api --from-json DIR/results.json --out DIR
"""

import argparse
import datetime
import json
import os
import random
import sqlite3
import statistics
import sys
import time
import uuid

import requests

from benchmarks import _clouds
from benchmarks import common
from benchmarks import report
from benchmarks import workloads

MiB = 1 << 20
TARGETS = ("api-list", "glance-list", "api-show", "glance-show")
#: --smoke: the options of a quick check.
SMOKE = {"rows": 2000, "reps": 2, "lists": 3, "shows": 10,
         "background_size": 8 * MiB}


def percentile(values, q):
    """The Q-th percentile (0..100) of VALUES, linear between ranks."""
    values = sorted(values)
    if not values:
        raise ValueError("no values")
    k = (len(values) - 1) * q / 100.0
    lo = int(k)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


# Rows.

def insert_migrations(connection, project_id, user_id, rows, peer,
                      batch=5000):
    """ROWS complete outgoing migration records with 3 events each."""
    import sqlalchemy as sa

    from dtn_migrate.db import models
    engine = sa.create_engine(connection)
    migrations = models.Migration.__table__
    events = models.MigrationEvent.__table__
    t0 = datetime.datetime(2026, 1, 1)
    ids = []
    with engine.begin() as conn:
        for start in range(0, rows, batch):
            recs, evs = [], []
            for i in range(start, min(rows, start + batch)):
                mid = uuid.uuid4().hex
                ids.append(mid)
                created = t0 + datetime.timedelta(seconds=i)
                done = created + datetime.timedelta(seconds=30)
                size = 1 * MiB + i
                recs.append({
                    "id": mid, "request_id": uuid.uuid4().hex,
                    "image_id": str(uuid.uuid4()),
                    "image_name": "bench-%06d" % i, "peer": peer,
                    "direction": "outgoing", "state": "complete",
                    "stage": None, "mode": "pipelined",
                    "transfer_id": uuid.uuid4().hex, "attempt": 1,
                    "size": size, "os_hash_value": "%0128x" % i,
                    "bytes_export": size, "bytes_transfer": size,
                    "bytes_import": size, "progress": 1.0, "rate": None,
                    "eta": None, "error": None,
                    "peer_image_id": str(uuid.uuid4()),
                    "peer_image_hash": "%0128x" % i, "options": "{}",
                    "project_id": project_id, "user_id": user_id,
                    "created_at": created, "updated_at": done,
                    "started_at": created, "finished_at": done})
                for n, event in enumerate(("queued", "started",
                                           "finished")):
                    evs.append({"migration_id": mid, "stage": None,
                                "event": event, "message": None,
                                "bytes": size if n == 2 else None,
                                "created_at": created +
                                datetime.timedelta(seconds=n)})
            conn.execute(migrations.insert(), recs)
            conn.execute(events.insert(), evs)
    engine.dispose()
    return ids


def _rows(cur, sql, *args):
    cur.execute(sql, args)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def clone_images(db_path, template_id, rows, batch=5000):
    """ROWS copies of image TEMPLATE_ID in Glance's SQLite database, with
    its locations, properties and tags: new ids, names and times.
    """
    con = sqlite3.connect(db_path, timeout=60)
    try:
        cur = con.cursor()
        image = _rows(cur, "SELECT * FROM images WHERE id = ?",
                      template_id)[0]
        children = {}
        for table in ("image_locations", "image_properties", "image_tags"):
            children[table] = _rows(
                cur, "SELECT * FROM %s WHERE image_id = ?" % table,
                template_id)
        ids = []
        t0 = datetime.datetime(2026, 1, 1)
        for start in range(0, rows, batch):
            images = []
            kids = {t: [] for t in children}
            for i in range(start, min(rows, start + batch)):
                image_id = str(uuid.uuid4())
                ids.append(image_id)
                when = (t0 + datetime.timedelta(seconds=i)).strftime(
                    "%Y-%m-%d %H:%M:%S.%f")
                row = dict(image, id=image_id, name="bench-%06d" % i,
                           created_at=when, updated_at=when)
                images.append(row)
                for table, items in children.items():
                    for item in items:
                        item = dict(item, image_id=image_id,
                                    created_at=when, updated_at=when)
                        item.pop("id", None)    # autoincrement
                        kids[table].append(item)
            _insert(cur, "images", images)
            for table, items in kids.items():
                _insert(cur, table, items)
        con.commit()
        return ids
    finally:
        con.close()


def _insert(cur, table, rows):
    if not rows:
        return
    cols = list(rows[0])
    cur.executemany("INSERT INTO %s (%s) VALUES (%s)" % (
        table, ",".join(cols), ",".join("?" * len(cols))),
        [tuple(r[c] for c in cols) for r in rows])


# The run.

class Bench:

    def __init__(self, args):
        self.args = args
        self.scope = None
        self.results = {"args": vars(args), "reps": [],
                        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                 time.gmtime())}
        self.background = []

    def log(self, msg):
        print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)

    def start(self):
        self.log("starting two clouds")
        self.scope, self.a, self.b = _clouds.api_pair(
            "dtnm-bench-api-", rate=self.args.rate, api_threads=8)
        alice = self.a.users["alice"]
        self.token = alice.session().get_token()
        self.alice = alice
        self.glance_url = self.a.glance.endpoint
        self.api_url = self.a.api.endpoint
        self.http = requests.Session()
        self.http.headers["X-Auth-Token"] = self.token

    def get(self, url, **params):
        resp = self.http.get(url, params=params, timeout=300)
        if resp.status_code != 200:
            raise common.BenchError("GET %s: %d %s" % (
                url, resp.status_code, resp.text[:300]))
        return resp

    def upload(self, size, name):
        client = self.a.glance.client(session=self.alice.session())
        image = client.images.create(name=name, disk_format="raw",
                                     container_format="bare")
        path = os.path.join(self.scope.workdir, image["id"])
        workloads.write_file(path, size, 0, seed=size)
        with open(path, "rb") as f:
            client.images.upload(image["id"], f)
        os.unlink(path)
        return image["id"]

    def fill(self):
        rows = self.args.rows
        self.log("inserting %d migration records" % rows)
        t0 = time.monotonic()
        self.migration_ids = insert_migrations(
            self.a.database, self.alice["project_id"],
            self.alice["user_id"], rows, self.b.agent_name)
        self.results["insert_migrations_s"] = time.monotonic() - t0
        template = self.upload(64 * 1024, "bench-template")
        self.log("inserting %d Glance images" % rows)
        t0 = time.monotonic()
        self.image_ids = clone_images(self.a.glance.db, template, rows)
        self.results["insert_images_s"] = time.monotonic() - t0
        # Both list what was inserted.
        page = self.get(self.glance_url + "/v2/images", limit=1000).json()
        if len(page["images"]) != min(1000, rows + 1) or (
                rows >= 1000 and "next" not in page):
            raise common.BenchError("Glance lists %d images"
                                    % len(page["images"]))
        self.get(self.glance_url + "/v2/images/%s" % self.image_ids[-1])
        page = self.get(self.api_url + "/v1/migrations", limit=1000).json()
        if len(page["migrations"]) != min(1000, rows):
            raise common.BenchError("the API lists %d migrations"
                                    % len(page["migrations"]))
        self.get(self.api_url + "/v1/migrations/%s"
                 % self.migration_ids[-1])

    def keep_migrating(self):
        """Start migrations until --background of them run."""
        running = 0
        self.background_seen = []
        for mid in self.background:
            rec = self.get(self.api_url + "/v1/migrations/%s"
                           % mid).json()["migration"]
            running += rec["state"] in ("queued", "running")
            self.background_seen.append((mid, rec["state"],
                                         rec["bytes"]["transfer"]))
        for _ in range(self.args.background - running):
            image_id = self.upload(self.args.background_size,
                                   "bench-bg-%s" % uuid.uuid4().hex[:6])
            resp = self.http.post(self.api_url + "/v1/migrations", json={
                "peer": self.b.agent_name, "images": [image_id]},
                timeout=120)
            if resp.status_code != 202:
                raise common.BenchError("POST /v1/migrations: %d %s" % (
                    resp.status_code, resp.text[:300]))
            self.background += [m["id"]
                                for m in resp.json()["migrations"]]
            running += 1
        return running

    def measure(self, target, rng):
        kind, what = target.split("-")
        server = self.a.api if kind == "api" else self.a.glance
        if what == "list":
            n = self.args.lists
            url = self.api_url + "/v1/migrations" if kind == "api" else \
                self.glance_url + "/v2/images"
            urls = [url] * n
            params = {"limit": 1000}
        else:
            n = self.args.shows
            ids = self.migration_ids if kind == "api" else self.image_ids
            path = "/v1/migrations/%s" if kind == "api" else "/v2/images/%s"
            root = self.api_url if kind == "api" else self.glance_url
            urls = [root + path % rng.choice(ids) for _ in range(n)]
            params = {}
        cpu0 = common.group_cpu(server.proc.pid)
        times = []
        for url in urls:
            t = time.perf_counter()
            resp = self.get(url, **params)
            times.append(time.perf_counter() - t)
            if what == "list":
                key = "migrations" if kind == "api" else "images"
                if len(resp.json()[key]) != 1000:
                    raise common.BenchError("%s: %d rows" % (
                        target, len(resp.json()[key])))
        cpu = common.group_cpu(server.proc.pid) - cpu0
        return {"times": times, "cpu_s": cpu,
                "p50": percentile(times, 50), "p99": percentile(times, 99)}

    def run(self):
        rng = random.Random(self.args.seed)
        for rep in range(self.args.reps):
            running = self.keep_migrating()
            order = list(TARGETS[rep % 4:] + TARGETS[:rep % 4])
            entry = {"rep": rep, "order": order, "running": running,
                     "background": self.background_seen,
                     "loadavg": os.getloadavg()[0]}
            for target in order:
                entry[target] = self.measure(target, rng)
                self.log("rep %d %-11s p50 %.1f ms p99 %.1f ms cpu %.2f s"
                         % (rep, target, 1000 * entry[target]["p50"],
                            1000 * entry[target]["p99"],
                            entry[target]["cpu_s"]))
            entry["running_after"] = self.keep_migrating()
            entry["background_after"] = self.background_seen
            self.results["reps"].append(entry)

    def close(self):
        if self.scope is not None:
            self.scope.close()


# Reports.

def summary(results):
    out = {}
    for target in TARGETS:
        reps = [r[target] for r in results["reps"]]
        row = {}
        for key in ("p50", "p99", "cpu_s"):
            values = [r[key] for r in reps]
            row[key] = {"median": statistics.median(values),
                        "min": min(values), "max": max(values)}
        row["requests"] = sum(len(r["times"]) for r in reps)
        out[target] = row
    for what in ("list", "show"):
        api, glance = out["api-" + what], out["glance-" + what]
        out["ratio-" + what] = {
            key: api[key]["median"] / glance[key]["median"]
            for key in ("p50", "p99")}
    return out


def render_rst(results, summ):
    args = results["args"]
    lines = [
        ".. list-table:: Latency (ms): median over %d repetitions "
        "[min-max]; CPU s per repetition" % len(results["reps"]),
        "   :header-rows: 1",
        "",
        "   * - Request",
        "     - Requests",
        "     - p50",
        "     - p99",
        "     - CPU s",
    ]
    names = {
        "api-list": "dtn-migrate ``GET /v1/migrations?limit=1000``",
        "glance-list": "Glance ``GET /v2/images?limit=1000``",
        "api-show": "dtn-migrate ``GET /v1/migrations/{id}``",
        "glance-show": "Glance ``GET /v2/images/{id}``",
    }

    def cell(v, scale=1000.0, fmt="%.1f"):
        return "%s [%s-%s]" % (fmt % (v["median"] * scale),
                               fmt % (v["min"] * scale),
                               fmt % (v["max"] * scale))
    for target in TARGETS:
        row = summ[target]
        lines += ["   * - %s" % names[target],
                  "     - %d" % row["requests"],
                  "     - %s" % cell(row["p50"]),
                  "     - %s" % cell(row["p99"]),
                  "     - %s" % cell(row["cpu_s"], 1.0, "%.2f")]
    lines += [
        "",
        "Ratio dtn-migrate / Glance (medians): list p50 %.2f, p99 %.2f; "
        "show p50 %.2f, p99 %.2f.  %d rows each; %s migrations ran in "
        "the background (per repetition: %s)." % (
            summ["ratio-list"]["p50"], summ["ratio-list"]["p99"],
            summ["ratio-show"]["p50"], summ["ratio-show"]["p99"],
            args["rows"], args["background"],
            ", ".join(str(r["running"]) for r in results["reps"])),
        "",
    ]
    return "\n".join(lines)


def plot(results, path):
    fig, axes = report.pyplot().subplots(1, 2, figsize=(10, 4))
    for ax, what in zip(axes, ("list", "show")):
        data, labels = [], []
        for kind in ("api", "glance"):
            target = "%s-%s" % (kind, what)
            data.append([1000 * t for r in results["reps"]
                         for t in r[target]["times"]])
            labels.append("dtn-migrate" if kind == "api" else "Glance")
        ax.boxplot(data, whis=(1, 99), showfliers=False)
        ax.set_xticks([1, 2], labels)
        ax.set_ylabel("latency (ms), whiskers p1-p99")
        ax.set_title("GET %s" % ("list, limit=1000" if what == "list"
                                 else "show one"))
        ax.set_ylim(bottom=0)
    fig.suptitle("%d rows, %d repetitions" % (
        results["args"]["rows"], len(results["reps"])))
    fig.tight_layout()
    report.save_figure(fig, path)


def write(results, out):
    """results.json, then results.rst and api.png drawn from it: 0, or
    report.RENDER_FAILED (the results are safe).
    """
    summ = results["summary"] = summary(results)
    path = report.write_json(os.path.join(out, "results.json"), results)

    def table():
        report.write_text(os.path.join(out, "results.rst"),
                          render_rst(results, summ))
        print(json.dumps({k: v for k, v in summ.items()
                          if k.startswith("ratio")}, indent=1))

    def figure():
        plot(results, os.path.join(out, "api.png"))
    return report.render(
        path, "python -m benchmarks.api --from-json %s --out %s"
        % (path, out), table, figure)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.api",
                                description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=100000,
                   help="migration records and Glance images (each)")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--lists", type=int, default=20,
                   help="list requests per repetition and server")
    p.add_argument("--shows", type=int, default=200,
                   help="show requests per repetition and server")
    p.add_argument("--background", type=int, default=2,
                   help="migrations kept running during the measurements")
    p.add_argument("--background-size", type=int, default=64 * MiB)
    p.add_argument("--rate", type=int, default=512 * 1024,
                   help="cloud A's DTN send rate, bytes/s")
    p.add_argument("--seed", type=int, default=12)
    report.add_output(p, "api")
    report.add_smoke(p, "api", SMOKE, "about 4 min")
    args = p.parse_args(argv)
    if args.from_json:
        return write(report.load_json(args.from_json), args.out)
    report.apply_smoke(args, p, "api", SMOKE)
    if args.reps < 1 or args.rows < 1:
        p.error("--reps and --rows must be positive")
    report.require_plotting()
    bench = Bench(args)
    try:
        bench.start()
        bench.fill()
        bench.run()
    except common.BenchError as exc:
        return report.stopped(bench.results, args.out, exc)
    finally:
        bench.close()
    return write(bench.results, args.out)


if __name__ == "__main__":
    sys.exit(main())
