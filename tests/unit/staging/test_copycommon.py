"""What the local and the remote copy share (copycommon), on the fakes
and helpers of test_copy.py.
"""

from dtn_migrate.staging import copycommon
from tests.unit.staging.test_copy import MemBackend, StagingTestCase


class TestDescribe(StagingTestCase):
    def test_describe(self):
        self.assertEqual(self.root, copycommon.describe(self.backend))
        self.assertEqual("mem:/export", copycommon.describe(MemBackend()))

        class Nfs(MemBackend):
            description = None
            where = "nfs://dtn1/export"
        self.assertEqual("nfs://dtn1/export", copycommon.describe(Nfs()))
