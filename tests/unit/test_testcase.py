"""The unit tests' base class: every unit test derives from it, and a
test past its limit fails rather than holding the run.
"""

import ast
import os
import time

import fixtures
import testtools

from tests.unit import testcase

UNIT = os.path.dirname(os.path.abspath(__file__))
#: Base classes a unit test may not use directly.
FORBIDDEN = {('testtools', 'TestCase'), ('unittest', 'TestCase')}


def _direct_bases():
    """(path, class) of each class based directly on testtools' or
    unittest's TestCase, outside testcase.py.
    """
    found = []
    for top, _dirs, files in os.walk(UNIT):
        for name in files:
            path = os.path.join(top, name)
            if not name.endswith('.py') or path == testcase.__file__:
                continue
            with open(path) as f:
                tree = ast.parse(f.read(), path)
            imported = {a.asname or a.name: n.module
                        for n in ast.walk(tree)
                        if isinstance(n, ast.ImportFrom)
                        for a in n.names}
            for node in ast.walk(tree):
                if not isinstance(node, ast.ClassDef):
                    continue
                for base in node.bases:
                    if isinstance(base, ast.Attribute) and isinstance(
                            base.value, ast.Name):
                        key = (base.value.id, base.attr)
                    elif isinstance(base, ast.Name):
                        key = (imported.get(base.id), base.id)
                    else:
                        continue
                    if key in FORBIDDEN:
                        found.append((os.path.relpath(path, UNIT), node.name))
    return found


class TestBase(testcase.TestCase):

    def test_every_unit_test_has_the_timeout(self):
        self.assertEqual([], _direct_bases())

    def test_a_test_past_its_limit_fails(self):

        class Slow(testcase.TestCase):
            TIMEOUT = 1

            def test_sleeps(self):
                time.sleep(5)

        result = testtools.TestResult()
        started = time.monotonic()
        Slow('test_sleeps').run(result)
        self.assertLess(time.monotonic() - started, 4)
        self.assertEqual(1, len(result.errors))
        self.assertIn(fixtures.TimeoutException.__name__,
                      result.errors[0][1])

    def test_limit_from_the_environment(self):
        for value, expected in (('', testcase.DEFAULT_TIMEOUT), ('5', 5),
                                ('0', 0), ('junk', testcase.DEFAULT_TIMEOUT),
                                ('-3', 0)):
            self.useFixture(fixtures.EnvironmentVariable(
                'DTN_TEST_TIMEOUT', value))
            self.assertEqual(expected, testcase.timeout())
