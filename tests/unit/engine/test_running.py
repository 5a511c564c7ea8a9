"""A running migration's record while its peer does not answer, and
after its engine restarted (issue 37 item 5).
"""

import shutil
import tempfile
import time

from dtn_migrate.api import views
from dtn_migrate.engine import persistence
from dtn_migrate.engine import resources
from dtn_migrate.engine import running
from tests.unit import testcase

MID = "a" * 32


class _Running(running.Running):
    def __init__(self, store):
        self.store = store
        self.res = type("Res", (), {"live": {}})()
        self.running = {}


class TestPeerSilence(testcase.TestCase):
    def setUp(self):
        super().setUp()
        tmp = tempfile.mkdtemp(prefix="dtnm-running-")
        self.addCleanup(shutil.rmtree, tmp, True)
        self.store = persistence.Store("sqlite:///%s/e.sqlite" % tmp)
        self.addCleanup(self.store.close)
        self.store.create(MID, {"state": "running", "direction": "outgoing",
                                "mode": "pipelined", "size": 10})
        self.engine = _Running(self.store)
        self.live = resources.Live()
        self.engine.res.live[MID] = self.live
        self.engine.running[MID] = None

    def test_the_record_says_since_when_and_the_timeline_has_both(self):
        # Before: the record stayed "running" with no word of it.
        since = time.time() - 30
        self.engine._peer_changed(MID, since)
        row = self.store.db.migration_get(MID)
        shown = views.migration(row)["peer_silent_since"]
        self.assertEqual(time.strftime("%Y-%m-%dT%H:%M:%S",
                                       time.gmtime(since)), shown[:19])
        self.assertTrue(shown.endswith("Z"))
        self.engine._peer_changed(MID, None)
        self.assertIsNone(
            views.migration(self.store.db.migration_get(MID))[
                "peer_silent_since"])
        events = [(e["stage"], e["event"], e["message"])
                  for e in self.store.events(MID)]
        lost, back = events[-2:]
        self.assertEqual(("import", "peer-lost"), lost[:2])
        self.assertIn("has not answered since %s" % shown[:19], lost[2])
        self.assertEqual(("import", "peer-back", "the peer answers again"),
                         back)

    def test_live_tells_only_changes(self):
        seen = []
        self.live.on_peer = seen.append
        self.live.peer_silent(5.0)
        self.live.peer_silent(5.0)
        self.live.peer_silent(None)
        self.live.peer_silent(None)
        self.assertEqual([5.0, None], seen)
