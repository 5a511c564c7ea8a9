"""No unit test patches the time module's clocks or sleep.

Unit tests share their process with the threads of other tests (a sink's
accept loop, a fake agent's sender, an engine's pools), and
``time.sleep`` is one object for all of them: a test that replaces it
counts, or speeds up, every thread's sleeps.  CI failed three times that
way (18 sleeps where 2 were expected; 1823 where 3 were).  Code that
waits takes its ``sleep`` (and its clock) as an argument instead, and
its tests pass their own.

Read from the source (ast), like ``test_exception_names``.
"""

import ast
import pathlib


from tests.unit import testcase

HERE = pathlib.Path(__file__).parent
SHARED = frozenset({"sleep", "monotonic", "time"})


def _text(node):
    return node.value if isinstance(node, ast.Constant) and \
        isinstance(node.value, str) else None


def global_time_patches(tree):
    """[(line, what)] of the patches of ``time.<SHARED>`` in TREE:
    ``mock.patch("time.sleep")``, ``fixtures.MockPatch("x.time.sleep")``
    (the same object, reached through a module), and
    ``mock.patch.object(time, "sleep")``.
    """
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = ast.unparse(node.func)
        name = func.rsplit(".", 1)[-1]
        if name in ("patch", "MockPatch"):
            target = _text(node.args[0]) or ""
            parts = target.rsplit(".", 2)
            if len(parts) >= 2 and parts[-2] == "time" and \
                    parts[-1] in SHARED:
                found.append((node.lineno, target))
        elif (func.endswith("patch.object") or name == "MockPatchObject") \
                and len(node.args) >= 2:
            owner = ast.unparse(node.args[0]).rsplit(".", 1)[-1]
            attr = _text(node.args[1])
            if owner == "time" and attr in SHARED:
                found.append((node.lineno, "time.%s" % attr))
    return found


class TestNoGlobalTimePatches(testcase.TestCase):
    def test_no_unit_test_patches_time(self):
        found = []
        for path in sorted(HERE.rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            found += ["%s:%d patches %s" % (path.relative_to(HERE), line,
                                            what)
                      for line, what in global_time_patches(tree)]
        self.assertEqual([], found)

    def test_the_check_finds_each_form(self):
        src = "\n".join([
            "fixtures.MockPatch('time.sleep', f)",
            "mock.patch('dtn_migrate.image.glance.time.monotonic')",
            "mock.patch.object(time, 'time')",
            "self.useFixture(fixtures.MockPatchObject(time, 'sleep'))",
            # Not the shared object: a module's own helper, or another
            # module's function of the same name.
            "mock.patch('dtn_migrate.engine.flows.incoming.sleep')",
            "mock.patch.object(clock, 'sleep')",
            "mock.patch('time.perf_counter_ns')",
        ])
        self.assertEqual(
            [(1, "time.sleep"),
             (2, "dtn_migrate.image.glance.time.monotonic"),
             (3, "time.time"), (4, "time.sleep")],
            global_time_patches(ast.parse(src)))
