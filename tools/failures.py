"""Print the failed tests of a subunit v2 stream, each with its traceback.

``stestr last --subunit | python tools/failures.py`` closes a failed
test run (tools/test): a long run's output is read from its end, and
the tracebacks stestr printed as the tests failed are far above it,
among the captured logs.  Only the traceback of each failed test is
printed here, not its other attachments (the service logs).
"""

import sys

import subunit
import testtools

FAILED = ("fail", "uxsuccess")
#: The attachment that holds a failure's cause (testtools names a
#: test's tracebacks "traceback", "traceback-1" ...).
TRACEBACK = "traceback"


def failures(stream):
    """[(test id, status, traceback text)] of the failed tests in
    ``stream`` (a binary file of subunit v2), in the order they ended.
    """
    found = []

    def on_test(test):
        if test["status"] not in FAILED:
            return
        texts = []
        for name, detail in sorted(test["details"].items()):
            if name.split("-")[0] == TRACEBACK:
                texts.append(b"".join(detail.iter_bytes()).decode(
                    "utf-8", "replace"))
        found.append((test["id"], test["status"], "".join(texts)))

    result = testtools.StreamToDict(on_test)
    result.startTestRun()
    try:
        subunit.ByteStreamToStreamResult(
            stream, non_subunit_name="stdout").run(result)
    finally:
        result.stopTestRun()
    return found


def main(stream=None, out=None):
    stream = stream or sys.stdin.buffer
    out = out or sys.stdout
    found = failures(stream)
    out.write("=== %d failed test(s) ===\n" % len(found))
    for test_id, status, text in found:
        text = text.rstrip() or "(no traceback)"
        out.write("--- %s: %s\n%s\n" % (test_id, status, text))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
