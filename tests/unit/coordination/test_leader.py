"""The election's backend URL: [coordination] backend_url, or one made
from the jobboard's [task_flow] backend; the engines' locks.
"""

from unittest import mock

import fixtures

from dtn_migrate.coordination import leader
from tests.unit.coordination import base
from tests.unit import testcase


class TestBackendUrl(base.TaskFlowConfTestCase):

    def test_the_jobboard_s_zookeeper(self):
        self.set(backend_hosts=["zk1", "zk2"], zookeeper_session_timeout=4.4)
        self.assertEqual("zookeeper://zk1:2181,zk2:2181?timeout=4",
                         leader.backend_url(self.conf))

    def test_the_jobboard_s_redis(self):
        self.set(backend_driver="redis_taskflow_driver",
                 backend_hosts=["r1"], backend_port=6380,
                 backend_password="pw", expiration_time=8)
        self.assertEqual("redis://:pw@r1:6380?timeout=8",
                         leader.backend_url(self.conf))

    def test_its_own(self):
        self.conf.set_override("backend_url", "etcd3+http://e:2379",
                               "coordination")
        self.assertEqual("etcd3+http://e:2379", leader.backend_url(self.conf))


class TestHolding(testcase.TestCase):
    """The engines' locks (tooz), on tooz's file driver here."""

    def setUp(self):
        super().setUp()
        url = "file://%s" % self.useFixture(fixtures.TempDir()).path
        self.one = leader.Leadership(url, "engine-1")
        self.two = leader.Leadership(url, "engine-2")
        for member in (self.one, self.two):
            member.coordinator.start()
            self.addCleanup(member.coordinator.stop)

    def test_one_engine_at_a_time(self):
        with self.one.holding("request-b"):
            held = self.two.holding("request-b", timeout=0.2)
            err = self.assertRaises(leader.LockUnavailable, held.__enter__)
            self.assertIn("held by another engine", str(err))
            # Another name is another lock.
            with self.two.holding("request-c"):
                pass
        with self.two.holding("request-b", timeout=0.1):
            pass

    def test_a_backend_that_fails_is_unavailable(self):
        def broken(name):
            raise RuntimeError("session expired")
        self.one.coordinator.get_lock = lambda name: mock.Mock(
            acquire=broken)
        self.assertRaises(leader.LockUnavailable,
                          self.one.holding("x").__enter__)

    def test_a_backend_error_is_no_leader(self):
        # Before: kazoo's SessionExpiredError went through is_leader
        # (a timer's error in the log).
        self.one._elected.set()
        self.one.coordinator.get_leader = mock.Mock(
            side_effect=RuntimeError("session expired"))
        self.assertFalse(self.one.is_leader())
