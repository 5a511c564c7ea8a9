"""Continuous sync against a request: delay to a verified replica.

Two local clouds start as ``tests/functional/api/test_protection.py``
starts them (``benchmarks._clouds.api_pair``: Keystone, Glance publishing its
notifications on the cloud's RabbitMQ vhost, agent, engine and
dtn-migrate-api, per cloud), with cloud A's DTN link not rate-limited
and ``[protection] scan_interval`` a day apart, so that only Glance's
notifications drive continuous sync.  Alice (project ``demo``) owns a
continuous policy on A that selects one tag, with B's DTN as its peer.

For each repetition and image size, in an order that alternates from
one size and repetition to the next, alice uploads:

``event``    an image with the policy's tag.  t0 is the moment Glance's
             upload call returns (the image is active: Glance has sent
             ``image.activate``); the delay ends when
             ``GET /v1/policies/{id}/images`` (polled every
             ``--poll`` seconds) says the image is ``replicated``: B holds
             it, verified.  Nobody asked for it.
``request``  an untagged image of the same size; t0 is just before
             ``POST /v1/migrations`` for it; the delay ends when
             ``GET /v1/migrations/{id}`` says ``complete`` (B holds it,
             verified).

Every image has different data.  Also recorded: Glance's ``updated_at``
and the publisher's timestamp of each ``image.activate`` (heard on
Glance's exchange in a listener pool of the benchmark's own), the
migration's ``created_at`` and ``finished_at`` (where the delay goes),
and the CPU seconds (user + system, with children) of the engines of
both clouds from the upload to the end of each measurement.  Results:
``results.json``, ``results.rst`` (median over repetitions and min-max
per size and path, the ratio event/request) and ``protection.png`` in
``--out``.

Run from the repository root as root::

    .venv/bin/python -m benchmarks.protection --reps 5 --sizes 1,16,64
    # a quick check (about 3 min, 2 of them the clouds' start)
    .venv/bin/python -m benchmarks.protection --smoke
    # the report again from a run's JSON
    .venv/bin/python -m benchmarks.protection --from-json DIR/results.json \\
        --out DIR
"""

import argparse
import calendar
import datetime
import json
import os
import sys
import time
import uuid

import oslo_messaging as messaging
import requests

from benchmarks import _clouds
from benchmarks import common
from benchmarks import report
from benchmarks import workloads

MiB = 1 << 20
PATHS = ("event", "request")
LABELS = {"event": "event (tag, no request)",
          "request": "request (POST /v1/migrations)"}
#: --smoke: the options of a quick check.
SMOKE = {"reps": 1, "sizes": "1"}
#: Engine options of both clouds: no periodic scan within a run.
PROTECTION = {"protection": {"scan_interval": 86400},
              "engine": {"stall_timeout": 300}}


def epoch(stamp):
    """Seconds since the epoch of an ISO 8601 UTC time of Glance or the
    API (``...Z``, with or without microseconds), or None.
    """
    if not stamp:
        return None
    stamp = stamp.rstrip("Z").replace(" ", "T")
    for fmt in ("%Y-%m-%dT%H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S"):
        try:
            when = datetime.datetime.strptime(stamp, fmt)
        except ValueError:
            continue
        return calendar.timegm(when.timetuple()) + when.microsecond / 1e6
    return None


class ActivateListener:
    """Glance's ``image.activate`` notifications on a cloud's vhost, in a
    pool of its own (the engine's queue keeps every notification):
    {image id: (time of receipt, publisher's timestamp)}.
    """

    def __init__(self, cloud):
        self.seen = {}
        seen = self.seen

        class Endpoint:
            filter_rule = messaging.NotificationFilter(
                event_type=r"^image\.activate$")

            def info(self, ctxt, publisher_id, event_type, payload,
                     metadata):
                if isinstance(payload, dict) and payload.get("id"):
                    seen[payload["id"]] = (time.time(),
                                           metadata.get("timestamp"))

        self.transport = messaging.get_notification_transport(
            cloud.bus.conf, url=cloud.bus.url)
        self.listener = messaging.get_notification_listener(
            self.transport,
            [messaging.Target(topic="notifications", exchange="glance")],
            [Endpoint()], executor="threading",
            pool="dtnm-bench-%s" % uuid.uuid4().hex[:6])
        self.listener.start()

    def stop(self):
        self.listener.stop()
        self.listener.wait()
        self.transport.cleanup()


