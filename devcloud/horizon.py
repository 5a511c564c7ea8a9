"""The real Horizon (the project venv's), with the dtn-migrate panel.

:class:`HorizonServer` serves ``openstack_dashboard`` with Django's
``runserver`` (``--insecure`` serves the static files through Django's
finders, so no ``collectstatic`` is needed) on 127.0.0.1:port, in front
of a devcloud :class:`~devcloud.keystone.KeystoneServer`.
Before it starts, ``python -m dtn_migrate.dashboard.install`` copies the
plugin's ``enabled/`` files and settings snippet into Horizon, as an
operator (or devstack) does.

Horizon reads a settings module that the server writes into its own
directory: ``openstack_dashboard.settings`` plus what a dev cloud needs
(:meth:`HorizonServer.settings`).  Sessions live in an in-process cache,
so the server is one process (with threads).  Horizon compiles its SCSS
on the first page that needs it (seconds): ``start()`` loads the login
page once so that a browser's first page is quick.
"""

import os
import secrets
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request

from devcloud import _base
from devcloud import api as devcloud_api
from dtn_migrate.common import polling

#: The name of the settings module the server writes (in its directory).
SETTINGS_MODULE = "dtnm_horizon_settings"
#: The plugin's installer module.
INSTALLER = "dtn_migrate.dashboard.install"
#: Milliseconds between two AJAX updates of a table's pending rows
#: (Horizon's default is 2500).
POLL_INTERVAL_MS = 1000
#: Loggers written to the server's log file.
LOGGERS = ("horizon", "openstack_dashboard", "openstack_auth",
           "dtn_migrate", "django.request", "keystoneauth")

_SETTINGS_TEMPLATE = '''\
"""Horizon settings of a dtn-migrate dev cloud (written by
devcloud.horizon; do not edit, it is rewritten at start).
"""

from openstack_dashboard.settings import *  # noqa: F401,F403

DEBUG = False
SECRET_KEY = %(secret_key)r
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
OPENSTACK_KEYSTONE_URL = %(keystone_url)r
OPENSTACK_ENDPOINT_TYPE = "publicURL"

# One process: sessions (and compressed assets' names) in its memory.
# Far more entries than Django's default 300: the compressor caches one
# key per static file, and culling the cache would throw away the
# compiled stylesheets (then every page compiles the SCSS again, ~1 s).
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
        "OPTIONS": {"MAX_ENTRIES": 100000},
    },
}
SESSION_ENGINE = "django.contrib.sessions.backends.cache"

# Assets are compressed on the fly, into this server's directory (never
# into the installed Horizon).
COMPRESS_OFFLINE = False
COMPRESS_ROOT = %(static_root)r
STATIC_ROOT = %(static_root)r

HORIZON_CONFIG.update(%(horizon_config)r)  # noqa: F405

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%%(asctime)s %%(levelname)s %%(name)s "
                            "%%(message)s"},
    },
    "handlers": {
        "file": {"class": "logging.FileHandler", "filename": %(log)r,
                 "formatter": "plain"},
    },
    "loggers": {name: {"handlers": ["file"], "level": %(level)r,
                       "propagate": False}
                for name in %(loggers)r},
}
%(extra)s'''


def settings_text(keystone_url, secret_key, static_root, log,
                  horizon_config=None, level="DEBUG", extra=None):
    """The settings module's source.  HORIZON_CONFIG ({key: value})
    updates Horizon's ``HORIZON_CONFIG`` (default: the AJAX poll interval
    of :data:`POLL_INTERVAL_MS`); EXTRA ({name: value}) is appended as
    ``NAME = repr(value)``.
    """
    if horizon_config is None:
        horizon_config = {"ajax_poll_interval": POLL_INTERVAL_MS}
    lines = "".join("%s = %r\n" % item for item in sorted(
        (extra or {}).items()))
    return _SETTINGS_TEMPLATE % {
        "secret_key": secret_key, "keystone_url": keystone_url,
        "static_root": static_root, "horizon_config": horizon_config,
        "log": log, "level": level, "loggers": list(LOGGERS),
        "extra": lines}


