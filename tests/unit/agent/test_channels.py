"""Report channels: one kept-open REPORT connection per transfer a peer
imports, over which its sink pushes each new report; and the agent's
pushes to its engine (watermarks, transfer status, reports).
"""

import threading
import uuid

import oslo_messaging as messaging

from dtn_migrate.agent import channels
from dtn_migrate.agent import manager
from dtn_migrate import exception
from dtn_migrate.transfer import report as report_mod
from tests.unit.agent import test_reports
from tests.unit.agent import test_service
from tests.unit import utils as test_utils

REPORT = test_reports.REPORT


class TestReportChannels(test_service.ServiceTestCase):
    def setUp(self):
        super().setUp()
        self.tid = uuid.uuid4().hex

    def here(self, east, **kwargs):
        peers = test_reports.FakePeers(east.sink.port)
        outgoing = test_reports.FakeOutgoing(peers, self.cfg)
        self.reports = test_utils.Recorder()
        chans = channels.ReportChannels(outgoing, on_report=self.reports,
                                        retry=0.1, **kwargs)
        self.addCleanup(chans.close)
        return manager.AgentManager("here", outgoing, None,
                                    channels=chans)

    def connections(self, east):
        return east.sink.admission.counts()["connections"]

    def test_reports_are_pushed_over_one_connection(self):
        east = self.start_east()
        self.open_session(east, self.tid)
        here = self.here(east)
        self.assertIsNone(here.get_peer_report({}, "east", self.tid, 1))
        chan = here.channels.channels[("east", self.tid)]
        progress = {"state": "uploading", "bytes": 5, "attempt": 1}
        east.manager.set_import_report({}, self.tid, progress)
        # Pushed: the channel has it without being asked.
        self.assertTrue(test_utils.wait_until(lambda: chan.raw is not None))
        self.assertEqual(progress, here.get_peer_report({}, "east",
                                                        self.tid, 1))
        east.manager.set_import_report({}, self.tid, REPORT)
        self.assertTrue(test_utils.wait_until(
            lambda: (self.tid, REPORT) in self.reports.calls))
        self.assertEqual(1, here.channels.opened)
        # A final report closes the connection; asking again opens a
        # new one, which answers with the report of then.
        self.assertTrue(test_utils.wait_until(lambda: chan.link is None))
        self.assertTrue(test_utils.wait_until(
            lambda: self.connections(east) == 1))
        self.assertNotIn(("east", self.tid), here.channels.channels)
        self.assertEqual(REPORT, here.get_peer_report({}, "east", self.tid,
                                                      1))
        self.assertEqual(2, here.channels.opened)
        self.assertTrue(test_utils.wait_until(
            lambda: self.connections(east) == 1))
        failed = {"state": "failed", "error": "x", "attempt": 1}
        east.manager.set_import_report({}, self.tid, failed)
        self.assertEqual(failed, here.get_peer_report({}, "east", self.tid,
                                                      1))
        self.assertEqual(3, here.channels.opened)
        self.assertEqual([(self.tid, None), (self.tid, progress),
                          (self.tid, REPORT), (self.tid, REPORT),
                          (self.tid, failed)],
                         self.reports.calls)

    def test_a_later_attempt_opens_a_new_channel_and_is_told(self):
        east = self.start_east()
        self.open_session(east, self.tid)
        here = self.here(east)
        east.manager.set_import_report(
            {}, self.tid, {"state": "failed", "error": "x", "attempt": 1})
        self.assertEqual("failed", here.get_peer_report(
            {}, "east", self.tid, 1)["state"])
        self.assertEqual("failed", here.get_peer_report(
            {}, "east", self.tid, 2)["state"])
        self.assertEqual(2, here.channels.opened)
        self.assertTrue(test_utils.wait_until(
            lambda: east.incoming.get(self.tid)["wanted_attempt"] == 2))

    def test_the_sink_forgets_a_channel_its_asker_closed(self):
        east = self.start_east()
        self.open_session(east, self.tid)
        before = self.connections(east)
        here = self.here(east)
        here.get_peer_report({}, "east", self.tid, 1)
        self.assertEqual(before + 1, self.connections(east))
        here.channels.close()
        # The sink notices within its check interval.
        self.assertTrue(test_utils.wait_until(
            lambda: self.connections(east) == before, 5))

    def test_an_unreachable_peer(self):
        east = self.start_east()
        here = self.here(east)
        e = self.assertRaises(messaging.ExpectedException,
                              here.get_peer_report, {}, "gone", self.tid, 1)
        self.assertIsInstance(e.exc_info[1], exception.PeerUnreachable)

    def test_an_older_sink_answering_once_is_asked_again(self):
        east = self.start_east()
        self.open_session(east, self.tid)
        # A sink whose lookup cannot tell changes: one answer, closed.
        east.sink.reports = east.report_for
        here = self.here(east)
        self.assertIsNone(here.get_peer_report({}, "east", self.tid, 1))
        chan = here.channels.channels[("east", self.tid)]
        east.manager.set_import_report({}, self.tid, REPORT)
        self.assertTrue(test_utils.wait_until(lambda: chan.raw is not None))
        self.assertEqual(REPORT, here.get_peer_report({}, "east", self.tid,
                                                      1))
        self.assertGreater(chan.link is None or chan.link.connections, 0)


