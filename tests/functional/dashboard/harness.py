"""The dtn-migrate Horizon panel in a real browser, on two real clouds.

A test class shares what :mod:`tests.functional.api.harness` starts (two clouds
with their Keystones, Glances, agents, engines and APIs; SQLite for both
databases), one real Horizon (the project venv's, with the plugin
installed by ``python -m dtn_migrate.dashboard.install``) for cloud A,
and one Debian ``chromium`` driven by Playwright (no browser download:
``executable_path``).  Each persona logs in once per class, in a browser
context of its own; its page is reused by every test.

Every screenshot a test takes is a PNG under :func:`artifacts_dir` (one
stable name per step, so that the docs can pick them up) and a detail of
the test.
"""

import os
import tempfile
import time

from testtools import content

import devcloud
from devcloud import horizon as devcloud_horizon
from tests.functional.api import harness as api
from tests.functional import base
from tests.functional.migration import scope as class_scope

#: The browser the tests drive (Debian's package; $DTN_CHROMIUM overrides).
CHROMIUM = os.environ.get("DTN_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1280, "height": 860}
#: Horizon's settings for the tests: alerts stay (they do not fade away
#: before a test reads them or takes a screenshot).
HORIZON_CONFIG = {"auto_fade_alerts": {"delay": 3000, "fade_duration": 1500,
                                       "types": []}}
#: Milliseconds between AJAX row updates.  Horizon waits N times this
#: after N polls that changed nothing, and the API's progress moves every
#: second or two: half a second shows most of its values.
POLL_INTERVAL_MS = 500
#: Milliseconds Playwright waits for an element or a navigation.
WAIT_MS = 30000


def artifacts_dir():
    """Where screenshots go: $DTN_TEST_ARTIFACTS/dashboard, else
    <tempdir>/dtnm-artifacts/dashboard.
    """
    root = os.environ.get("DTN_TEST_ARTIFACTS") or os.path.join(
        tempfile.gettempdir(), "dtnm-artifacts")
    path = os.path.join(root, "dashboard")
    os.makedirs(path, exist_ok=True)
    return path


def browser_available():
    """(True, '') when chromium, Playwright and Horizon are there."""
    if not os.access(CHROMIUM, os.X_OK):
        return False, ("%s not found: install Debian's chromium "
                       "(tools/bootstrap.sh)" % CHROMIUM)
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return False, "python playwright is not installed " \
                      "(test-requirements.txt)"
    try:
        import openstack_dashboard  # noqa: F401
    except ImportError:
        return False, "horizon is not installed (test-requirements.txt)"
    return True, ""


class Browser:
    """One chromium for a class: a logged-in page per persona."""

    def __init__(self, horizon, users):
        from playwright import sync_api
        self.horizon = horizon
        self.users = users
        self._playwright = sync_api.sync_playwright().start()
        try:
            self.browser = self._playwright.chromium.launch(
                executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        except BaseException:
            self._playwright.stop()
            raise
        self.pages = {}
        self.errors = []        # JavaScript errors of every page

    def new_page(self):
        context = self.browser.new_context(viewport=VIEWPORT)
        context.set_default_timeout(WAIT_MS)
        page = context.new_page()
        page.on("pageerror", lambda exc: self.errors.append(
            "%s: %s" % (page.url, exc)))
        return page

    def login(self, persona, page=None):
        """A page of a new context where PERSONA logged in."""
        user = self.users[persona]
        page = page or self.new_page()
        page.goto(self.horizon.login_url)
        page.fill("#id_username", user["username"])
        page.fill("#id_password", user["password"])
        page.click("#loginBtn")
        page.wait_for_url(lambda url: "/auth/login" not in url)
        return page

    def page(self, persona):
        """PERSONA's page (logged in on first use)."""
        if persona not in self.pages:
            self.pages[persona] = self.login(persona)
        return self.pages[persona]

    def close(self):
        try:
            self.browser.close()
        finally:
            self._playwright.stop()


class DashboardTestCase(api.ApiPairTestCase):
    """Clouds ``a`` and ``b`` with their APIs, ``horizon`` for cloud A
    and ``browser``.
    """

    @classmethod
    def setUpClass(cls):
        # Not ApiPairTestCase's: both clouds use SQLite (no MariaDB).
        super(api.ApiPairTestCase, cls).setUpClass()
        cls.scope = class_scope.ClassScope.opened(
            "dtnm-dash-", (devcloud.available(), base.Broker.available(),
                           browser_available()),
            cls._start_clouds)

    @classmethod
    def _start_clouds(cls, scope):
        t0 = time.monotonic()
        cls.a, cls.b = api.start_pair(scope)
        cls.clouds_seconds = time.monotonic() - t0
        cls.horizon = devcloud_horizon.HorizonServer(
            scope.workdir, cls.a.keystone, horizon_config=HORIZON_CONFIG,
            poll_interval=POLL_INTERVAL_MS)
        scope._started(cls.horizon)
        cls.browser = Browser(cls.horizon, cls.a.users)
        scope.addCleanup(cls.browser.close)

    def setUp(self):
        super().setUp()
        self.artifacts = artifacts_dir()
        self.addDetail("class-setup", content.text_content(
            "clouds started in %.1f s; horizon in %.1f s (login page "
            "warmed in %.1f s)" % (self.clouds_seconds,
                                   self.horizon.start_seconds,
                                   self.horizon.warm_seconds)))
        self.addOnException(self._attach_browser)
        self.addOnException(lambda exc_info: self.addDetail(
            "log-horizon", content.text_content(
                self.horizon.log_text()[-30000:])))

    def _attach_browser(self, exc_info):
        """Each open page's screenshot, URL and HTML; JavaScript errors."""
        for persona, page in sorted(self.browser.pages.items()):
            try:
                self._attach_png("failure-%s" % persona,
                                 page.screenshot(full_page=True))
                self.addDetail("html-%s" % persona, content.text_content(
                    "%s\n%s" % (page.url, page.content())))
            except Exception as exc:  # noqa: B902 - best effort
                self.addDetail("html-%s" % persona,
                               content.text_content(repr(exc)))
        if self.browser.errors:
            self.addDetail("javascript-errors", content.text_content(
                "\n".join(self.browser.errors)))

    def _attach_png(self, name, data):
        self.addDetail(name, content.Content(
            content.ContentType("image", "png"), lambda: [data]))

    def shot(self, page, step):
        """Screenshot PAGE as STEP (a file name without .png)."""
        path = os.path.join(self.artifacts, step + ".png")
        data = page.screenshot(path=path, full_page=True)
        self._attach_png("screenshot-%s" % step, data)
        return path

    def page(self, persona):
        return self.browser.page(persona)

    def goto(self, persona, path):
        """PERSONA's page on Horizon's PATH."""
        page = self.page(persona)
        page.goto(self.horizon.endpoint + path)
        return page

    def assertReadable(self, page):
        """No traceback nor server error page."""
        html = page.content()
        for bad in ("Traceback (most recent call last)",
                    "Server Error (500)", "Internal Server Error"):
            self.assertNotIn(bad, html)

    def messages(self, page, level=None):
        """Texts of Horizon's alert messages on PAGE (of LEVEL: success,
        danger, warning, info).
        """
        sel = ".messages .alert" + ("-%s" % level if level else "")
        return [t.strip() for t in page.locator(sel).all_inner_texts()]
