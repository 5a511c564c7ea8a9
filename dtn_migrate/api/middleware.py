"""The WSGI middleware of dtn-migrate-api written here: JSON errors, the
fault barrier, the request context and the noauth2 identity.
"""

from oslo_db import exception as db_exc
from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_serialization import jsonutils
import webob
import webob.dec
import webob.exc

from dtn_migrate.api import fault
from dtn_migrate import context as context_mod
from dtn_migrate import exception
from dtn_migrate.i18n import _
from dtn_migrate import policy

LOG = logging.getLogger(__name__)

#: Where the request's context lives in the WSGI environment.
CONTEXT_KEY = 'dtn_migrate.context'
#: Failures to reach the engine over the bus: 503, not 500.
BUS_ERRORS = (messaging.MessagingTimeout,
              messaging.MessageDeliveryFailure,
              messaging.MessagingServerError)
DB_ERRORS = (db_exc.DBConnectionError,)


def _request_id(req):
    return req.environ.get('openstack.request_id')


class JsonErrors:
    """Outermost: an error response that some middleware made in HTML or
    text (the size limit's 413, say) gets the API's JSON error body.
    """

    def __init__(self, application):
        self.application = application

    @webob.dec.wsgify
    def __call__(self, req):
        try:
            resp = req.get_response(self.application)
        except Exception:  # noqa: B902 - a middleware's bug, logged
            LOG.exception("request %s %s (%s) failed in the middleware",
                          req.method, req.path, _request_id(req))
            return fault.response(500, _(
                "The server failed to handle the request (request id "
                "%s); its log has the details.") % _request_id(req))
        if resp.status_int < 400 or resp.content_type == fault.JSON:
            return resp
        new = fault.response(resp.status_int,
                             fault.explanation(resp.status_int))
        for name, value in resp.headers.items():
            if name.lower() not in ('content-type', 'content-length'):
                new.headers[name] = value
        return new


class FaultWrapper:
    """Innermost: turns every exception of a handler into a JSON error.

    A DtnMigrateException answers its own code (4xx for the caller's
    mistakes, 503 when the database or the engine is away); a bus
    timeout answers 503; anything else is a bug: 500, logged with the
    request id.
    """

    def __init__(self, application):
        self.application = application

    @webob.dec.wsgify
    def __call__(self, req):
        try:
            return req.get_response(self.application)
        except webob.exc.HTTPException as exc:
            headers = {}
            if exc.status_int == 405 and exc.allow:
                headers['Allow'] = ', '.join(exc.allow)
            return fault.response(exc.status_int,
                                  exc.detail or fault.explanation(
                                      exc.status_int), headers)
        except exception.DtnMigrateException as exc:
            code = getattr(exc, 'code', 500)
            message = getattr(exc, 'message', None) or str(exc)
            if not isinstance(code, int) or not 400 <= code < 600:
                code = 500
            if code == 500:
                LOG.exception("request %s %s (%s) failed", req.method,
                              req.path, _request_id(req))
                message = _("The server failed to handle the request "
                            "(request id %s): %s") % (_request_id(req),
                                                      message)
            elif code >= 500:
                LOG.warning("request %s %s (%s): %s", req.method,
                            req.path, _request_id(req), message)
                if isinstance(exc, exception.DatabaseUnavailable):
                    # The driver's text (SQL, addresses) stays in the log.
                    message = exception.DatabaseUnavailable(
                        reason=_("see the API's log, request id %s")
                        % _request_id(req)).message
            return fault.response(code, message)
        except BUS_ERRORS as exc:
            LOG.warning("request %s %s (%s): engine: %s", req.method,
                        req.path, _request_id(req), exc)
            return fault.response(503, exception.EngineUnavailable(
                reason=str(exc).splitlines()[0] if str(exc)
                else exc.__class__.__name__).message)
        except DB_ERRORS as exc:
            LOG.warning("request %s %s (%s): database: %s", req.method,
                        req.path, _request_id(req), exc)
            return fault.response(503, exception.DatabaseUnavailable(
                reason=exc.__class__.__name__).message)
        except Exception:  # noqa: B902 - the barrier: a bug, logged
            LOG.exception("request %s %s (%s) failed", req.method,
                          req.path, _request_id(req))
            return fault.response(500, _(
                "The server failed to handle the request (request id "
                "%s); its log has the details.") % _request_id(req))


class NoAuth:
    """``[api] auth_strategy = noauth2`` (tests only): trust the
    X-User-Id, X-Project-Id and X-Roles headers a client sends.
    """

    def __init__(self, application):
        self.application = application

    @webob.dec.wsgify
    def __call__(self, req):
        if not req.headers.get('X-User-Id') or \
                not req.headers.get('X-Project-Id'):
            return fault.response(401, _(
                "noauth2: send X-User-Id and X-Project-Id (and X-Roles)."))
        req.headers['X-Identity-Status'] = 'Confirmed'
        return req.get_response(self.application)


class Context:
    """Builds the request's RequestContext from the identity headers
    (set by auth_token, or trusted by noauth2).
    """

    def __init__(self, application, enforcer):
        self.application = application
        self.enforcer = enforcer

    @webob.dec.wsgify
    def __call__(self, req):
        if req.headers.get('X-Identity-Status', 'Confirmed') != \
                'Confirmed':
            return fault.response(401, _(
                "The request you have made requires authentication."))
        ctxt = context_mod.RequestContext.from_environ(req.environ)
        if not ctxt.project_id:
            return fault.response(403, _(
                "dtn-migrate-api needs a project-scoped token."))
        ctxt.is_admin = policy.is_admin(ctxt, self.enforcer)
        req.environ[CONTEXT_KEY] = ctxt
        return req.get_response(self.application)


class RootBypass:
    """GET / (the version document) needs no token: it goes to
    ``public`` without authentication; everything else to ``protected``.
    """

    def __init__(self, protected, public):
        self.protected = protected
        self.public = public

    def __call__(self, environ, start_response):
        if environ.get('PATH_INFO', '') in ('', '/'):
            return self.public(environ, start_response)
        return self.protected(environ, start_response)


def json_response(status, body, headers=None):
    resp = webob.Response(status=status, content_type=fault.JSON,
                          charset='UTF-8')
    resp.body = jsonutils.dump_as_bytes(body)
    for name, value in (headers or {}).items():
        resp.headers[name] = value
    return resp
