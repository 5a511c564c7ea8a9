"""What the coordination tests share: every option of the service
registered, and the jobboard's [task_flow] options set by their short
names.
"""

from oslo_config import cfg

from dtn_migrate import conf as dtn_conf
from tests.unit import testcase


class TaskFlowConfTestCase(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = cfg.ConfigOpts()
        dtn_conf.register_opts(self.conf)
        self.conf([], project="dtn-migrate-test")

    def set(self, **values):
        """``jobboard_<key>`` of [task_flow] for each ``key=value``."""
        for key, value in values.items():
            self.conf.set_override("jobboard_" + key, value, "task_flow")