class Bench:

    def __init__(self, args):
        self.args = args
        self.scope = None
        self.results = {"args": vars(args), "reps": [], "warmup": {},
                        "command": report.command_line(),
                        "machine": report.machine_info()}
        self.seed = 1000

    def log(self, msg):
        print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)

    def start(self):
        for ok, why in (_clouds.available(), _clouds.Broker.available()):
            if not ok:
                raise common.BenchError(why)
        self.log("starting two clouds (Glance notifications on, DTN link "
                 "%s)" % ("not limited" if not self.args.rate else
                          "%d B/s" % self.args.rate))
        self.scope, self.a, self.b = _clouds.api_pair(
            "dtnm-bench-prot-", rate=self.args.rate, notifications=True,
            extra=PROTECTION)
        self.activations = ActivateListener(self.a)
        self.scope.addCleanup(self.activations.stop)
        self.alice = self.a.users["alice"]
        self.glance = self.a.glance.client(session=self.alice.session())
        self.api_url = self.a.api.endpoint
        self.http = requests.Session()
        self.http.headers["X-Auth-Token"] = self.alice.session().get_token()
        self.tag = "bench-%s" % uuid.uuid4().hex[:6]
        resp = self.http.post(self.api_url + "/v1/policies", json={
            "name": "bench-%s" % self.tag, "peer": self.b.agent_name,
            "mode": "continuous", "selector": {"tags": [self.tag]}},
            timeout=120)
        if resp.status_code != 201:
            raise common.BenchError("POST /v1/policies: %d %s" % (
                resp.status_code, resp.text[:300]))
        self.policy = resp.json()["policy"]
        self.results["policy"] = self.policy
        self.results["engines"] = {"a": self.a.engine.proc.pid,
                                   "b": self.b.engine.proc.pid}

    def call(self, method, path, expect, **kwargs):
        resp = self.http.request(method, self.api_url + path, timeout=120,
                                 **kwargs)
        if resp.status_code != expect:
            raise common.BenchError("%s %s: %d %s" % (
                method, path, resp.status_code, resp.text[:300]))
        return resp.json()

    def cpu(self):
        return {name: common.tree_cpu(c.engine.proc.pid)
                for name, c in (("a", self.a), ("b", self.b))}

    def upload(self, size, tags):
        """Upload SIZE new pseudo-random bytes as alice; (image id, wall
        time when the upload call returned, seconds it took).
        """
        self.seed += 1
        fields = {"name": "bench-%d-%s" % (size // MiB,
                                           uuid.uuid4().hex[:6]),
                  "disk_format": "raw", "container_format": "bare"}
        if tags:
            fields["tags"] = tags
        image = self.glance.images.create(**fields)
        path = os.path.join(self.scope.workdir, image["id"])
        workloads.write_file(path, size, 0, seed=self.seed)
        try:
            start = time.monotonic()
            with open(path, "rb") as f:
                self.glance.images.upload(image["id"], f)
            t0, mono0 = time.time(), time.monotonic()
        finally:
            os.unlink(path)
        return image["id"], t0, mono0, mono0 - start

    def poll(self, what, check, mono0):
        deadline = mono0 + self.args.timeout
        while True:
            found = check()
            if found is not None:
                return time.monotonic(), found
            if time.monotonic() > deadline:
                raise common.BenchError("%s: not done after %d s"
                                        % (what, self.args.timeout))
            time.sleep(self.args.poll)

    def measure(self, path, size):
        cpu0 = self.cpu()
        tags = [self.tag] if path == "event" else None
        image_id, t0, mono0, upload_s = self.upload(size, tags)
        if path == "request":
            t0, mono0 = time.time(), time.monotonic()
            [rec] = self.call("POST", "/v1/migrations", 202, json={
                "peer": self.b.agent_name,
                "images": [image_id]})["migrations"]
            mid = rec["id"]

            def check():
                m = self.call("GET", "/v1/migrations/%s" % mid,
                              200)["migration"]
                if m["state"] in common.FINAL:
                    return m
                return None
        else:
            def check():
                for item in self.call(
                        "GET", "/v1/policies/%s/images"
                        % self.policy["id"], 200,
                        params={"limit": 1000})["images"]:
                    if item["image_id"] == image_id and \
                            item["state"] in ("replicated", "failed"):
                        return item
                return None
        mono1, found = self.poll("%s %s" % (path, image_id), check, mono0)
        cpu1 = self.cpu()
        if found["state"] not in ("replicated", "complete"):
            raise common.BenchError("%s of image %s ended %s: %s" % (
                path, image_id, found["state"], found.get("error")))
        mid = found["id"] if path == "request" else found["migration_id"]
        migration = self.call("GET", "/v1/migrations/%s" % mid,
                              200)["migration"]
        if migration["state"] != "complete" or \
                migration["size"] != size:
            raise common.BenchError(
                "migration %s of image %s: %s, %s bytes" % (
                    mid, image_id, migration["state"], migration["size"]))
        image = self.glance.images.get(image_id)
        if image["status"] != "active":
            raise common.BenchError("image %s is %s" % (image_id,
                                                        image["status"]))
        activate = self.activations.seen.get(image_id, (None, None))
        created = epoch(migration["created_at"])
        finished = epoch(migration["finished_at"])
        t1 = t0 + (mono1 - mono0)
        sample = {
            "image_id": image_id, "migration_id": mid, "size": size,
            "delay_s": mono1 - mono0, "upload_s": upload_s, "t0": t0,
            "glance_updated_at": image["updated_at"],
            "delay_from_updated_at_s": t1 - epoch(image["updated_at"]),
            "activate_timestamp": activate[1],
            "activate_heard_s": None if activate[0] is None
            else activate[0] - t0,
            "activate_to_t0_s": None if activate[1] is None
            else t0 - epoch(activate[1]),
            "to_created_s": created - t0,
            "created_to_finished_s": finished - created,
            "finished_to_seen_s": t1 - finished,
            "cpu_engine_a_s": _delta(cpu0["a"], cpu1["a"]),
            "cpu_engine_b_s": _delta(cpu0["b"], cpu1["b"]),
            "loadavg": os.getloadavg()[0],
        }
        self.log("%-7s %3d MiB: %.2f s (migration created +%.2f s, ran "
                 "%.2f s; engine A %.2f CPU s)" % (
                     path, size // MiB, sample["delay_s"],
                     sample["to_created_s"],
                     sample["created_to_finished_s"],
                     sample["cpu_engine_a_s"] or 0))
        time.sleep(self.args.pause)
        return sample

    def run(self):
        sizes = [s * MiB for s in self.args.sizes]
        self.log("warm-up: one of each path, %d MiB" % self.args.sizes[0])
        for path in PATHS:
            self.results["warmup"][path] = self.measure(path, sizes[0])
        n = 0
        for rep in range(self.args.reps):
            entry = {"rep": rep, "order": []}
            for size in sizes:
                order = PATHS if n % 2 == 0 else PATHS[::-1]
                n += 1
                for path in order:
                    entry["order"].append("%s-%d" % (path, size // MiB))
                    entry.setdefault(path, {})[str(size // MiB)] = \
                        self.measure(path, size)
            self.results["reps"].append(entry)

    def close(self):
        if self.scope is not None:
            self.log("stopping the clouds")
            self.scope.close()


def _delta(before, after):
    if before is None or after is None:
        return None
    return after - before


# Reports.

KEYS = ("delay_s", "cpu_engine_a_s", "cpu_engine_b_s", "to_created_s",
        "created_to_finished_s", "finished_to_seen_s", "activate_to_t0_s",
        "delay_from_updated_at_s", "upload_s")


def summary(results):
    out = {}
    for mib in [str(s) for s in results["args"]["sizes"]]:
        row = {}
        for path in PATHS:
            samples = [r[path][mib] for r in results["reps"]]
            row[path] = {key: report.summarize([s[key] for s in samples])
                         for key in KEYS}
        row["ratio"] = report.ratio(row["event"]["delay_s"]["median"],
                                    row["request"]["delay_s"]["median"])
        out[mib] = row
    return out


def render_rst(results, summ):
    reps = len(results["reps"])

    def cell(s, digits=2):
        return report.fmt_range(s, digits).replace("(", "[").replace(
            ")", "]")
    headers = ["Size", "Event delay (s)", "Request delay (s)",
               "Event / request", "Engine A CPU s, event",
               "Engine A CPU s, request"]
    rows = []
    for mib, row in summ.items():
        rows.append(["%s MiB" % mib, cell(row["event"]["delay_s"]),
                     cell(row["request"]["delay_s"]),
                     report.fmt(row["ratio"], 2),
                     cell(row["event"]["cpu_engine_a_s"]),
                     cell(row["request"]["cpu_engine_a_s"])])
    parts = [
        "Delay to a verified replica on B: median over %d repetitions "
        "[min-max]; engine A's CPU seconds per image, from the upload to "
        "the end of the measurement." % reps, "",
        report.rst_table(headers, rows), ""]
    headers = ["Size", "Path", "t0 to migration created",
               "Migration created to finished",
               "Finished to seen by the poll", "Engine B CPU s"]
    rows = []
    for mib, row in summ.items():
        for path in PATHS:
            s = row[path]
            rows.append(["%s MiB" % mib, path, cell(s["to_created_s"]),
                         cell(s["created_to_finished_s"]),
                         cell(s["finished_to_seen_s"]),
                         cell(s["cpu_engine_b_s"])])
    offsets = [s["activate_to_t0_s"] for r in results["reps"]
               for s in (r["event"][m] for m in summ)
               if s["activate_to_t0_s"] is not None]
    parts += [
        "Where the delay goes (seconds, median [min-max]; the "
        "migration's times are the engine's database times):", "",
        report.rst_table(headers, rows), ""]
    if offsets:
        parts += [
            "Glance stamped ``image.activate`` %s s before the upload "
            "call returned (median [min-max] over the tagged images)."
            % cell(report.summarize(offsets), 3), ""]
    return "\n".join(parts)


def plot(results, summ, path):
    groups = ["%s MiB" % mib for mib in summ]
    values = {LABELS[p]: {"%s MiB" % mib: row[p]["delay_s"]
                          for mib, row in summ.items()} for p in PATHS}
    report.grouped_bars(
        path, groups, [LABELS[p] for p in PATHS], values,
        ylabel="delay to verified replica on B (s)", digits=2,
        title="Continuous sync against a request, %d repetitions "
              "(bars: median, whiskers: min-max)" % len(results["reps"]))


def write(results, out):
    """results.json, then results.rst and protection.png drawn from it:
    0, or report.RENDER_FAILED (the results are safe).
    """
    summ = results["summary"] = summary(results)
    path = report.write_json(os.path.join(out, "results.json"), results)

    def table():
        report.write_text(os.path.join(out, "results.rst"),
                          render_rst(results, summ))
        print(json.dumps({mib: row["ratio"] for mib, row in summ.items()},
                         indent=1))

    def figure():
        plot(results, summ, os.path.join(out, "protection.png"))
    return report.render(
        path, "python -m benchmarks.protection --from-json %s --out %s"
        % (path, out), table, figure)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.protection",
                                description=__doc__.split("\n")[0])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--sizes", default="1,16,64",
                   help="image sizes in MiB, comma-separated")
    p.add_argument("--rate", type=int, default=0,
                   help="cloud A's DTN send rate, bytes/s (0: no limit)")
    p.add_argument("--poll", type=float, default=0.05,
                   help="seconds between two polls of the API")
    p.add_argument("--pause", type=float, default=1.0,
                   help="seconds of rest after each measurement")
    p.add_argument("--timeout", type=int, default=600,
                   help="longest wait for one replica, seconds")
    report.add_output(p, "protection")
    report.add_smoke(p, "protection", SMOKE, "about 3 min")
    args = p.parse_args(argv)
    if args.from_json:
        return write(report.load_json(args.from_json), args.out)
    report.apply_smoke(args, p, "protection", SMOKE)
    try:
        args.sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        p.error("--sizes: integers (MiB), comma-separated")
    if args.reps < 1 or not args.sizes or min(args.sizes) < 1:
        p.error("--reps and --sizes must be positive")
    report.require_plotting()
    return report.measure(Bench(args), args.out, write,
                          errors=common.BenchError)


if __name__ == "__main__":
    sys.exit(main())
