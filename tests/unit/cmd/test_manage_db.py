"""dtn-migrate-manage db sync|version, on SQLite files."""

import shutil
import tempfile

from dtn_migrate.db import api as db_api
from tests.unit.cmd import test_manage


class TestDbCommands(test_manage.ManageTestCase):
    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="dtnm-manage-db-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.url = "sqlite:///%s/sub/engine.sqlite" % self.tmp
        self.conf = "[database]\nconnection = %s\n" % self.url

    def test_version_sync_version(self):
        rc, out, _ = self.run_main("db", "version", conf=self.conf)
        self.assertEqual((0, "none (run 'db sync')\n"), (rc, out))
        rc, out, _ = self.run_main("db", "sync", conf=self.conf)
        self.assertEqual((0, "database at revision 0006\n"), (rc, out))
        self.assertFalse(self.rpc_init.called)      # no bus needed
        rc, out, _ = self.run_main("db", "version", conf=self.conf)
        self.assertEqual((0, "0006\n"), (rc, out))
        # The tables are there.
        db = db_api.Database(connection=self.url)
        self.addCleanup(db.dispose)
        self.assertEqual([], db.migration_get_all())
        self.assertEqual([], db.policy_get_all())
        self.assertEqual([], db.replica_get_all())

    def test_unreachable_database(self):
        conf = "[database]\nconnection = mysql+pymysql://u@127.0.0.1:1/x\n"
        rc, out, err = self.run_main("db", "sync", conf=conf)
        self.assertEqual((1, ""), (rc, out))
        self.assertTrue(err.startswith("error: The database is "
                                       "unavailable: "), err)
        self.assertNotIn("Traceback", err)
