"""The agent's fencing of the engines' commands (agent.fences, issue 39):
a command of a claim older than the latest seen of its transfer is
refused, durably across restarts of the agent.
"""

import os
import shutil
import tempfile
from unittest import mock
import uuid

import oslo_messaging as messaging

from dtn_migrate.agent import fences
from dtn_migrate.agent import manager
from dtn_migrate import exception

from tests.unit import testcase

TID = uuid.uuid4().hex


class TestFences(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="dtnm-fences-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.now = [1000.0]
        self.fences = self.make()

    def make(self, retention=None):
        return fences.Fences(self.tmp, retention=retention,
                             clock=lambda: self.now[0])

    def test_a_later_claim_refuses_the_earlier(self):
        self.fences.admit(TID, 1, "start")
        self.fences.admit(TID, 1, "get")
        self.fences.admit(TID, 3, "fence")
        err = self.assertRaises(exception.StaleEpoch, self.fences.admit,
                                TID, 2, "cancel")
        self.assertIn("cancel of claim epoch 2 refused", str(err))
        self.assertIn("epoch 3", str(err))
        # Still a MigrationClaimLost for the engine that sent it.
        self.assertIsInstance(err, exception.MigrationClaimLost)
        self.fences.admit(TID, 3, "get")
        self.fences.admit(TID, 4, "get")
        self.assertEqual(4, self.fences.highest(TID))

    def test_no_epoch_is_not_fenced(self):
        self.fences.admit(TID, 5, "start")
        self.fences.admit(TID, None, "cancel")
        self.assertEqual(5, self.fences.highest(TID))

    def test_kept_across_a_restart_of_the_agent(self):
        self.fences.admit(TID, 2, "fence")
        again = self.make()
        self.assertRaises(exception.StaleEpoch, again.admit, TID, 1, "get")
        self.assertEqual(2, again.highest(TID))
        # One file of the transfer, in the agent's state directory.
        self.assertEqual([TID], os.listdir(os.path.join(self.tmp, "fences")))

    def test_ids_and_epochs_are_checked(self):
        for bad in (0, -1, "2", 1.5, True):
            self.assertRaises(exception.InvalidInput, self.fences.admit,
                              TID, bad, "get")
        self.assertRaises(exception.InvalidInput, self.fences.admit,
                          "../../etc/passwd", 1, "get")
        self.assertEqual([], os.listdir(os.path.join(self.tmp, "fences")))

    def test_an_unreadable_epoch_refuses_nothing(self):
        with open(os.path.join(self.tmp, "fences", TID), "w") as f:
            f.write("garbage")
        self.fences.admit(TID, 1, "get")
        self.assertEqual(1, self.make().highest(TID))

    def test_old_epochs_are_swept(self):
        fenced = self.make(retention=100)
        other = uuid.uuid4().hex
        fenced.admit(TID, 2, "start")
        fenced.admit(other, 1, "start")
        path = os.path.join(self.tmp, "fences", TID)
        os.utime(path, (800, 800))
        self.assertEqual(1, fenced.sweep())
        self.assertIsNone(fenced.highest(TID))
        self.assertEqual(1, fenced.highest(other))
        self.assertEqual(0, self.fences.sweep())


class TestManagerCommands(testcase.TestCase):
    def setUp(self):
        super().setUp()
        tmp = tempfile.mkdtemp(prefix="dtnm-fences-")
        self.addCleanup(shutil.rmtree, tmp, True)
        self.outgoing = mock.Mock()
        self.incoming = mock.Mock()
        self.sink = mock.Mock()
        self.sink.status.return_value = None
        self.mgr = manager.AgentManager(
            "dtn-a", self.outgoing, self.sink, self.incoming,
            fences=fences.Fences(tmp))

    def assertRefused(self, exc, func, *args, **kwargs):
        # expected_exceptions wraps what it lets through.
        e = self.assertRaises(messaging.ExpectedException, func, *args,
                              **kwargs)
        self.assertIsInstance(e.exc_info[1], exc)

    def test_each_command_of_a_stale_claim_is_refused_and_not_run(self):
        self.mgr.fence_transfer({}, TID, 3)
        calls = [
            (self.mgr.start_transfer, ({}, "b", []),
             {"transfer_id": TID}, self.outgoing.start),
            (self.mgr.get_transfer, ({}, TID), {}, self.outgoing.get),
            (self.mgr.cancel_transfer, ({}, TID), {}, self.outgoing.cancel),
            (self.mgr.resume_transfer, ({}, TID), {}, self.outgoing.resume),
            (self.mgr.set_import_report, ({}, TID, {"state": "active"}), {},
             self.incoming.set_report),
        ]
        for method, args, kwargs, effect in calls:
            self.assertRefused(exception.StaleEpoch, method, *args,
                               epoch=2, **kwargs)
            effect.assert_not_called()
            method(*args, epoch=3, **kwargs)
            effect.assert_called_once()
            # A command with no claim (an operator's) is not fenced.
            method(*args, **kwargs)
            self.assertEqual(2, effect.call_count)

    def test_fence_needs_an_epoch(self):
        self.assertRefused(exception.InvalidInput, self.mgr.fence_transfer,
                           {}, TID, None)
        self.assertRefused(exception.InvalidInput, self.mgr.get_transfer,
                           {}, TID, epoch="x")
