"""The jobboard's drivers: [task_flow] options to TaskFlow's jobboard
configuration, loaded by name through stevedore (the real entry points
of setup.cfg).
"""

import fixtures

from dtn_migrate.coordination import jobboard
from dtn_migrate import exception
from tests.unit.coordination import base


class TestDrivers(base.TaskFlowConfTestCase):

    def test_off_by_default(self):
        self.assertFalse(self.conf.task_flow.jobboard_enabled)

    def test_zookeeper_is_the_default_driver(self):
        self.set(backend_hosts=["zk1", "zk2", "zk3"])
        driver = jobboard.get_driver(self.conf)
        self.assertIsInstance(driver, jobboard.ZookeeperDriver)
        self.assertIsNone(driver.claim_expiry)
        self.assertEqual({"board": "zookeeper",
                          "hosts": "zk1:2181,zk2:2181,zk3:2181",
                          "path": "/dtn_migrate_jobboard",
                          "timeout": 6.0}, driver.board_conf())
        self.set(backend_port=2281, backend_namespace="/cloud-a/",
                 zookeeper_session_timeout=3.5)
        self.assertEqual({"board": "zookeeper",
                          "hosts": "zk1:2281,zk2:2281,zk3:2281",
                          "path": "/cloud-a", "timeout": 3.5},
                         driver.board_conf())

    def test_redis(self):
        self.set(backend_driver="redis_taskflow_driver",
                 backend_hosts=["r1"], expiration_time=9)
        driver = jobboard.get_driver(self.conf)
        self.assertIsInstance(driver, jobboard.RedisDriver)
        self.assertEqual(9.0, driver.claim_expiry)
        self.assertEqual({"board": "redis", "host": "r1", "port": 6379,
                          "namespace": "dtn_migrate_jobboard"},
                         driver.board_conf())
        self.assertEqual("redis jobboard dtn_migrate_jobboard at r1:6379",
                         driver.describe())

    def test_redis_credentials_and_sentinels(self):
        self.set(backend_driver="redis_taskflow_driver",
                 backend_hosts=["s1", "s2", "s3"], backend_port=26379,
                 redis_sentinel="mymaster", backend_username="dtn",
                 backend_password="secret")
        conf = jobboard.get_driver(self.conf).board_conf()
        self.assertEqual({"board": "redis", "host": "s1", "port": 26379,
                          "namespace": "dtn_migrate_jobboard",
                          "sentinel": "mymaster",
                          "sentinel_fallbacks": ["s2:26379", "s3:26379"],
                          "username": "dtn", "password": "secret"}, conf)
        self.assertNotIn("secret", jobboard.get_driver(self.conf)
                         .describe())

    def test_a_driver_that_is_not_installed(self):
        # Its entry point missing (the package installed without it).
        self.useFixture(fixtures.MockPatchObject(
            jobboard, "NAMESPACE", "dtn_migrate.nowhere"))
        exc = self.assertRaises(exception.ConfigError, jobboard.get_driver,
                                self.conf)
        self.assertIn("[task_flow] jobboard_backend_driver "
                      "zookeeper_taskflow_driver: ", str(exc))
