"""No hand-written back-off or polling loops in staging/: they go
through staging/retry.py and dtn_migrate.common.polling (tenacity).
"""

import ast
import pathlib
import re


from dtn_migrate.staging import backend

from tests.unit import testcase

STAGING = pathlib.Path(backend.__file__).parent


class TestNoHandWrittenLoops(testcase.TestCase):
    """Back-off and polling go through retry.py only."""

    def test_no_sleeps_outside_retry(self):
        for path in sorted(STAGING.glob("*.py")):
            if path.name == "retry.py":
                continue
            text = path.read_text()
            if re.search(r"\* 2 \*\* \(?attempt", text):
                self.fail("%s: exponential back-off by hand" % path.name)
            tree = ast.parse(text, str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and \
                        ast.unparse(node.func) == "time.sleep":
                    self.fail("%s:%d sleeps by hand" % (path.name,
                                                        node.lineno))
                if isinstance(node, (ast.AugAssign, ast.Assign)) and \
                        re.search(r"(delay|backoff|wait)\w* \*?= .*\* 2",
                                  ast.unparse(node)):
                    self.fail("%s:%d doubles a wait by hand"
                              % (path.name, node.lineno))
