"""tools/failures.py: the failed tests of a run, with their tracebacks,
at the end of tools/test's output."""

import importlib.util
import io
import os
import subprocess
import sys
import unittest
import unittest.util

import subunit
import testtools
from testtools import content

from tests.unit import testcase

TOOL = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir,
                    "tools", "failures.py")


def _load():
    spec = importlib.util.spec_from_file_location("dtnm_failures", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


failures = _load()


def _sample_case():
    """A test case class to record, one test of each outcome (made here
    so that the loader does not find it as a test of this module).
    """

    class _Sample(testcase.TestCase):

        def test_passes(self):
            self.addDetail("log-engine", content.text_content("all fine\n"))

        def test_fails(self):
            self.addDetail("log-engine",
                           content.text_content("LOGLINE " * 50))
            self.assertEqual(1, 2, "the cause")

        def test_errors(self):
            raise RuntimeError("broken fixture")

        def test_skips(self):
            self.skipTest("no RDMA device")

    return _Sample


#: The id of a test of the sample class, less its method name.
PREFIX = unittest.util.strclass(_sample_case())


def _stream(*names):
    """The subunit v2 bytes of running ``names`` of the sample case."""
    out = io.BytesIO()
    result = testtools.ExtendedToStreamDecorator(
        subunit.StreamResultToBytes(out))
    case = _sample_case()
    suite = unittest.TestSuite(case(n) for n in names)
    result.startTestRun()
    suite.run(result)
    result.stopTestRun()
    return out.getvalue()


class FailuresTest(testcase.TestCase):

    def test_failed_and_errored_tests_with_their_tracebacks_only(self):
        data = _stream("test_passes", "test_fails", "test_errors",
                       "test_skips")
        found = failures.failures(io.BytesIO(data))
        self.assertEqual(
            [(PREFIX + ".test_fails", "fail"),
             (PREFIX + ".test_errors", "fail")],
            [(test_id, status) for test_id, status, _t in found])
        fails, errors = found[0][2], found[1][2]
        self.assertIn("MismatchError: 1 != 2: the cause", fails)
        self.assertIn("RuntimeError: broken fixture", errors)
        # The other attachments (the services' logs) are left out.
        self.assertNotIn("LOGLINE", fails + errors)

    def test_main_prints_them_and_says_whether_any_failed(self):
        out = io.StringIO()
        rc = failures.main(io.BytesIO(_stream("test_passes", "test_fails")),
                           out)
        self.assertEqual(1, rc)
        text = out.getvalue()
        self.assertTrue(text.startswith("=== 1 failed test(s) ===\n"), text)
        self.assertIn("--- %s.test_fails: fail\n" % PREFIX, text)
        self.assertIn("the cause", text)

        out = io.StringIO()
        self.assertEqual(0, failures.main(
            io.BytesIO(_stream("test_passes", "test_skips")), out))
        self.assertEqual("=== 0 failed test(s) ===\n", out.getvalue())

    def test_as_a_command_on_a_pipe(self):
        proc = subprocess.run(
            [sys.executable, TOOL], input=_stream("test_errors"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60,
            check=False)
        self.assertEqual(1, proc.returncode, proc.stderr)
        self.assertIn(b"RuntimeError: broken fixture", proc.stdout)


if __name__ == "__main__":
    unittest.main()
