"""The WSGI entry point of dtn-migrate-api.

uwsgi serves ``dtn_migrate.api.wsgi:application`` (built on the first
request) or calls :func:`init_application` (pbr's ``wsgi_scripts``).
The configuration files are, in this order of precedence:
``$OS_DTN_MIGRATE_CONFIG_FILES`` (comma-separated) or
``$OS_DTN_MIGRATE_CONFIG_FILE``; ``--config-file`` arguments in the
process' argv (uwsgi's ``pyargv``); ``/etc/dtn-migrate/dtn-migrate.conf``
when it exists.
"""

import os
import sys
import threading

from oslo_log import log as logging

from dtn_migrate.api import app as app_mod
from dtn_migrate import config
from dtn_migrate import conf as dtn_conf
from dtn_migrate import exception
from dtn_migrate import rpc

LOG = logging.getLogger(__name__)

DEFAULT_CONFIG_FILE = '/etc/dtn-migrate/dtn-migrate.conf'
CONFIG_FILES_ENV = 'OS_DTN_MIGRATE_CONFIG_FILES'
CONFIG_FILE_ENV = 'OS_DTN_MIGRATE_CONFIG_FILE'


def config_files(environ=None, argv=None):
    """The configuration files the application reads."""
    environ = os.environ if environ is None else environ
    argv = sys.argv[1:] if argv is None else argv
    for name in (CONFIG_FILES_ENV, CONFIG_FILE_ENV):
        value = environ.get(name)
        if value:
            return [f.strip() for f in value.split(',') if f.strip()]
    files = []
    args = iter(argv)
    for arg in args:
        if arg == '--config-file':
            files.append(next(args, None))
        elif arg.startswith('--config-file='):
            files.append(arg.split('=', 1)[1])
    files = [f for f in files if f]
    if files:
        return files
    return [DEFAULT_CONFIG_FILE] if os.path.exists(DEFAULT_CONFIG_FILE) \
        else []


def init_application(files=None):
    """Parse the configuration, set up logging, the database and the
    bus, and return the WSGI application.
    """
    conf = dtn_conf.CONF
    files = config_files() if files is None else files
    missing = [f for f in files if not os.path.isfile(f)]
    if missing:
        raise exception.ConfigError(
            reason='configuration file(s) not found: %s'
                   % ', '.join(missing))
    config.parse_args(['dtn-migrate-api'], default_config_files=files)
    logging.setup(conf, 'dtn-migrate-api')
    from dtn_migrate.db import api as db_api
    db_api.configure(conf)
    rpc.init(conf)
    LOG.info("dtn-migrate-api: configuration %s, auth strategy %s",
             ', '.join(files) or '(defaults)', conf.api.auth_strategy)
    return app_mod.deploy(conf)


class _LazyApplication:
    """A WSGI application that builds the real one on its first call
    (importing this module parses no configuration).
    """

    def __init__(self):
        self._app = None
        self._lock = threading.Lock()

    def __call__(self, environ, start_response):
        if self._app is None:
            with self._lock:
                if self._app is None:
                    self._app = init_application()
        return self._app(environ, start_response)


application = _LazyApplication()
