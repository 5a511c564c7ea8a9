"""Test base for tests against real local clouds (devcloud).

``DevcloudTestCase`` gives each test a work directory (tmpfs when it has
room) and starts servers whose stop and removal are registered as
cleanups, so nothing outlives a failing test.  It skips when
tools/bootstrap-clouds.sh has not been run.
"""

import functools
import http.server
import os
import shutil
import tempfile
import threading

import testtools

import devcloud
from devcloud import pair
from tests.functional import base

MiB = 1 << 20


def _clients_missing():
    try:
        import glanceclient  # noqa: F401
        import keystoneauth1  # noqa: F401
    except ImportError:
        return ("python-glanceclient and keystoneauth1 are not installed: "
                "run tools/bootstrap-clouds.sh")
    return None


class DevcloudTestCase(testtools.TestCase):
    """Starts Keystones, Glances, fault proxies and file servers on demand."""

    def setUp(self):
        super().setUp()
        ok, why = devcloud.available()
        if not ok:
            self.skipTest(why)
        why = _clients_missing()
        if why:
            self.skipTest(why)
        self.workdir = tempfile.mkdtemp(prefix="dtnm-devcloud-",
                                        dir=base.data_root())
        if not os.environ.get("DTN_DEVCLOUD_KEEP"):
            self.addCleanup(shutil.rmtree, self.workdir, ignore_errors=True)

    def _started(self, server):
        # Cleanups run last-in first-out: a Glance stops before its Keystone.
        self.addCleanup(server.close)
        self.addOnException(functools.partial(self._attach_logs, server))
        return server.start()

    def _attach_logs(self, server, exc_info):
        from testtools import content
        self.addDetail("%s-%s.log" % (server.kind, server.name),
                       content.text_content(server.log_text()[-20000:]))

    keystone = pair.Scope.keystone
    glance = pair.Scope.glance
    fault_proxy = pair.Scope.fault_proxy

    def serve_file(self, path):
        """http://127.0.0.1:PORT/NAME serving PATH (for web-download)."""
        directory = os.path.dirname(path)

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, directory=directory, **kwargs)

            def log_message(self, *args):
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        self.addCleanup(thread.join, 5)
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        return "http://127.0.0.1:%d/%s" % (server.server_address[1],
                                           os.path.basename(path))
