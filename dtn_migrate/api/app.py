"""The dtn-migrate-api WSGI application, wired in code.

Middleware, outermost first: JSON error bodies, http_proxy_to_wsgi,
request_id, CORS, the request body size limit, authentication
(keystonemiddleware auth_token, or noauth2 for tests), the request
context, and the fault barrier around the router.
"""

from keystonemiddleware import auth_token
from oslo_middleware import cors
from oslo_middleware import http_proxy_to_wsgi
from oslo_middleware import request_id
from oslo_middleware import sizelimit

from dtn_migrate.api import middleware
from dtn_migrate.api import router
from dtn_migrate import policy


class Api:
    """What the handlers use: the configuration, the policy enforcer,
    the database (:mod:`dtn_migrate.db.api` or a ``Database``) and the
    engine's RPC client (made on first use).
    """

    def __init__(self, conf, db=None, engine=None, enforcer=None):
        self.conf = conf
        if db is None:
            from dtn_migrate.db import api as db_api
            db = db_api
        self.db = db
        self._engine = engine
        self.enforcer = enforcer or policy.make_enforcer(conf)

    @property
    def engine(self):
        if self._engine is None:
            from dtn_migrate.engine import rpcapi
            self._engine = rpcapi.EngineAPI(
                timeout=self.conf.api.engine_timeout)
        return self._engine


def deploy(conf, api=None):
    """The WSGI application of ``conf`` (a parsed ConfigOpts)."""
    api = api or Api(conf)
    routed = middleware.FaultWrapper(router.Router(api))
    app = middleware.Context(routed, api.enforcer)
    if conf.api.auth_strategy == 'keystone':
        app = auth_token.AuthProtocol(app, {'oslo_config_config': conf,
                                            'oslo_config_project':
                                            'dtn-migrate'})
    else:
        app = middleware.NoAuth(app)
    app = middleware.RootBypass(app, routed)
    app = sizelimit.RequestBodySizeLimiter(app, conf)
    app = cors.CORS(app, conf)
    app = request_id.RequestId(app)
    app = http_proxy_to_wsgi.HTTPProxyToWSGI(app, conf)
    return middleware.JsonErrors(app)
