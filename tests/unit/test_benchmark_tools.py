"""The CPU-profile and page-cache benchmarks' own logic."""

import json
import os
import shutil
import tempfile
import unittest

from benchmarks import compare_runs
from benchmarks import cpuprofile
from benchmarks import pagecache
from benchmarks import stagedread

PERF_SCRIPT = """\
14707
\t    1234 copy_folio_from_iter_atomic ([kernel.kallsyms])
\t    5678 ksys_pwrite64 ([kernel.kallsyms])

14707
\t    2a3d0c [unknown] (/usr/lib/x86_64-linux-gnu/libcrypto.so.3)
\t    1111 _PyEval_EvalFrameDefault (/usr/bin/python3.11)

14686
\t    12b8e8 _PyEval_EvalFrameDefault (/usr/bin/python3.11)

999
\t    1234 copy_folio_from_iter_atomic ([kernel.kallsyms])

14686
\t    4242 XXH3_update_avx2 (/x/_xxhash.cpython-311-x86_64-linux-gnu.so)
"""


class CpuProfileTest(unittest.TestCase):
    def test_leaf_of_each_sample_of_known_processes(self):
        counts = cpuprofile.parse(PERF_SCRIPT.splitlines(),
                                  {"14707": "engine-a", "14686": "dtn-b"})
        self.assertEqual({"write into page cache": 1, "libcrypto": 1},
                         dict(counts["engine-a"]))
        self.assertEqual({"Python": 1, "xxh3": 1}, dict(counts["dtn-b"]))
        self.assertEqual({"engine-a", "dtn-b"}, set(counts))

    def test_process_names(self):
        self.assertEqual("engine-a", cpuprofile._name(
            "/w/.venv/bin/dtn-migrate-engine --config-file "
            "/var/tmp/dtnm-bench-migration-x/engine-a-7661/engine.conf"))
        self.assertEqual("dtn-b", cpuprofile._name(
            "ip netns exec b /w/.venv/bin/dtn-migrate-agent --config-file "
            "/var/tmp/dtnm-bench-migration-x/dtn-b-4e4e/agent.conf"))
        self.assertIsNone(cpuprofile._name("/usr/bin/uwsgi --ini g.ini"))

    def test_kinds(self):
        self.assertEqual("socket copies",
                         cpuprofile.kind("_copy_to_iter", "[kernel.kallsyms]"))
        self.assertEqual("other kernel",
                         cpuprofile.kind("handle_softirqs",
                                         "[kernel.kallsyms]"))
        self.assertEqual("other", cpuprofile.kind("malloc", "libc.so.6"))


class PageCacheTest(unittest.TestCase):
    def test_every_case_measured_each_repetition(self):
        with tempfile.TemporaryDirectory() as d:
            out = pagecache.measure(d, reps=2, settle=0, size=8 << 20,
                                    log=lambda _msg: None)
            self.assertEqual(set(pagecache.CASES), set(out))
            for case, values in out.items():
                self.assertEqual(2, len(values), case)
                self.assertTrue(all(v >= 0 for v in values), case)


class StagedReadTest(unittest.TestCase):
    def test_both_ways_read_the_file_each_repetition(self):
        with tempfile.TemporaryDirectory() as d:
            out = stagedread.measure(d, 8 << 20 | 5, reps=2,
                                     log=lambda _msg: None)
            self.assertEqual([], os.listdir(d))     # staged file removed
        self.assertEqual(set(stagedread.CASES), set(out))
        for case, values in out.items():
            self.assertEqual(2, len(values), case)
            self.assertTrue(all(cpu >= 0 and mbs > 0
                                for cpu, mbs in values), case)

    def test_sizes(self):
        self.assertEqual(2 << 30, stagedread._size("2G"))
        self.assertEqual(512 << 20, stagedread._size("512m"))
        self.assertEqual(1000, stagedread._size("1000"))
        self.assertRaises(ValueError, stagedread._size, "two")


class CompareRunsTest(unittest.TestCase):

    def run_dir(self, root, name, engine_a, seconds):
        d = os.path.join(root, name)
        os.makedirs(d)
        samples = [{"what": "pipelined", "seconds": s,
                    "extra": {"cpu_seconds": {"engine-a": e, "agent-a": 1.0,
                                              "agent-b": 2.0, "engine-b": 1.0,
                                              "glance-b": 7.0}}}
                   for e, s in zip(engine_a, seconds)]
        samples.append({"what": "export", "seconds": 1.0,
                        "extra": {"cpu_seconds": {"engine-a": 99.0}}})
        with open(os.path.join(d, "results.json"), "w") as f:
            json.dump({"command": "x", "settings": {"size": 2 << 30},
                       "samples": samples}, f)
        return d

    def test_labels_pool_their_runs(self):
        root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, root, True)
        runs = compare_runs.load([
            ("direct", self.run_dir(root, "d1", [4.0, 6.0], [20, 22])),
            ("buffered", self.run_dir(root, "b1", [8.0], [30])),
            ("direct", self.run_dir(root, "d2", [2.0], [21]))], "pipelined")
        self.assertEqual(["direct", "buffered"], list(runs))
        # CPU-s per GiB of a 2 GiB image; the export sample is not one.
        self.assertEqual([2.0, 3.0, 1.0], runs["direct"]["engine-a"])
        self.assertEqual([4.0, 5.0, 3.0], runs["direct"]["dtn-migrate"])
        self.assertEqual([20, 22, 21], runs["direct"]["seconds"])
        text = compare_runs.table(runs)
        self.assertIn("direct / buffered (medians)", text)
        # engine-a: median 2.0 against 4.0.
        self.assertIn("| 0.50 ", text)
