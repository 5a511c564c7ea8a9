"""What the engine's unit tests share: an engine's configuration, and
two engines (source and peer) with in-memory Glances and fake agents.
"""

import os
import shutil
import tempfile
import time

from oslo_config import cfg

from dtn_migrate.common import states
from dtn_migrate.conf import database as database_conf
from dtn_migrate.conf import engine as engine_conf
from dtn_migrate.conf import staging as staging_conf
from dtn_migrate.engine import migrations
from dtn_migrate.engine import persistence
from dtn_migrate.engine import resources
from dtn_migrate import exception
from dtn_migrate.staging import localfs
from tests.unit.engine import fakes
from tests.unit import testcase


def cancel(engine, migration_id):
    """Cancel a migration unless it ended meanwhile."""
    try:
        engine.cancel(migration_id)
    except exception.MigrationStateConflict:
        pass


def make_conf(host, db):
    conf = cfg.ConfigOpts()
    database_conf.register_opts(conf)
    engine_conf.register_opts(conf)
    staging_conf.register_opts(conf)
    conf([], project="dtn-migrate-test")
    conf.set_override("agent_host", host, "engine")
    conf.set_override("connection", db, "database")
    conf.set_override("poll_interval", 0.05, "engine")
    conf.set_override("progress_interval", 0.5, "engine")
    conf.set_override("stall_timeout", 20, "engine")
    conf.set_override("block_size", 65536, "staging")
    conf.set_override("commit_interval_bytes", 256 << 10, "staging")
    conf.set_override("free_space_margin", "0", "staging")
    return conf


class EngineTestCase(testcase.TestCase):
    """Engines ``a`` (source) and ``b`` (peer) on fake agents."""

    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="dtnm-engine-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        roots = {}
        for host in ("dtn-a", "dtn-b"):
            roots[host] = os.path.join(self.tmp, host)
            os.makedirs(roots[host])
        self.agents = fakes.FakeAgents(roots)
        self.addCleanup(self.agents.close)
        self.glance_a = fakes.FakeImages("a")
        self.glance_b = fakes.FakeImages("b")
        self.a = self.engine("dtn-a", self.glance_a)
        self.b = self.engine("dtn-b", self.glance_b)
        self.agents.engines["dtn-b"] = self.b
        self.addCleanup(self.quiesce)

    def quiesce(self):
        """Leave no flow (and no copy thread) running after a test."""
        # An import may start after the first pass (the fake agent tells
        # engine B late): cancel until both engines are idle.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for engine in (self.a, self.b):
                for rec in engine.list():
                    if rec["state"] in states.ACTIVE_STATES:
                        cancel(engine, rec["migration_id"])
            if all(engine.wait_idle(0.5) for engine in (self.a, self.b)):
                return
        self.fail("migrations still running after the test")

    def engine(self, host, images, db=None, **staging):
        db = db or "sqlite:///%s/%s.sqlite" % (self.tmp, host)
        conf = make_conf(host, db)
        for key, value in staging.items():
            conf.set_override(key, value, "staging")
        store = persistence.Store(db)
        self.addCleanup(store.close)
        res = resources.Resources(
            conf, images, self.agents,
            localfs.LocalBackend(self.agents.roots[host]))
        return migrations.Migrations(conf, store, res)

    def staged(self, host="dtn-a"):
        return sorted(os.path.relpath(os.path.join(d, f),
                                      self.agents.roots[host])
                      for d, _s, fs in os.walk(self.agents.roots[host])
                      for f in fs)

    def image(self, size=3 << 20, **fields):
        data = os.urandom(size)
        fields.setdefault("tags", ["dr", "gold"])
        fields.setdefault("os_distro", "debian")
        return self.glance_a.add(data, **fields)

    def run_request(self, images, **options):
        req = self.a.request("b", images=images, options=options or None)
        self.assertTrue(self.a.wait_idle(60))
        self.assertTrue(self.b.wait_idle(60))
        return [self.a.get(m["migration_id"]) for m in req["migrations"]]

    def latest(self, image_id):
        """The latest migration of ``image_id`` to b."""
        return max((r for r in self.a.list() if r["image_id"] == image_id),
                   key=lambda r: r["created_at"])

    def assertImported(self, source):
        found = self.glance_b.find("dtn_migrate_transfer_id",
                                   self.latest(source["id"])["transfer_id"])
        self.assertEqual(1, len(found))
        peer = found[0]
        self.assertEqual(source["os_hash_value"], peer["os_hash_value"])
        self.assertEqual(sorted(source["tags"]), peer["tags"])
        self.assertEqual(source["os_distro"], peer["os_distro"])
        self.assertEqual(self.glance_a.data[source["id"]],
                         self.glance_b.data[peer["id"]])
        return peer
