"""No hand-written poll loops: code that waits for something calls
dtn_migrate.common.polling.poll (the API client: client/polling.poll, on
top of it).  transfer/ and staging/ are libraries of their own, with
their own rule (``unit/staging/test_loops.py``).

Read from the source (ast), like ``test_time_patches``.
"""

import ast
import pathlib


import dtn_migrate

from tests.unit import testcase

PACKAGE = pathlib.Path(dtn_migrate.__file__).parent
OWN_RULES = ("transfer", "staging")
#: Sleeps that are not a poll loop's pause.
ALLOWED = {
    # The Ctrl-C-aware pause that poll loops of the CLI plugin use.
    "osc/v1/common.py": "ctrl_c_between_polls",
}


def sleeps(tree):
    """[(line, enclosing function)] of the ``time.sleep`` calls."""
    found = []

    def visit(node, func):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, func or child.name)
                continue
            if isinstance(child, ast.Call) and \
                    ast.unparse(child.func) == "time.sleep":
                found.append((child.lineno, func))
            visit(child, func)
    visit(tree, None)
    return found


class TestNoHandWrittenPolls(testcase.TestCase):
    def test_sleeps_only_in_the_poll_loop(self):
        found = []
        for path in sorted(PACKAGE.rglob("*.py")):
            rel = path.relative_to(PACKAGE).as_posix()
            if rel.split("/")[0] in OWN_RULES:
                continue
            for line, func in sleeps(ast.parse(path.read_text(), rel)):
                if ALLOWED.get(rel) != func:
                    found.append("%s:%d (in %s)" % (rel, line, func))
        self.assertEqual([], found)

    def test_the_check_finds_a_sleep_and_its_function(self):
        src = "\n".join([
            "import time",
            "def wait_ready(self):",
            "    def ready():",
            "        time.sleep(1)",
            "    while True:",
            "        time.sleep(0.1)",
            "time.sleep(2)",
            "clock.sleep(3)",
        ])
        self.assertEqual([(4, "wait_ready"), (6, "wait_ready"), (7, None)],
                         sorted(sleeps(ast.parse(src))))