class HorizonServer(_base.UwsgiServer):
    """Horizon on 127.0.0.1:port for KEYSTONE's cloud.

    PLUGIN: run the dtn-migrate plugin's installer before starting (False
    serves Horizon as it is installed).  HORIZON_CONFIG ({key: value})
    is merged into Horizon's ``HORIZON_CONFIG`` after the AJAX poll
    interval (POLL_INTERVAL ms); EXTRA_SETTINGS ({name: value}) are
    appended to the settings module.  PYTHON is the interpreter of
    Horizon's venv (default: the project's, where Horizon is installed).
    """

    kind = "horizon"
    # Cheap, answered once Django loaded and did not fail: the login page
    # itself is loaded afterwards (it compiles the stylesheets).
    ready_path = "/i18n/js/horizon+openstack_dashboard/"
    login_path = "/auth/login/"

    def __init__(self, workdir, keystone, name="a", port=None,
                 plugin=True, horizon_config=None, extra_settings=None,
                 python=None, poll_interval=POLL_INTERVAL_MS):
        super().__init__(workdir, name, port, processes=1, threads=0)
        self.keystone = keystone
        self.plugin = plugin
        self.extra_settings = dict(extra_settings or {})
        self.python = python or os.path.join(devcloud_api.project_venv(),
                                             "bin", "python")
        self.horizon_config = {"ajax_poll_interval": poll_interval}
        self.horizon_config.update(horizon_config or {})
        self.settings_file = os.path.join(self.dir, SETTINGS_MODULE + ".py")
        self.static_root = os.path.join(self.dir, "static")
        self.log = os.path.join(self.dir, "horizon.log")
        # runserver's own output (requests, tracebacks): where UwsgiServer
        # looks for a failed start's tail.
        self.uwsgi_log = self.server_log = os.path.join(self.dir,
                                                        "runserver.log")
        self.install_log = os.path.join(self.dir, "install.log")
        self.secret_key = secrets.token_hex(32)
        self.warm_seconds = None

    @property
    def login_url(self):
        return self.endpoint + self.login_path

    def settings(self):
        """The settings module's source."""
        return settings_text(self.keystone.auth_url, self.secret_key,
                             self.static_root, self.log,
                             horizon_config=self.horizon_config,
                             extra=self.extra_settings)

    def _configure(self):
        os.makedirs(self.static_root, exist_ok=True)
        with open(self.settings_file, "w") as f:
            f.write(self.settings())

    def install_plugin(self):
        """``python -m dtn_migrate.dashboard.install`` into Horizon."""
        _base.run([self.python, "-m", INSTALLER], self.install_log,
                  env=self.environment(), timeout=120)

    def environment(self):
        """The server's (and the installer's) environment."""
        env = {k: v for k, v in os.environ.items()
               if k not in ("DJANGO_SETTINGS_MODULE", "PYTHONPATH")}
        env.update(self.env)
        env["DJANGO_SETTINGS_MODULE"] = SETTINGS_MODULE
        env["PYTHONPATH"] = os.pathsep.join(
            [self.dir, devcloud_api.project_root()] + self.pythonpath)
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def command(self):
        return [self.python, "-m", "django", "runserver", "--insecure",
                "--noreload", "127.0.0.1:%d" % self.port]

    def start(self, timeout=120):
        """Install the plugin, write the settings, start the server, wait
        until it answers and load the login page once (``start_seconds``
        and ``warm_seconds`` tell how long it took).
        """
        if self.running:
            return self
        if self.die_with_parent and \
                threading.current_thread() is not threading.main_thread():
            raise _base.ServerFailed(
                "%s: start servers from the main thread (or set "
                "die_with_parent = False)" % self.dir)
        t0 = time.monotonic()
        if self.plugin:
            self.install_plugin()
        self._configure()
        for attempt in range(3):
            _base.wait_port_free(self.port)
            self._launch()
            try:
                self.wait_ready(timeout)
                break
            except _base.ServerFailed:
                lost_port = "port is already in use" in self._tail(
                    self.server_log)
                self.stop(kill=True)
                if not (lost_port and self._auto_port and attempt < 2):
                    raise
                self.port = _base.free_port()
        try:
            t1 = time.monotonic()
            self.warm(timeout=timeout)
            self.warm_seconds = time.monotonic() - t1
        except BaseException:
            self.stop(kill=True)
            raise
        self.start_seconds = time.monotonic() - t0
        return self

    def launch(self):
        """Install the plugin, write the settings and start the server
        without waiting (then :meth:`wait_ready` and :meth:`warm`), so
        that it loads while other servers start.
        """
        if self.plugin:
            self.install_plugin()
        self._configure()
        self._launch()

    def _launch(self):
        cmd = self.command()
        setpriv = shutil.which("setpriv")
        if self.die_with_parent and setpriv:
            cmd = [setpriv, "--pdeathsig", "TERM"] + cmd
        with open(self.server_log, "ab") as log:
            self.proc = subprocess.Popen(
                cmd, cwd=self.dir, env=self.environment(),
                stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True)

    def warm(self, path=None, timeout=120):
        """GET PATH (default: the login page) until it answers 200: the
        first one compiles and compresses the page's assets.
        """
        url = self.endpoint + (path or self.login_path)
        seen = {"status": None}

        def answered():
            if not self.running:
                raise _base.ServerFailed("horizon %s exited: %s" % (
                    self.name, self._tail(self.server_log)))
            try:
                with urllib.request.urlopen(url, timeout=timeout) as resp:
                    seen["status"] = resp.status
            except urllib.error.HTTPError as e:
                seen["status"] = e.code
            except OSError:
                seen["status"] = None
            return seen["status"] == 200

        if not polling.poll(answered, timeout, 0.2):
            raise _base.ServerFailed("horizon %s: %s answered %s: %s" % (
                self.name, url, seen["status"], self._tail(self.server_log)))

    def _logs(self):
        return [self.log, self.server_log, self.install_log]
