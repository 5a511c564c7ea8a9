"""The engine service's start: a jobboard it cannot use yet is refused
before anything touches the database.
"""

from oslo_config import cfg

from dtn_migrate import conf as dtn_conf
from dtn_migrate.engine import service
from dtn_migrate import exception
from tests.unit import testcase


class TestJobboardSetting(testcase.TestCase):

    def conf(self, **task_flow):
        conf = cfg.ConfigOpts()
        dtn_conf.register_opts(conf)
        conf([], project="dtn-migrate-test")
        for key, value in task_flow.items():
            conf.set_override(key, value, "task_flow")
        return conf

    def test_refused_before_the_database(self):
        conf = self.conf(jobboard_enabled=True)
        # No [database] connection either: the jobboard is refused first.
        exc = self.assertRaises(exception.ConfigError,
                                service.EngineService, conf)
        self.assertIn("[task_flow] jobboard_enabled = true", str(exc))

    def test_the_default_passes(self):
        service.check_jobboard(self.conf())
