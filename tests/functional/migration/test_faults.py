"""Faults during migrations between two real clouds: engine kill -9 at
three points (SQLite, MariaDB and PostgreSQL persistence) and the peer's
engine kill -9 during its import, a RabbitMQ
restart, a staged file that cannot be removed at the end, Glance B
answering 503/429, a peer import that fails and is retried, bad
requests.

Faults are held by count, or until the test clears them, never by time:
a FaultProxy in front of a Glance answers 503 to the data requests it
must hold, so that the migration is provably where each step wants it
(staging, transferring, importing) when the fault strikes.
"""

import datetime
import os
import re
import subprocess
import time

from dtn_migrate.api import views
from dtn_migrate import exception
from dtn_migrate.transfer import dataset
from tests.functional import base
from tests.functional.migration import harness as migration

#: The context of the tests' requests over the bus.
ADMIN = migration.ADMIN

MiB = 1 << 20
SIZE = 384 * MiB
RATE = 48 * MiB           # DTN link rate limit: the transfer lags export
#: Glance A's first download is cut after this many bytes (head included).
CUT = 128 * MiB
FILE = r"/file$"


def _range_start(header):
    if not header:
        return 0
    return int(header.split("=", 1)[1].split("-", 1)[0])


def data_gets(proxy):
    """(range start, proxy action) of every GET of image data that went
    through PROXY, in order.
    """
    log, requests = list(proxy.log), list(proxy.requests)
    out = []
    # The proxy appends to both for each request, one after the other.
    for (m, p, action), (m2, p2, rng) in zip(log, requests):
        if (m, p) != (m2, p2):
            raise AssertionError("proxy log and requests disagree: %r %r"
                                 % (log, requests))
        if m == "GET" and p.endswith("/file"):
            out.append((_range_start(rng), action))
    return out


