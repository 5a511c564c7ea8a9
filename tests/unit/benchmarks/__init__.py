"""Unit tests of the benchmarks' own logic (``benchmarks/``)."""

import builtins
import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
from unittest import mock

from benchmarks import report

#: A stand-in for a third-party server: it binds 127.0.0.1:PORT and
#: answers each connection with its pid, or says "Address already in
#: use" (as iperf3, rsync and xrootd do) and exits.
SERVER = """\
import os, socket, sys
s = socket.socket()
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError as exc:
    print("unable to start listener: %s" % exc.strerror, flush=True)
    sys.exit(1)
s.listen()
while True:
    c, _ = s.accept()
    c.sendall(b"%d" % os.getpid())
    c.close()
"""


@contextlib.contextmanager
def no_matplotlib():
    """As in a virtualenv without the benchmarks' extra: ``import
    matplotlib`` fails; yields the text written to stderr meanwhile.
    """
    err = io.StringIO()
    with mock.patch.dict(sys.modules, {"matplotlib": None,
                                       "matplotlib.pyplot": None}), \
            mock.patch("sys.stderr", err), mock.patch("builtins.print",
                                                      _to_stderr_only(err)):
        yield err


def _to_stderr_only(err):
    """print() that keeps what goes to stderr and drops the rest."""
    real = getattr(builtins, "print")

    def fake(*args, **kwargs):
        if kwargs.get("file") is sys.stderr or kwargs.get("file") is err:
            kwargs["file"] = err
            real(*args, **kwargs)
    return fake


def check_results_outlive_figures(case, write, results, table):
    """``write(results, out)`` without matplotlib: it exits
    RENDER_FAILED, with the results' JSON and ``table`` written in out,
    and says how to draw the figures again from that JSON.
    """
    out = tempfile.mkdtemp(prefix="dtnm-bt-")
    case.addCleanup(shutil.rmtree, out, True)
    with no_matplotlib() as err:
        rc = write(json.loads(json.dumps(results)), out)
    case.assertEqual(report.RENDER_FAILED, rc)
    path = os.path.join(out, "results.json")
    with open(path) as f:
        case.assertEqual(results["reps"], json.load(f)["reps"])
    case.assertTrue(os.path.exists(os.path.join(out, table)))
    case.assertIn("--from-json %s" % path, err.getvalue())
