"""The request context: who asks, passed from the API to the engine.

Over RPC the context travels as the plain dict of
:meth:`RequestContext.to_dict` (oslo.messaging passes dicts through);
:func:`from_rpc` turns it back into a context.  The engine cannot check
a context (it holds no token it could validate): it believes what its
cloud's bus carries, so the bus must let only the cloud's own services
publish (see the security model in the admin guide).

A caller's request must say who asks: the API sends the user's context
(project, user, roles, request id); the service's own components that
act on the bus, ``dtn-migrate-manage``'s bus-only commands and the
engine's internal work, send :func:`get_service_context` (an
administrator's, naming the component).  An empty context is refused
(:func:`from_rpc`): it was once taken for an administrator's.
"""

from oslo_context import context

from dtn_migrate import exception
from dtn_migrate.i18n import _

#: The component an internal call comes from when it names none.
ENGINE = 'dtn-migrate-engine'


class RequestContext(context.RequestContext):
    """oslo.context's context; ``is_admin`` comes from the policy
    ``context_is_admin`` when the API builds it.  Its dict carries the
    user's name too (the component's, for a service context), which
    oslo.context's leaves out and :meth:`from_dict` reads.
    """

    def to_dict(self):
        out = super().to_dict()
        out['user_name'] = self.user_name
        return out


def get_service_context(name):
    """An administrator's context for the work of the service's own
    component ``name`` (``dtn-migrate-manage``, the engine): no token,
    no project, ``name`` as the user name the engine logs.
    """
    return RequestContext(is_admin=True, user_name=name, overwrite=False)


def get_admin_context(name=ENGINE):
    """The context of the engine's own work (see get_service_context)."""
    return get_service_context(name)


def from_rpc(ctxt):
    """The context of a user-facing call, from what arrived over RPC.

    Raises Forbidden for a context that names no caller: empty (what
    the fake transport delivers of ``{}``; a real one adds keys of its
    own), not a mapping, or neither an administrator's nor one of a
    project (whose scope would be every project's records).
    """
    if isinstance(ctxt, RequestContext):
        ctx = ctxt
    elif isinstance(ctxt, dict) and ctxt:
        ctx = RequestContext.from_dict(dict(ctxt))
    else:
        ctx = None
    if ctx is None or (not ctx.is_admin and not ctx.project_id):
        raise exception.Forbidden(reason=_(
            "a request over the bus whose context names no caller "
            "(neither an administrator's nor one of a project); send the "
            "caller's (the API's), or a service context naming the "
            "component (dtn_migrate.context.get_service_context)"))
    return ctx


def caller(ctx):
    """Who asks, for the log: user (its name for a service), project and
    request id.
    """
    return "user %s project %s request %s%s" % (
        ctx.user_id or ctx.user_name or "-", ctx.project_id or "-",
        ctx.request_id or "-", " (admin)" if ctx.is_admin else "")