class TestEngineCrash(migration.MigrationTestCase):
    """kill -9 the source engine; the restarted engine resumes from its
    persisted flow without exporting staged bytes again, and the agents
    never send anything twice.  The peer's engine is killed during its
    import too: restarted, it completes the import.
    """

    def committed(self):
        return dataset.read_watermark_file(self.side)[0]

    def downloads(self):
        return data_gets(self.a.proxy)

    def transfer(self):
        """Agent A's status of the migration's transfer ({} before it
        exists); every answer is kept to check that bytes never go back.
        """
        status = self.transfer_status(self.a, self.tid)
        if status:
            self.samples.append(status.get("bytes_done") or 0)
        return status

    def assertRunning(self, what):
        rec = self.a.bus.engine.get_migration(ADMIN, self.mid)
        self.assertEqual("running", rec["state"],
                         "%s: %s" % (what, rec.get("error")))
        return rec

    def kill_at_three_points(self, persistence=None):
        a, b = self.clouds(proxy_a=True, proxy_b=True,
                           persistence=(persistence, None))
        self.samples = []
        source = self.upload(a, data=os.urandom(SIZE), name="big",
                             tags=["crash"], x_kind="kill")
        # Held faults.  Staging: Glance A's first download is cut at CUT
        # and the ranged GETs that resume it are answered 503 until the
        # first kill.  Import: Glance B answers 503 to the upload until
        # the third kill (after the whole body, which it reads away).
        a.proxy.cut(CUT, count=1, method="GET", path=FILE)
        a.proxy.fail(503, retry_after=None, method="GET", path=FILE)
        b.proxy.fail(503, retry_after=None, method="PUT", path=FILE)
        req = a.bus.engine.migrate(
            ADMIN, b.agent_name, images=[source["id"]],
            options={"transfer_options": {"rate_limit": RATE}})
        self.mid = req["migrations"][0]["migration_id"]
        self.tid = req["migrations"][0]["transfer_id"]
        self.side = os.path.join(a.staging_dir, self.tid,
                                 "image.data.watermark")

        # 1. While staging: the export holds after the cut.
        self.wait_until(lambda: a.proxy.count("cut") == 1 and
                        a.proxy.count("fail", "GET") >= 1,
                        "staging to hold after the cut")
        self.assertRunning("before kill 1")
        a.engine.kill9()
        at = self.committed()
        self.assertTrue(0 < at <= CUT, at)
        before = self.downloads()
        self.assertEqual([(0, "cut")], before[:1])
        self.assertEqual({"fail"}, {action for _s, action in before[1:]})
        a.proxy.clear()
        a.engine.start()
        a.wait_ready()

        # 2. While transferring, staging complete.
        self.wait_until(lambda: self.committed() == SIZE and
                        0 < self.transfer().get("bytes_done", 0) <
                        SIZE * 0.9, "the transfer")
        self.assertRunning("before kill 2")
        a.restart_engine(kill=True)
        # The restarted engine resumed the export with one ranged
        # download, from the committed watermark left by the kill.
        resumed = self.downloads()[len(before):]
        self.assertEqual([(at, "pass")], resumed)

        # 3. Transfer complete, the peer import held by Glance B: the
        # peer's engine is killed during its import, and restarted.
        self.wait_until(lambda: self.transfer().get("state") == "complete",
                        "the transfer's end")
        self.kill_peer_engine_during_import()
        self.assertRunning("before kill 3")
        self.assertEqual(0, b.proxy.count("pass", "PUT"))
        a.engine.kill9()
        b.proxy.clear()
        a.engine.start()
        a.wait_ready()

        rec = self.wait_migration(self.mid)
        self.assertMigrated(rec, source)
        self.assertEqual(1, b.proxy.count("pass", "PUT"))
        self.assertGreaterEqual(b.proxy.count("fail", "PUT"), 1)
        # Nothing was exported again after the first resume.
        self.assertEqual(resumed, self.downloads()[len(before):])
        self.assertEqual(3, a.engine.log_text().count(
            "resuming outgoing migration"))
        # The agents went on through the kills: one transfer, whose bytes
        # never went back, nothing sent or received twice.
        final = self.transfer()
        self.assertEqual(sorted(self.samples), self.samples)
        self.assertEqual(final["bytes_total"], final["bytes_done"])
        self.assertEqual(0, final["bytes_resent"], final)
        self.assertEqual(1, final["attempts"], final)
        incoming = b.bus.agent().get_incoming({}, b.agent_name, self.tid)
        self.assertEqual(0, incoming["bytes_duplicate"], incoming)
        self.assertEqual(final["bytes_total"], incoming["bytes_received"])
        self.assertPeerImport(source, rec)

    def import_at_b(self):
        return [m for m in self.b.bus.engine.list_migrations(ADMIN)
                if m["transfer_id"] == self.tid]

    def kill_peer_engine_during_import(self, kills=2):
        """kill -9 engine B while it uploads into Glance B (which holds
        the upload with 503s), twice; each restarted engine resumes the
        import from its persisted flow and meets the held upload again.
        """
        b = self.b
        self.wait_until(
            lambda: [m for m in self.import_at_b()
                     if m["state"] == "running"] and
            b.proxy.count("fail", "PUT") >= 1, "engine B to be uploading")
        for kill in range(1, kills + 1):
            refused = b.proxy.count("fail", "PUT")
            b.restart_engine(kill=True)
            self.wait_until(lambda: b.proxy.count("fail", "PUT") > refused,
                            "the restarted engine B to upload again")
            self.assertEqual(kill, b.engine.log_text().count(
                "resuming incoming migration"))
            [imp] = self.import_at_b()
            self.assertEqual("running", imp["state"], imp.get("error"))

    def assertPeerImport(self, source, rec):
        """Engine B's record of the import, complete after the kill."""
        [imp] = self.wait_until(
            lambda: [m for m in self.import_at_b()
                     if m["state"] in migration.FINAL],
            "the import at B to end")
        self.assertEqual("complete", imp["state"], imp.get("error"))
        self.assertEqual(1, imp["attempt"])
        self.assertEqual(source["id"], imp["source_image_id"])
        self.assertEqual(source["os_hash_value"], imp["os_hash_value"])
        self.assertEqual(rec["peer_image"]["image_id"],
                         imp["peer_image"]["image_id"])
        self.assertEqual(source["os_hash_value"],
                         imp["peer_image"]["os_hash_value"])
        self.assertTrue(imp["peer_image"]["verified"])
        # The image B's Glance holds: the only one, its data's sha512
        # computed by Glance from what it stored.
        [image] = [dict(i) for i in self.b.admin().images.list()]
        self.assertEqual((imp["peer_image"]["image_id"], "active",
                          source["os_hash_value"], source["size"]),
                         (image["id"], image["status"],
                          image["os_hash_value"], image["size"]))

    def test_kill_at_three_points(self):
        """One migration, its source engine (SQLite persistence) killed
        while staging, while transferring and while the peer imports.
        """
        self.kill_at_three_points()

    def test_kill_at_three_points_on_mariadb(self):
        """The same with engine A's TaskFlow persistence on MariaDB."""
        self.kill_at_three_points(self.mariadb("a"))

    def test_kill_at_three_points_on_postgresql(self):
        """The same with engine A's TaskFlow persistence on PostgreSQL."""
        self.kill_at_three_points(self.postgresql("a"))