class TestServeUpdates(test_service.ServiceTestCase):
    def test_keepalive_resends_an_unchanged_report(self):
        east = self.start_east()
        tid = uuid.uuid4().hex
        self.open_session(east, tid)
        got = test_utils.Recorder()
        peer = test_reports.FakePeers(east.sink.port).source_peer("east")
        orig = report_mod.KEEPALIVE
        report_mod.KEEPALIVE = 0.2
        self.addCleanup(setattr, report_mod, "KEEPALIVE", orig)
        check = report_mod.CHECK_INTERVAL
        report_mod.CHECK_INTERVAL = 0.05
        self.addCleanup(setattr, report_mod, "CHECK_INTERVAL", check)
        link = report_mod.ReportChannel(peer, tid, "here", self.cfg, 1, got,
                                        keepalive=0.2).start()
        self.addCleanup(link.close)
        self.assertTrue(test_utils.wait_until(lambda: len(got.calls) >= 3))
        self.assertEqual(1, link.connections)


class TestPusher(test_service.ServiceTestCase):
    def test_service_pushes_file_events_and_reports(self):
        events = test_utils.Recorder()
        self.engine.transfer_event = \
            lambda ctxt, kind, tid, name=None, info=None, origin=None: \
            events(kind, tid, name, info)
        east = self.start_east()
        tid = uuid.uuid4().hex
        east.sink.record_for = None
        east.on_file_event(tid, "x/image.data")
        # Unknown to the sink: pushed as None.
        self.assertTrue(test_utils.wait_until(lambda: events.calls))
        self.assertEqual(("watermark", tid, "x/image.data", None),
                         events.calls[0])
        east.on_peer_report(tid, REPORT)
        self.assertTrue(test_utils.wait_until(lambda: len(events.calls) == 2))
        self.assertEqual(("report", tid, None, REPORT), events.calls[1])
        self.assertEqual(["watermark", "transfer", "report"],
                         east.manager.ping({})["pushes"])

    def test_no_pushes_without_notices(self):
        east = self.start_east(notify_engine=False)
        self.assertIsNone(east.pusher)
        self.assertEqual([], east.manager.ping({})["pushes"])


class TestReportFeed(test_service.ServiceTestCase):
    def test_versions_wake_waiters_and_stay_bounded(self):
        feed = report_mod.ReportFeed(lambda tid, peer, attempt: b"r")
        self.assertEqual(b"r", feed("t", "p", 1))
        self.assertEqual(0, feed.version("t"))
        threading.Timer(0.1, feed.changed, ("t",)).start()
        self.assertEqual(1, feed.wait("t", 0, 5))
        self.assertEqual(1, feed.wait("t", 1, 0.05))     # timed out
        feed.MAX_TRANSFERS = 3
        for tid in ("a", "b", "c", "d"):
            feed.changed(tid)
        self.assertLessEqual(len(feed.versions), 3)
        self.assertEqual(1, feed.version("d"))
