"""/v1/drills: disaster-recovery drills of protection policies; start
one, list them, show one with its report.

A drill runs in the cloud that holds the replicas, on the policy the
incoming migrations made there (same id as on the protected cloud).
Starting one goes to the engine, which checks the policy (404 for an
unknown one or another project's) and runs the checks in the
background, one drill per policy at a time (409 names the one that
runs); reads come from the database.  A drill of another project
answers 404, a role that may not act at all 403; a drill with clones
needs dtn:drill:start:clone too.
"""

from dtn_migrate.api.handlers import common
from dtn_migrate.api import middleware
from dtn_migrate.api.schemas import drills as schemas
from dtn_migrate.api import validation
from dtn_migrate.api import views
from dtn_migrate import exception


#: Needed besides dtn:drill:start for clone=true (administrators).
CLONE_RULE = 'dtn:drill:start:clone'


def create(api, req):
    ctxt = common.context(req)
    common.authorize(api, ctxt, 'dtn:drill:start')
    body = validation.json_body(req, schemas.START)
    if body.get('clone'):
        common.authorize(api, ctxt, CLONE_RULE)
    record = common.engine_call(
        api.engine.start_drill, ctxt.to_dict(),
        common.uuid_hex(body['policy_id']), clone=body.get('clone', False))
    return middleware.json_response(202, {'drill': views.drill(record)})


def index(api, req):
    ctxt = common.context(req)
    conf = api.conf.api
    common.authorize(api, ctxt, 'dtn:drill:list')
    params = validation.query(req, schemas.list_query(conf.max_limit))
    project_id = ctxt.project_id
    if params.get('all_projects'):
        common.authorize(api, ctxt, 'dtn:drill:list:all_projects')
        project_id = None
    filters = {}
    if 'policy_id' in params:
        filters['policy_id'] = common.uuid_hex(params['policy_id'])
    if 'state' in params:
        filters['state'] = sorted(set(params['state']))
    limit = common.page_size(api, params)
    marker = common.uuid_hex(params['marker']) if 'marker' in params \
        else None
    rows = api.db.drill_get_all(filters=filters, marker=marker,
                                limit=limit + 1, project_id=project_id)
    return common.listing(req, 'drills', rows, limit, views.drill)


def show(api, req, drill_id):
    ctxt = common.context(req)
    validation.query(req, schemas.SHOW_QUERY)
    row = common.owned(
        api, ctxt, 'dtn:drill:show', drill_id, api.db.drill_get,
        lambda key: exception.DrillNotFound(drill_id=key))
    return middleware.json_response(
        200, {'drill': views.drill(row, report=True)})
