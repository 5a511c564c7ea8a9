"""A migration's record as the engine answers it (``engine/records.py``)."""

import datetime

from taskflow import exceptions as tf_exc

from dtn_migrate.engine import records
from dtn_migrate import exception

from tests.unit import testcase


class TestToRpc(testcase.TestCase):
    def test_times_bytes_and_events(self):
        when = datetime.datetime(2026, 11, 29, 19, 40, 1, 5)
        out = records.to_rpc(
            {"migration_id": "m", "created_at": when, "finished_at": None,
             "bytes_transfer": 7, "bytes_import": None},
            events=[{"at": when, "event": "running"}])
        self.assertEqual("2026-11-29T19:40:01.000005", out["created_at"])
        self.assertIsNone(out["finished_at"])
        # Every stage has its bytes, 0 where none were counted.
        self.assertEqual({"export": 0, "transfer": 7, "import": 0},
                         out["bytes"])
        self.assertEqual([{"at": "2026-11-29T19:40:01.000005",
                           "event": "running"}], out["events"])
        self.assertNotIn("events", records.to_rpc({"migration_id": "m"}))


class TestSaved(testcase.TestCase):
    def test_a_database_error_is_what_an_operator_reads(self):
        def lost():
            raise exception.DatabaseUnavailable(
                reason="(2013, 'Lost connection to MySQL server')")

        err = self.assertRaises(exception.PersistenceUnavailable,
                                records.saved, lost)
        self.assertIn("Lost connection to MySQL server", str(err))

    def test_an_error_without_a_message_is_named(self):
        def refused():
            raise tf_exc.StorageFailure("")

        err = self.assertRaises(exception.PersistenceUnavailable,
                                records.saved, refused)
        self.assertIn("StorageFailure", str(err))

    def test_other_errors_and_results_pass_through(self):
        self.assertEqual(3, records.saved(lambda a, b=0: a + b, 1, b=2))

        def conflict():
            raise exception.MigrationNotFound(migration_id="m")

        self.assertRaises(exception.MigrationNotFound, records.saved,
                          conflict)
