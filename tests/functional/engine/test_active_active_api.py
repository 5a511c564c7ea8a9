"""Three engines behind the API (issue 39): cloud A's three
dtn-migrate-engine processes share its MariaDB and a jobboard on a real
ZooKeeper, behind A's dtn-migrate-api; A's Glance publishes its
notifications on A's bus, and A's agent reaches B's through a relay that
can cut the DTN link.

* 30 migrations asked for at once through the API (concurrent POSTs)
  each run once: one claim each (epoch 1), one image of each on B,
  spread over the engines.
* Each engine listens to Glance's notifications in the same pool (one
  engine hears each event); the engine elected through tooz runs the
  scans and grades the recovery points.  So one Glance event makes one
  replication, not three, and a change of a policy's RPO state is
  notified once.
"""

import collections
from concurrent import futures
import re
import time

from testtools import content

from devcloud import coordination
from devcloud import dbserver
from devcloud import pair
import devcloud
from dtn_migrate.db import api as db_api
from tests.functional.api import harness as api
from tests.functional.api import test_protection
from tests.functional import base
from tests.functional.migration import scope as class_scope

MiB = 1 << 20
ENGINES = 3
#: The relay's cut (s): A's agent reports B unreachable meanwhile.
CUT = 20


class TestThreeEngines(test_protection.ProtectionTestCase):

    @classmethod
    def setUpClass(cls):
        super(api.ApiPairTestCase, cls).setUpClass()
        cls.scope = class_scope.ClassScope.opened(
            "dtnm-aaprot-", (devcloud.available(), base.Broker.available(),
                             dbserver.available("mariadb"),
                             coordination.available("zookeeper")),
            cls._start_clouds)

    @classmethod
    def _start_clouds(cls, scope):
        cls.mariadb = scope._started(dbserver.MariaDB())
        cls.zookeeper = scope._started(coordination.ZooKeeper())
        jobboard = {"jobboard_enabled": "true",
                    "jobboard_backend_port": str(cls.zookeeper.port),
                    "jobboard_zookeeper_session_timeout": "4"}

        def on_zookeeper(a, b):
            a.extra = dict(a.extra, task_flow=jobboard)

        cls.a, cls.b = api.start_pair(
            scope, cls.mariadb.database("dtnm_aaprot_a"), notifications=True,
            relay=True, extra=test_protection.PROTECTION,
            prepare=on_zookeeper)
        cls.a.bus.listen()
        a = cls.a
        cls.engines = [a.engine]
        for i in range(1, ENGINES):
            engine = pair.Engine(
                scope.workdir, "%s-%d" % (a.engine_name, i), a.broker.url(),
                a.agent_name, a.glance_auth(), a.staging, a.database,
                extra=a.engine_extra())
            scope.addCleanup(engine.discard)
            engine.start()
            cls.engines.append(engine)
        for engine in cls.engines:
            engine.wait_ready(a.bus.engine)

    def engine_logs(self):
        """{engine name: its log}, of A's three engines."""
        logs = {}
        for engine in self.engines:
            with open(engine.log, errors="replace") as f:
                logs[engine.name] = f.read()
        return logs

    def heard(self, event_type, image_id):
        """The message ids of Glance's ``event_type`` notifications of
        ``image_id`` that A's engines handled, once per engine that did.
        """
        found = re.compile(r"%s of image %s from \S+ \(message (\S+)\)"
                           % (re.escape(event_type), image_id))
        return [m for log in self.engine_logs().values()
                for m in found.findall(log)]

    def rpo_notices(self, policy_id):
        return [p for e, p in self.a.bus.notifications
                if e == "dtn_migrate.policy.rpo_changed" and
                p.get("policy_id") == policy_id]

    def assertNoticedOnce(self, policy):
        """Each change of ``policy``'s RPO state was notified once (one
        engine grades): each notice starts where the one before ended.
        Returns the states notified.
        """
        notices = self.rpo_notices(policy["id"])
        for before, after in zip(notices, notices[1:]):
            self.assertEqual(before["rpo_state"], after["previous_state"],
                             notices)
        return [n["rpo_state"] for n in notices]

    def test_one_replication_per_event_and_one_rpo_notice(self):
        tag = self.tag()
        policy = self.create_policy("aa-%s" % tag, tag, "--rpo", "1")
        self.a.relay.cut(down_for=CUT)
        source = self.upload(MiB, tags=[tag])
        self.wait_until(
            lambda: self.rest_policy(policy["id"])["rpo"]["state"] ==
            "at-risk", "at-risk", timeout=CUT, interval=0.5)
        # Every engine's RPO timer ran a few times meanwhile.
        time.sleep(3)
        self.assertEqual("at-risk", self.assertNoticedOnce(policy)[-1])

        # The link comes back by itself: one replication, and one
        # notice of the recovery point back to ok.
        self.wait_replicated(policy["id"], [source["id"]], timeout=240)
        self.wait_until(
            lambda: self.rest_policy(policy["id"])["rpo"]["state"] == "ok",
            "ok", timeout=60, interval=0.5)
        time.sleep(3)
        self.assertEqual(["at-risk", "ok"],
                         self.assertNoticedOnce(policy)[-2:])
        self.assertReplicaIntact(source)

        # Property changes: one engine hears each of Glance's events
        # (their message ids); none sends the image again.
        client = self.a.glance.client(
            session=self.a.users["alice"].session())
        for note in ("one", "two"):
            client.images.update(source["id"], x_note=note)
        updates = self.wait_until(
            lambda: (lambda h: h if len(h) >= 2 else None)(
                self.heard("image.update", source["id"])),
            "the engines to hear both updates", timeout=60)
        time.sleep(2)
        heard = self.heard("image.update", source["id"])
        self.assertEqual(len(set(heard)), len(heard), updates)
        self.assertEqual(1, len(self.heard("image.activate", source["id"])))
        [migration] = self.migrations_of(source["id"])
        self.assertEqual("complete", migration["state"])
        self.assertEqual(1, self.policy(policy["id"])["images_replicated"])

    def test_30_migrations_at_once_through_the_api(self):
        sources = [self.upload(256 * 1024 + i, name="aa-%s-%02d" % (
            self.tag(), i)) for i in range(30)]
        with futures.ThreadPoolExecutor(10) as pool:
            recs = list(pool.map(
                lambda s: self.start_migration(s["id"]), sources))
        owners = collections.Counter()
        db = db_api.Database(connection=self.a.database)
        self.addCleanup(db.dispose)
        peer = self.b.glance.client(session=self.b.users["admin"].session())
        for source, rec in zip(sources, recs):
            self.assertMigrated(self.wait_final(rec["id"]), source)
            row = db.migration_get(rec["id"])
            self.assertEqual(1, row["epoch"], row)
            owners[row["owner"]] += 1
            self.assertEqual(1, len(list(peer.images.list(
                filters={"name": source["name"]}))), source["name"])
        self.addDetail("owners", content.text_content(repr(owners)))
        self.assertEqual({e.name for e in self.engines}, set(owners), owners)
