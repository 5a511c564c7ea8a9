"""The election's backend URL: [coordination] backend_url, or one made
from the jobboard's [task_flow] backend.
"""

from dtn_migrate.coordination import leader
from tests.unit.coordination import base


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
