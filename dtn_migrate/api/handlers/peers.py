"""/v1/peers: the peer DTNs' health, as this cloud's agent sees it.

Every reader sees whether a peer is reachable and how fast; where its
DTN listens and the raw error of its last probe only a caller with
``dtn:peer:show:details`` (administrators) sees.
"""

import re

from dtn_migrate.api.handlers import common
from dtn_migrate.api import middleware
from dtn_migrate.api.schemas import peers as schemas
from dtn_migrate.api import validation
from dtn_migrate.api import views
from dtn_migrate.common import text
from dtn_migrate import exception
from dtn_migrate.i18n import _

_NAME = re.compile(r'^[^\x00-\x1f\x7f]{1,255}$')
DETAILS_RULE = 'dtn:peer:show:details'


def _view(api, ctxt):
    """The view of a peer for this caller."""
    details = common.may(api, ctxt, DETAILS_RULE, ctxt.project_id)
    return lambda health: views.peer(health, details=details)


def index(api, req):
    ctxt = common.context(req)
    validation.query(req, schemas.LIST_QUERY)
    common.authorize(api, ctxt, 'dtn:peer:list')
    peers = common.engine_call(api.engine.list_peers, ctxt.to_dict())
    view = _view(api, ctxt)
    return middleware.json_response(
        200, {'peers': [view(p) for p in peers or []]})


def show(api, req, name):
    ctxt = common.context(req)
    validation.query(req, schemas.LIST_QUERY)
    common.authorize(api, ctxt, 'dtn:peer:show')
    if not _NAME.match(name):
        raise exception.PeerNotFound(
            message=_("Unknown peer DTN %s.") % text.quote(name))
    peer = common.engine_call(api.engine.get_peer, ctxt.to_dict(), name)
    return middleware.json_response(200, {'peer': _view(api, ctxt)(peer)})
