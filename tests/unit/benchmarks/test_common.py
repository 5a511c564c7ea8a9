"""benchmarks.common: processes' CPU and memory."""

import os
import unittest

from benchmarks import common


class ProcessTest(unittest.TestCase):
    def test_this_process(self):
        stats = common.proc_stats()
        me = os.getpid()
        self.assertIn(me, common.tree(me, stats))
        # The interpreter's start and imports took some.
        self.assertGreater(common.tree_cpu(me, stats), 0)
        self.assertGreater(common.group_cpu(os.getpgid(me), stats), 0)
        self.assertIsNone(common.tree_cpu(-1, stats))
        self.assertGreater(common.peak_rss(me), 1 << 20)
        self.assertIsNone(common.peak_rss(-1))