class TestFaults(migration.MigrationTestCase):

    def test_rabbitmq_restart(self):
        a, b = self.clouds(proxy_b=True)
        size = 160 * MiB
        source = self.upload(a, data=os.urandom(size), name="r",
                             tags=["bus"])
        agent = a.bus.agent()
        # The peer import is held (Glance B answers 503 to the upload,
        # after reading its body) until the broker is back: the migration
        # is still mid-way then, however long the restart took.
        b.proxy.fail(503, retry_after=None, method="PUT", path=FILE)
        req = self.a.bus.engine.migrate(
            ADMIN, b.agent_name, images=[source["id"]],
            options={"transfer_options": {"rate_limit": 32 * MiB}})
        mid = req["migrations"][0]["migration_id"]
        tid = req["migrations"][0]["transfer_id"]

        def transferring():
            status = self.transfer_status(a, tid)
            return status and \
                0 < (status.get("bytes_done") or 0) < \
                (status.get("bytes_total") or 0) and status
        sent = self.wait_until(transferring, "the transfer to be under way")
        rec = self.a.bus.engine.get_migration(ADMIN, mid)
        self.assertEqual("running", rec["state"], rec.get("error"))
        base.restart_broker(self, outage=3.0)
        # Still mid-way: running, no upload let through to Glance B, no
        # active image there.  (The import's byte count may already be
        # whole: the proxy reads each refused body to its end.)
        rec = self.wait_migration(mid, until=lambda r: True)
        self.assertEqual("running", rec["state"], rec.get("error"))
        self.assertEqual(0, b.proxy.count("pass", "PUT"))
        self.assertEqual([], [i["id"] for i in b.admin().images.list()
                              if i["status"] == "active"])
        # Then A's staged descriptor is made busy (a mount point: unlink
        # answers EBUSY) while the import is still held.
        busy = os.path.join(a.staging_dir, tid, "image.json")
        subprocess.run(["mount", "--bind", busy, busy], check=True)
        self.addCleanup(subprocess.run, ["umount", busy],
                        stderr=subprocess.DEVNULL)
        b.proxy.clear()
        rec = self.wait_migration(mid)
        self.assertMigrated(rec, source)
        # Complete all the same; the files it could not remove are kept
        # for the engine's sweep, which removes them once it can.
        self.wait_until(lambda: "could not remove the staged files of "
                        "transfer %s" % tid in a.engine.log_text(),
                        "the removal to fail", timeout=60)
        rec = self.a.bus.engine.get_migration(ADMIN, mid)
        self.assertEqual(("complete", "pending"),
                         (rec["state"], rec["cleanup"]))
        self.assertIn("%s/image.json" % tid, a.staged_files())
        subprocess.run(["umount", busy], check=True)
        self.wait_until(lambda: self.a.bus.engine.get_migration(
            ADMIN, mid)["cleanup"] is None, "the sweep", timeout=60)
        self.assertEqual([], [f for f in a.staged_files()
                              if f.startswith(tid)])
        self.assertIn("left when migration %s ended complete" % mid,
                      a.engine.log_text())
        # The agent's transfer went on through the restart: one attempt,
        # nothing sent twice.
        status = agent.get_transfer({}, a.agent_name, tid)
        self.assertGreater(status["bytes_done"], sent["bytes_done"])
        self.assertEqual(status["bytes_total"], status["bytes_done"])
        self.assertEqual(0, status["bytes_resent"], status)
        self.assertEqual(1, status["attempts"], status)
        self.assertEqual(1, b.proxy.count("pass", "PUT"))

    def test_peer_engine_down_twice(self):
        # Before: the source said "running", its numbers frozen, and
        # nothing of the peer; neither timeline had a word of it.
        a, b = self.clouds(proxy_b=True)
        source = self.upload(a, data=os.urandom(32 * MiB), name="quiet",
                             tags=["quiet"])
        # The peer import is held (Glance B answers 503 to the upload)
        # until both faults are over: engine B reports it, beating.
        b.proxy.fail(503, retry_after=None, method="PUT", path=FILE)
        req = a.bus.engine.migrate(ADMIN, b.agent_name,
                                   images=[source["id"]])
        mid = req["migrations"][0]["migration_id"]
        tid = req["migrations"][0]["transfer_id"]

        def record():
            return a.bus.engine.get_migration(ADMIN, mid)

        def reported():
            imp = record()["stages"].get("import") or {}
            return imp.get("state") in ("uploading", "transferring")
        self.wait_until(lambda: b.proxy.count("fail", "PUT") >= 1 and
                        reported(), "engine B to report its upload")
        downs = []
        for fault in (1, 2):
            down = time.time()
            b.engine.kill9()
            rec = self.wait_until(
                lambda: (lambda r: r.get("peer_silent_since") and r)(
                    record()), "A to see the peer not answering",
                timeout=60)
            self.assertEqual("running", rec["state"], rec.get("error"))
            since = rec["peer_silent_since"]
            # Since the last report it had, before the kill.
            when = datetime.datetime.fromisoformat(since).replace(
                tzinfo=datetime.timezone.utc).timestamp()
            self.assertLess(when, down + 1)
            self.assertGreater(when, down - 10)
            self.assertEqual(since[:19], views.migration(rec)[
                "peer_silent_since"][:19])
            downs.append(since)
            b.engine.start()
            b.wait_ready()
            self.wait_until(lambda: record().get("peer_silent_since") is
                            None, "A to hear from the peer again",
                            timeout=60)
        b.proxy.clear()
        rec = self.wait_migration(mid)
        self.assertMigrated(rec, source)
        # Both timelines have the loss and the resume, twice.
        events = [(e["event"], e["message"]) for e in rec["events"]
                  if e["event"] in ("peer-lost", "peer-back")]
        self.assertEqual(
            [("peer-lost", "the peer has not answered since %s" % since)
             for since in downs],
            [e for e in events if e[0] == "peer-lost"])
        self.assertEqual(["peer-lost", "peer-back"] * 2,
                         [e for e, _m in events])
        [imp] = [m for m in b.bus.engine.list_migrations(ADMIN)
                 if m["transfer_id"] == tid]
        imp = b.bus.engine.get_migration(ADMIN, imp["migration_id"])
        self.assertEqual("complete", imp["state"], imp.get("error"))
        self.assertEqual(["interrupted", "resumed"] * 2,
                         [e["event"] for e in imp["events"]
                          if e["event"] in ("interrupted", "resumed")])

    def test_glance_b_503_then_429(self):
        a, b = self.clouds(proxy_b=True)
        source = self.upload(a, data=os.urandom(48 * MiB), name="busy",
                             tags=["busy"])
        # By count, whenever engine B gets there: creating the image is
        # refused with 503, then 429 (Retry-After: 1); the upload twice
        # with 503, then twice with 429 (Retry-After: 1).
        b.proxy.fail(503, count=1, retry_after=None, method="POST",
                     path=r"^/v2/images$")
        b.proxy.fail(429, count=1, retry_after=1, method="POST",
                     path=r"^/v2/images$")
        b.proxy.fail(503, count=2, retry_after=None, method="PUT",
                     path=FILE)
        b.proxy.fail(429, count=2, retry_after=1, method="PUT", path=FILE)
        req = self.a.bus.engine.migrate(ADMIN, b.agent_name,
                                        images=[source["id"]])
        rec = self.wait_migration(req["migrations"][0]["migration_id"])
        peer = self.assertMigrated(rec, source)
        self.assertEqual(2, b.proxy.count("fail", "POST"))
        self.assertEqual(1, b.proxy.count("pass", "POST"))
        self.assertEqual(4, b.proxy.count("fail", "PUT"))
        self.assertEqual(1, b.proxy.count("pass", "PUT"))
        log = b.engine.log_text()
        # Metadata calls: keystoneauth1's retries (glanceclient).
        meta = re.findall(r"Retriable status code (\d+)\. Retrying in "
                          r"([0-9.]+)s\. (\d+) retries left", log)
        self.assertEqual([("503", "8"), ("429", "7")],
                         [(code, left) for code, _d, left in meta], meta)
        self.assertEqual("1.0", meta[1][1])
        # The upload: ImageService's own back-off.
        upload = re.findall(
            r"b image service: upload of image %s \(queued\): HTTP (\d+); "
            r"retry (\d+) of 8 in ([0-9.]+) s" % re.escape(peer["id"]),
            log)
        self.assertEqual([("503", "1"), ("503", "2"), ("429", "3"),
                          ("429", "4")],
                         [(code, n) for code, n, _d in upload], upload)
        # Exponential with jitter after a 503, Retry-After after a 429.
        self.assertTrue(0.2 <= float(upload[0][2]) <= 0.5, upload)
        self.assertTrue(0.5 <= float(upload[1][2]) <= 1.0, upload)
        self.assertEqual(["1.0", "1.0"], [d for _c, _n, d in upload[2:]])

    def test_retry_after_a_failed_peer_import(self):
        """The peer import fails for good, and so does the migration; a
        new request for the same image and peer is the next attempt of
        the same transfer: nothing is exported or sent again, the peer
        imports again from the files it already has.
        """
        a, b = self.clouds(proxy_a=True, proxy_b=True)
        size = 16 * MiB
        source = self.upload(a, data=os.urandom(size), name="again",
                             tags=["retry"], x_kind="retry")
        options = {"mode": "serial"}    # the import starts after the data
        # Glance B refuses every upload, with Retry-After: 0 so that the
        # engine's retries (and the import's attempts) run out at once.
        b.proxy.fail(503, retry_after=0, method="PUT", path=FILE)
        req = a.bus.engine.migrate(ADMIN, b.agent_name,
                                   images=[source["id"]], options=options)
        [first] = req["migrations"]
        self.assertEqual(1, first["attempt"])
        rec = self.wait_migration(first["migration_id"])
        self.assertEqual("failed", rec["state"])
        self.assertIn("import at %s failed" % b.agent_name, rec["error"])
        refused = b.proxy.count("fail", "PUT")
        self.assertGreater(refused, 1)
        self.assertEqual(0, b.proxy.count("pass", "PUT"))
        [imp] = b.bus.engine.list_migrations(ADMIN)
        self.assertEqual("failed", imp["state"])
        self.assertEqual(first["transfer_id"], imp["transfer_id"])
        # The half-imported image is gone.
        self.assertEqual([], [dict(i) for i in b.admin().images.list()])
        agent_a, agent_b = a.bus.agent(), b.bus.agent()
        sent = agent_a.get_transfer({}, a.agent_name, first["transfer_id"])
        self.assertEqual("complete", sent["state"])
        received = agent_b.get_incoming({}, b.agent_name,
                                        first["transfer_id"])
        exports = data_gets(a.proxy)
        self.assertEqual([(0, "pass")], exports)

        b.proxy.clear()
        req = a.bus.engine.migrate(ADMIN, b.agent_name,
                                   images=[source["id"]], options=options)
        [second] = req["migrations"]
        self.assertNotEqual(first["migration_id"], second["migration_id"])
        self.assertFalse(second.get("reused"))
        self.assertEqual(first["transfer_id"], second["transfer_id"])
        self.assertEqual(2, second["attempt"])
        rec = self.wait_migration(second["migration_id"])
        self.assertMigrated(rec, source)
        self.assertEqual(2, rec["attempt"])
        self.assertEqual(1, b.proxy.count("pass", "PUT"))
        self.assertEqual(refused, b.proxy.count("fail", "PUT"))
        # Not exported again: no download at all from Glance A.
        self.assertEqual(exports, data_gets(a.proxy))
        # Not sent again.
        now = agent_a.get_transfer({}, a.agent_name, first["transfer_id"])
        for key in ("bytes_done", "bytes_sent", "bytes_resent", "attempts"):
            self.assertEqual(sent[key], now[key], key)
        now_b = agent_b.get_incoming({}, b.agent_name,
                                     first["transfer_id"])
        for key in ("bytes_received", "bytes_duplicate", "sessions"):
            self.assertEqual(received[key], now_b[key], key)
        # B imported the same transfer again, as attempt 2.  Its record
        # completes once its clean-up is done, which may be after A's.
        [imp] = self.wait_until(
            lambda: [m for m in b.bus.engine.list_migrations(ADMIN)
                     if m["state"] in migration.FINAL],
            "the import at B to end")
        self.assertEqual(("complete", 2), (imp["state"], imp["attempt"]))

    def test_corrupt_export_found_by_the_sink_then_exported_again(self):
        """One byte of Glance A's answer is inverted on its way to engine
        A.  The export does not hash (the sink checks every byte against
        os_hash_value): the sink finds the mismatch, engine A hashes its
        staged copy, finds it wrong and invalidates it.  The retry exports
        again into the same file and the transfer sends it from its start:
        the peer's image is bit-exact.  With ``export_sha512 = always`` the
        same fault fails the export itself.
        """
        a, b = self.clouds(proxy_a=True)
        size = 48 * MiB
        source = self.upload(a, data=os.urandom(size), name="flipped",
                             tags=["flip"])
        a.proxy.flip(20 * MiB, count=1, method="GET", path=FILE)
        req = a.bus.engine.migrate(ADMIN, b.agent_name, images=[source["id"]])
        [first] = req["migrations"]
        rec = self.wait_migration(first["migration_id"])
        self.assertEqual("failed", rec["state"])
        self.assertIn("the staged copy (invalidated", rec["error"])
        self.assertIn(source["os_hash_value"], rec["error"])
        self.assertEqual(1, a.proxy.count("flip"))
        # The sink found it, after the source had sent the whole file.
        tid = first["transfer_id"]
        sent = a.bus.agent().get_transfer({}, a.agent_name, tid)
        self.assertEqual("failed", sent["state"])
        data = [f for f in sent["files"]
                if f["name"].endswith("/image.data")]
        self.assertEqual(["hash_mismatch"], [f["code"] for f in data], sent)
        self.assertEqual([], [i["id"] for i in b.admin().images.list()
                              if i["status"] == "active"])
        # Invalidated: the watermark is back at 0 and says failed.
        side = os.path.join(a.staging_dir, tid, "image.data.watermark")
        self.assertEqual((0, True), dataset.read_watermark_file(side)[:2])

        req = a.bus.engine.migrate(ADMIN, b.agent_name, images=[source["id"]])
        [second] = req["migrations"]
        self.assertEqual((tid, 2), (second["transfer_id"],
                                    second["attempt"]))
        rec = self.wait_migration(second["migration_id"])
        self.assertMigrated(rec, source)
        # Exported again from its start, whole, through the same proxy.
        self.assertEqual([(0, "flip"), (0, "pass")], data_gets(a.proxy))

        # export_sha512 = always: the export finds the same fault itself.
        a.engine.stop()
        a.staging["export_sha512"] = "always"
        a.start_engine()
        a.wait_ready()
        other = self.upload(a, data=os.urandom(size), name="caught",
                            tags=["flip"])
        a.proxy.flip(20 * MiB, count=1, method="GET", path=FILE)
        req = a.bus.engine.migrate(ADMIN, b.agent_name, images=[other["id"]])
        rec = self.wait_migration(req["migrations"][0]["migration_id"])
        self.assertEqual("failed", rec["state"])
        self.assertIn("the exported data has os_hash_value", rec["error"])
        self.assertEqual(2, a.proxy.count("flip"))

    def test_bad_requests(self):
        a, b = self.clouds()
        engine = self.a.bus.engine
        good = self.upload(a, data=os.urandom(MiB), name="good")
        queued = dict(a.admin().images.create(
            name="empty", disk_format="raw", container_format="bare"))
        images_at_a = len(list(a.admin().images.list()))
        missing = "0" * 32
        cases = [
            # (exception, arguments, what the message must name)
            (exception.ImageNotFound, {"images": [missing]}, [missing]),
            (exception.ImageNotActive, {"images": [good["id"],
                                                   queued["id"]]},
             [queued["id"], "queued"]),
            (exception.InvalidInput, {"images": "not-a-list"},
             ["images"]),
            (exception.InvalidInput, {"images": [good["id"]],
                                      "options": {"bogus": 1}},
             ["bogus"]),
            (exception.InvalidInput, {"images": [good["id"]],
                                      "options": {"visibility": "all"}},
             ["visibility", "all"]),
            # The message names the argument and what it may hold (not
            # the unknown key itself).
            (exception.InvalidInput, {"selector": {"owner": "x"}},
             ["selector", "'tag'", "'properties'"]),
            (exception.InvalidInput, {}, ["images", "selector"]),
        ]
        for exc, kwargs, names in cases:
            err = self.assertRaises(exc, engine.migrate, ADMIN, b.agent_name,
                                    **kwargs)
            for name in names:
                self.assertIn(name, str(err), kwargs)
        err = self.assertRaises(exception.PeerNotFound, engine.migrate, ADMIN,
                                "nowhere", images=[good["id"]])
        self.assertIn("nowhere", str(err))
        self.assertIn(b.agent_name, str(err))
        # A payload the API does not know at all.
        err = self.assertRaises(
            exception.InvalidInput, engine.client.call, ADMIN,
            "migrate",
            peer=5, images=None, selector=None, options=None,
            request_id=None, evil="x")
        self.assertIn("evil", str(err))
        err = self.assertRaises(
            exception.InvalidInput, engine.client.call, ADMIN,
            "migrate",
            peer={"x": 1}, images=[good["id"]], selector=None,
            options=None, request_id=None)
        self.assertIn("peer", str(err))
        # Nothing was created anywhere, and the engines still serve.
        self.assertEqual([], engine.list_migrations(ADMIN))
        self.assertEqual([], b.bus.engine.list_migrations(ADMIN))
        self.assertEqual([], b.bus.agent().list_incoming({}, b.agent_name))
        self.assertEqual([], a.bus.agent().list_transfers({}, a.agent_name))
        self.assertEqual([], a.staged_files())
        self.assertEqual([], b.staged_files())
        self.assertEqual([], list(b.admin().images.list()))
        self.assertEqual(images_at_a, len(list(a.admin().images.list())))
        self.assertEqual(a.engine_name, engine.ping({})["host"])
        self.assertEqual(b.engine_name, b.bus.engine.ping({})["host"])
        self.refused_transfers_fail_fast()

    def refused_transfers_fail_fast(self):
        """Pipelined migrations whose transfer agent A refuses (an option
        it does not know) fail within seconds, their exports stopped,
        rather than after stall_timeout (120 s here).
        """
        a, b = self.a, self.b
        for i in range(3):
            self.upload(a, data=os.urandom(96 * MiB), name="refused-%d" % i,
                        tags=["refused"])
        t0 = time.monotonic()
        req = a.bus.engine.migrate(
            ADMIN, b.agent_name, selector={"tag": "refused"},
            options={"mode": "pipelined",
                     "transfer_options": {"no_such_option": 1}})
        recs = self.wait_request(req["request_id"], timeout=45)
        self.assertLess(time.monotonic() - t0, 45)
        for rec in recs:
            self.assertEqual("failed", rec["state"])
            self.assertIn("unknown option 'no_such_option'", rec["error"])
            self.assertEqual("failed", rec["stages"]["transfer"]["state"])
            self.assertIn(rec["stages"]["export"]["state"],
                          ("stopped", "complete"), rec["stages"])
            self.assertNotEqual("active", (rec["stages"].get("import") or
                                           {}).get("state"))
        self.assertEqual([], list(b.admin().images.list()))
        self.assertEqual([], b.bus.engine.list_migrations(ADMIN))
