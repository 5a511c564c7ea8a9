"""Helpers of the handlers."""

import uuid

from dtn_migrate.api import middleware
from dtn_migrate import exception
from dtn_migrate import policy


def context(req):
    return req.environ[middleware.CONTEXT_KEY]


def uuid_hex(value):
    """A UUID (hex or dashed) as the 32 hex digits records use."""
    return uuid.UUID(value).hex


def uuid_dashed(value):
    return str(uuid.UUID(value))


def authorize(api, ctxt, action, project_id=None):
    """Check ``action`` for the caller's own project (a role check:
    403 when it fails).
    """
    policy.authorize(ctxt, action, {'project_id': project_id or
                                    ctxt.project_id}, api.enforcer)


def may(api, ctxt, action, project_id):
    return policy.check(ctxt, action, {'project_id': project_id},
                        api.enforcer)


def engine_call(method, *args, **kwargs):
    """Call the engine; a bus failure is 503 EngineUnavailable."""
    try:
        return method(*args, **kwargs)
    except middleware.BUS_ERRORS as exc:
        text = str(exc).splitlines()[0] if str(exc) else \
            exc.__class__.__name__
        raise exception.EngineUnavailable(reason=text)
