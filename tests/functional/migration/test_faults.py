"""Faults during migrations between two real clouds: engine kill -9 at
three points, a RabbitMQ restart, Glance B answering 503/429, bad
requests.
"""

import os
import subprocess
import time


from dtn_migrate import exception
from dtn_migrate.transfer import dataset
from tests.functional import migration

MiB = 1 << 20
SIZE = 384 * MiB
RATE = 48 * MiB           # DTN link rate limit: the transfer lags export


def _range_start(header):
    if not header:
        return 0
    return int(header.split("=", 1)[1].split("-", 1)[0])


class TestEngineCrash(migration.MigrationTestCase):
    """kill -9 the source engine; the restarted engine resumes from its
    persisted flow without exporting staged bytes again.
    """

    def start(self):
        a, b = self.clouds(proxy_a=True)
        self.source = self.upload(a, data=os.urandom(SIZE), name="big")
        req = self.a.bus.engine.migrate(
            {}, b.agent_name, images=[self.source["id"]],
            options={"transfer_options": {"rate_limit": RATE}})
        self.rec = req["migrations"][0]
        self.tid = self.rec["transfer_id"]
        self.side = os.path.join(a.staging_dir, self.tid,
                                 "image.data.watermark")
        return a, b

    def committed(self):
        return dataset.read_watermark_file(self.side)[0]

    def wait(self, cond, what, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = cond()
            if value:
                return value
            time.sleep(0.01)
        self.fail("timed out waiting for %s" % what)

    def downloads(self):
        return [(_range_start(r)) for m, p, r in list(self.a.proxy.requests)
                if m == "GET" and p.endswith("/file")]

    def finish(self):
        rec = self.wait_migration(self.rec["migration_id"])
        self.assertEqual("complete", rec["state"], rec.get("error"))
        peer = self.peer_image(self.source, self.tid)
        self.assertEqual(self.source["os_hash_value"], peer["os_hash_value"])
        return rec

    def test_kill_at_three_points(self):
        """One migration, its source engine killed while staging, while
        transferring and while the peer imports.
        """
        a, _b = self.start()
        agent = a.bus.agent()

        def transfer():
            try:
                return agent.get_transfer({}, a.agent_name, self.tid)
            except exception.TransferNotFound:
                return {}

        # 1. While staging: the restarted engine resumes the export with
        # one ranged download from the committed watermark.
        at = self.wait(lambda: (16 * MiB <= self.committed() < SIZE - 64 *
                                MiB) and self.committed(), "staging")
        a.restart_engine(kill=True)
        before = len(self.downloads())
        # 2. While transferring, staging complete.
        self.wait(lambda: self.committed() == SIZE and
                  0 < transfer().get("bytes_done", 0) < SIZE * 0.9,
                  "the transfer")
        resumed = self.downloads()[before:]
        self.assertEqual(1, len(resumed), resumed)
        self.assertGreaterEqual(resumed[0], at)
        a.restart_engine(kill=True)
        # 3. Once the transfer is complete (the peer imports).
        self.wait(lambda: transfer().get("state") == "complete",
                  "the transfer's end")
        a.restart_engine(kill=True)
        self.finish()
        # Nothing was exported again after the first resume.
        self.assertEqual(resumed, self.downloads()[before:])
        self.assertEqual(3, a.engine.log_text().count(
            "resuming outgoing migration"))


class TestFaults(migration.MigrationTestCase):

    def test_rabbitmq_restart(self):
        a, b = self.clouds()
        source = self.upload(a, data=os.urandom(160 * MiB), name="r")
        req = self.a.bus.engine.migrate(
            {}, b.agent_name, images=[source["id"]],
            options={"transfer_options": {"rate_limit": 32 * MiB}})
        mid = req["migrations"][0]["migration_id"]
        self.wait_migration(mid, until=lambda r: r["state"] == "running")
        time.sleep(1.0)
        subprocess.run(["rabbitmqctl", "-q", "stop_app"], check=True,
                       timeout=120)
        time.sleep(3.0)
        subprocess.run(["rabbitmqctl", "-q", "start_app"], check=True,
                       timeout=120)
        rec = self.wait_migration(mid)
        self.assertEqual("complete", rec["state"], rec.get("error"))
        peer = self.peer_image(source, rec["transfer_id"])
        self.assertEqual(source["os_hash_value"], peer["os_hash_value"])

    def test_glance_b_503_then_429(self):
        a, b = self.clouds(proxy_b=True)
        source = self.upload(a, data=os.urandom(48 * MiB), name="busy")
        b.proxy.fail(503, seconds=6, retry_after=None)
        b.proxy.fail(429, count=3, retry_after=1)
        req = self.a.bus.engine.migrate({}, b.agent_name,
                                        images=[source["id"]])
        rec = self.wait_migration(req["migrations"][0]["migration_id"])
        self.assertEqual("complete", rec["state"], rec.get("error"))
        self.assertGreater(b.proxy.count("fail"), 3)
        peer = self.peer_image(source, rec["transfer_id"])
        self.assertEqual(source["os_hash_value"], peer["os_hash_value"])
        self.assertIn("retry", b.engine.log_text().lower())

    def test_bad_requests(self):
        a, b = self.clouds()
        engine = self.a.bus.engine
        good = self.upload(a, data=os.urandom(MiB), name="good")
        queued = dict(a.admin().images.create(
            name="empty", disk_format="raw", container_format="bare"))
        cases = [
            (exception.ImageNotFound, {"images": ["0" * 32]}),
            (exception.ImageNotActive, {"images": [good["id"],
                                                   queued["id"]]}),
            (exception.InvalidInput, {"images": "not-a-list"}),
            (exception.InvalidInput, {"images": [good["id"]],
                                      "options": {"bogus": 1}}),
            (exception.InvalidInput, {"images": [good["id"]],
                                      "options": {"visibility": "all"}}),
            (exception.InvalidInput, {"selector": {"owner": "x"}}),
            (exception.InvalidInput, {}),
        ]
        for exc, kwargs in cases:
            err = self.assertRaises(exc, engine.migrate, {}, b.agent_name,
                                    **kwargs)
            self.assertTrue(str(err), kwargs)
        err = self.assertRaises(exception.PeerNotFound, engine.migrate, {},
                                "nowhere", images=[good["id"]])
        self.assertIn("nowhere", str(err))
        self.assertIn(b.agent_name, str(err))
        # A payload the API does not know at all.
        self.assertRaises(exception.InvalidInput, engine.client.call, {},
                          "migrate", peer=5, images=None, selector=None,
                          options=None, request_id=None, evil="x")
        self.assertRaises(exception.InvalidInput, engine.client.call, {},
                          "migrate", peer={"x": 1}, images=[good["id"]],
                          selector=None, options=None, request_id=None)
        # Nothing was created anywhere, and the engine still serves.
        self.assertEqual([], engine.list_migrations({}))
        self.assertEqual([], list(b.admin().images.list()))
        self.assertEqual(a.engine_name, engine.ping({})["host"])
