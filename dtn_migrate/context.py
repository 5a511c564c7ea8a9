"""The request context: who asks, passed from the API to the engine.

Over RPC the context travels as the plain dict of
:meth:`RequestContext.to_dict` (oslo.messaging passes dicts through);
:func:`from_rpc` turns it back into a context.  Internal work (the
engine's own flows, ``dtn-migrate-manage`` on the bus) runs under
:func:`get_admin_context`, which carries no token.
"""

from oslo_context import context


class RequestContext(context.RequestContext):
    """oslo.context's context; ``is_admin`` comes from the policy
    ``context_is_admin`` when the API builds it.
    """


def get_admin_context():
    return RequestContext(is_admin=True, overwrite=False)


def from_rpc(ctxt):
    """A context from what arrived over RPC (a dict, maybe empty)."""
    if isinstance(ctxt, RequestContext):
        return ctxt
    if not ctxt:
        return get_admin_context()
    return RequestContext.from_dict(dict(ctxt))
