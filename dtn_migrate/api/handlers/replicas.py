"""/v1/replicas: the replica catalog, read from the database.

A member sees the entries of its project's images; an administrator
may ask for every project's (all_projects).
"""

from dtn_migrate.api.handlers import common
from dtn_migrate.api.schemas import replicas as schemas
from dtn_migrate.api import validation
from dtn_migrate.api import views


def index(api, req):
    ctxt = common.context(req)
    conf = api.conf.api
    common.authorize(api, ctxt, 'dtn:replica:list')
    params = validation.query(req, schemas.list_query(conf.max_limit))
    project_id = ctxt.project_id
    if params.get('all_projects'):
        common.authorize(api, ctxt, 'dtn:replica:list:all_projects')
        project_id = None
    filters = {}
    for key in ('peer', 'direction'):
        if key in params:
            filters[key] = params[key]
    if 'state' in params:
        filters['state'] = sorted(set(params['state']))
    if 'policy_id' in params:
        filters['policy_id'] = common.uuid_hex(params['policy_id'])
    if 'source_image_id' in params:
        filters['source_image_id'] = common.uuid_dashed(
            params['source_image_id'])
    limit = common.page_size(api, params)
    rows = api.db.replica_get_all(filters=filters,
                                  marker=params.get('marker'),
                                  limit=limit + 1, project_id=project_id)
    return common.listing(req, 'replicas', rows, limit, views.replica)
