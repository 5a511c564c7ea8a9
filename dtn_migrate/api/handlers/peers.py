"""/v1/peers: the peer DTNs' health, as this cloud's agent sees it."""

import re

from dtn_migrate.api.handlers import common
from dtn_migrate.api import middleware
from dtn_migrate.api.schemas import peers as schemas
from dtn_migrate.api import validation
from dtn_migrate.api import views
from dtn_migrate import exception
from dtn_migrate.i18n import _

_NAME = re.compile(r'^[^\x00-\x1f\x7f]{1,255}$')


def index(api, req):
    ctxt = common.context(req)
    validation.query(req, schemas.LIST_QUERY)
    common.authorize(api, ctxt, 'dtn:peer:list')
    peers = common.engine_call(api.engine.list_peers, ctxt.to_dict())
    return middleware.json_response(
        200, {'peers': [views.peer(p) for p in peers or []]})


def show(api, req, name):
    ctxt = common.context(req)
    validation.query(req, schemas.LIST_QUERY)
    common.authorize(api, ctxt, 'dtn:peer:show')
    if not _NAME.match(name):
        raise exception.PeerNotFound(
            message=_("Unknown peer DTN %s.") % repr(name)[:80])
    peer = common.engine_call(api.engine.get_peer, ctxt.to_dict(), name)
    return middleware.json_response(200, {'peer': views.peer(peer)})
