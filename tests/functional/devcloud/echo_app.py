"""A WSGI application standing in for dtn-migrate-api in the harness
test: loaded by ApiServer's uwsgi from the project's venv, it reads the
configuration file the way the API does ($OS_DTN_MIGRATE_CONFIG_FILES),
runs keystonemiddleware's auth_token with its ``[keystone_authtoken]``
and answers the identity it saw as JSON.
"""

import json
import os
import sys

from keystonemiddleware import auth_token
from oslo_config import cfg

CONF = cfg.ConfigOpts()
CONF.register_opts([cfg.StrOpt("transport_url")])
CONF.register_opts([cfg.StrOpt("connection")], group="database")
CONF.register_opts([cfg.StrOpt("auth_strategy")], group="api")


def _identity(environ, start_response):
    body = {
        "identity_status": environ.get("HTTP_X_IDENTITY_STATUS"),
        "user_id": environ.get("HTTP_X_USER_ID"),
        "project_id": environ.get("HTTP_X_PROJECT_ID"),
        "roles": sorted(filter(None, environ.get(
            "HTTP_X_ROLES", "").split(","))),
        "transport_url": CONF.transport_url,
        "database": CONF.database.connection,
        "auth_strategy": CONF.api.auth_strategy,
        "argv": sys.argv,
        "prefix": sys.prefix,
    }
    status = "200 OK"
    if body["identity_status"] != "Confirmed":
        status = "401 Unauthorized"
    start_response(status, [("Content-Type", "application/json")])
    return [json.dumps(body).encode()]


def _load():
    files = os.environ["OS_DTN_MIGRATE_CONFIG_FILES"].split(",")
    CONF([], project="dtn-migrate", default_config_files=files)
    return auth_token.AuthProtocol(_identity, {"oslo_config_config": CONF,
                                               "delay_auth_decision": True})


application = _load()
