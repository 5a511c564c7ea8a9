"""The documentation stays a product's: the tree OpenStack projects use,
and small (no lab notebook of benchmark runs: git keeps history).
"""

import pathlib

from tests.unit import testcase

DOC = pathlib.Path(__file__).resolve().parents[2] / "doc"
#: The guides an operator, a user and a contributor read.
GUIDES = ("install", "configuration", "admin", "user", "contributor",
          "api-ref")
#: What ``du -sh doc/`` may reach.
LIMIT = 2 * 1024 * 1024


def _disk_usage(path):
    """Bytes on disk, as du counts them (blocks of 512 bytes)."""
    return sum(p.lstat().st_blocks * 512 for p in path.rglob("*")
               if not p.is_symlink())


class TestDocsTree(testcase.TestCase):

    def test_each_guide_has_its_index(self):
        for guide in GUIDES:
            self.assertTrue((DOC / "source" / guide / "index.rst").is_file(),
                            guide)

    def test_one_performance_page(self):
        pages = [p.relative_to(DOC / "source").as_posix()
                 for p in (DOC / "source").rglob("*.rst")
                 if "performance" in p.name or "benchmark" in p.name]
        self.assertEqual(["contributor/performance.rst"], pages)

    def test_under_two_mib(self):
        # Built output is not part of the tree.
        used = _disk_usage(DOC) - sum(
            _disk_usage(d) for d in DOC.glob("build*") if d.is_dir())
        self.assertLess(used, LIMIT, "doc/ holds %d bytes" % used)
