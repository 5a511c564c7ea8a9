"""/v1/policies: protection policies, which keep the images they select
replicated to a peer cloud; create, list, show, update, delete, the
sync, failover and failback actions, and the images a policy protects.

Reads come from the database; writes go to the engine, which owns the
policies (it checks the schedule's cron syntax and the peer, and starts
the replication).  As with migrations, a policy of another project
answers 404 and a role that may not act at all 403.
"""


import webob

from dtn_migrate.api.handlers import common
from dtn_migrate.api import middleware
from dtn_migrate.api.schemas import protection_policies as schemas
from dtn_migrate.api import validation
from dtn_migrate.api import views
from dtn_migrate import exception
from dtn_migrate.i18n import _

#: Allowed only with dtn:policy:create:projects (administrators).
PROJECTS_RULE = 'dtn:policy:create:projects'
#: What a policy asks of the peer only with a rule of its own (see
#: common.authorize_options).
OPTION_RULES = (
    ('target_project', 'dtn:policy:create:target_project',
     lambda value: value is not None),
    ('keep_id', 'dtn:policy:create:keep_id', bool),
)
#: Deleting a policy of another role than primary: a replica,
#: failed-over or failback policy (whose loss a failback feels).
DELETE_NON_PRIMARY_RULE = 'dtn:policy:delete:non_primary'


def _check_selector(selector):
    """A policy must select by something: never everything by accident
    (a selector of projects alone would copy whole projects).
    """
    if not any(selector.get(key) for key in schemas.SELECTING_KEYS):
        raise exception.InvalidInput(reason=_(
            "body selector: give at least one of %s (a policy never "
            "selects every image)") % ', '.join(schemas.SELECTING_KEYS))


def _check_schedule(mode, schedule):
    if mode == 'scheduled' and not schedule:
        raise exception.InvalidInput(reason=_(
            "body schedule is required when mode is scheduled (a cron "
            "expression of 5 fields, e.g. '0 2 * * *')"))
    if mode != 'scheduled' and schedule:
        raise exception.InvalidInput(reason=_(
            "body schedule is only for mode scheduled, not %s") % mode)


def _check_rules(api, ctxt, body, row=None):
    """403 for what only administrators ask by default: other projects'
    images or ownership, the replicas' project or ids on the peer (an
    option a change of policy ``row`` leaves as it is asks nothing).
    """
    selector = body.get('selector') or {}
    if selector.get('projects') or 'project_id' in body:
        common.authorize(api, ctxt, PROJECTS_RULE)
    current = None if row is None else views.policy(row)['options']
    common.authorize_options(api, ctxt, body.get('options') or {},
                             OPTION_RULES, current)


def create(api, req):
    ctxt = common.context(req)
    common.authorize(api, ctxt, 'dtn:policy:create')
    body = validation.json_body(req, schemas.CREATE)
    _check_selector(body['selector'])
    _check_schedule(body.get('mode', 'continuous'), body.get('schedule'))
    _check_rules(api, ctxt, body)
    record = common.engine_call(api.engine.create_policy, ctxt.to_dict(),
                                body)
    return middleware.json_response(201, {'policy': views.policy(record)})


def index(api, req):
    ctxt = common.context(req)
    common.authorize(api, ctxt, 'dtn:policy:list')
    params = validation.query(req, schemas.list_query(api.conf.api.max_limit))
    project_id = ctxt.project_id
    if params.get('all_projects'):
        common.authorize(api, ctxt, 'dtn:policy:list:all_projects')
        project_id = None
    filters = {}
    for key in ('mode', 'rpo_state'):
        if key in params:
            filters[key] = sorted(set(params[key]))
    for key in ('name', 'peer', 'enabled'):
        if key in params:
            filters[key] = params[key]
    limit = common.page_size(api, params)
    marker = common.uuid_hex(params['marker']) if 'marker' in params \
        else None
    sort_keys = sort_dirs = None
    if 'sort_key' in params or 'sort_dir' in params:
        sort_keys = [params.get('sort_key', 'created_at')]
        sort_dirs = [params.get('sort_dir', 'desc')]
    rows = api.db.policy_get_all(
        filters=filters, marker=marker, limit=limit + 1,
        sort_keys=sort_keys, sort_dirs=sort_dirs, project_id=project_id)
    page = rows[:limit]
    counts = api.db.policy_image_counts([r['id'] for r in page]) \
        if page else {}
    return common.listing(
        req, 'policies', rows, limit,
        lambda r: views.policy(r, counts.get(r['id']) or {}))


def _get(api, ctxt, policy_id, action):
    """The policy, if the caller may ``action`` it; else 404 (or 403
    when the caller's role may not do ``action`` at all).
    """
    return common.owned(
        api, ctxt, action, policy_id, api.db.policy_get,
        lambda key: exception.ProtectionPolicyNotFound(policy_id=key))


def show(api, req, policy_id):
    ctxt = common.context(req)
    validation.query(req, schemas.SHOW_QUERY)
    row = _get(api, ctxt, policy_id, 'dtn:policy:show')
    counts = api.db.policy_image_counts([row['id']]).get(row['id']) or {}
    return middleware.json_response(
        200, {'policy': views.policy(row, counts)})


def update(api, req, policy_id):
    ctxt = common.context(req)
    body = validation.json_body(req, schemas.UPDATE)
    row = _get(api, ctxt, policy_id, 'dtn:policy:update')
    if 'selector' in body:
        _check_selector(body['selector'])
    if 'mode' in body or body.get('schedule'):
        mode = body.get('mode', row.get('mode'))
        schedule = body['schedule'] if 'schedule' in body \
            else row.get('schedule')
        _check_schedule(mode, schedule)
    _check_rules(api, ctxt, body, row)
    record = common.engine_call(api.engine.update_policy, ctxt.to_dict(),
                                row['id'], body)
    return middleware.json_response(200, {'policy': views.policy(record)})


def delete(api, req, policy_id):
    ctxt = common.context(req)
    validation.query(req, schemas.SHOW_QUERY)
    row = _get(api, ctxt, policy_id, 'dtn:policy:delete')
    if (row.get('role') or 'primary') != 'primary':
        common.authorize(api, ctxt, DELETE_NON_PRIMARY_RULE,
                         row.get('project_id'))
    common.engine_call(api.engine.delete_policy, ctxt.to_dict(), row['id'])
    return webob.Response(status=204)


def _sync(api, ctxt, row):
    result = common.engine_call(api.engine.sync_policy, ctxt.to_dict(),
                                row['id']) or {}
    return {'policy': views.policy(result.get('policy') or row),
            'migrations': [views.migration(m)
                           for m in result.get('migrations') or []]}


def _failover(api, ctxt, row):
    result = common.engine_call(api.engine.failover_policy,
                                ctxt.to_dict(), row['id']) or {}
    return {'policy': views.policy(result.get('policy') or row),
            'reverse_policy': views.policy(result.get('reverse_policy')
                                           or {}),
            'promoted': max(int(result.get('promoted') or 0), 0)}


def _failback(api, ctxt, row):
    result = common.engine_call(api.engine.failback_policy,
                                ctxt.to_dict(), row['id']) or {}
    reverse = result.get('reverse_policy')
    return {'policy': views.policy(result.get('policy') or row),
            'reverse_policy': views.policy(reverse) if reverse else None,
            'migrations': [views.migration(m)
                           for m in result.get('migrations') or []],
            'complete': bool(result.get('complete'))}


#: The actions of POST /v1/policies/{id}/action; each checks the rule
#: dtn:policy:<action>.  failover and failback are an operator's: they
#: run in the cloud holding the replicas, on the policy learnt from the
#: peer (whose project is rarely the operator's).
ACTIONS = {'sync': _sync, 'failover': _failover, 'failback': _failback}


def action(api, req, policy_id):
    ctxt = common.context(req)
    body = validation.json_body(req, schemas.ACTION)
    name = next(iter(body))
    row = _get(api, ctxt, policy_id, 'dtn:policy:%s' % name)
    return middleware.json_response(202, ACTIONS[name](api, ctxt, row))


def images(api, req, policy_id):
    """The images a policy protects, oldest first, a page at a time."""
    ctxt = common.context(req)
    params = validation.query(req,
                              schemas.images_query(api.conf.api.max_limit))
    row = _get(api, ctxt, policy_id, 'dtn:policy:show')
    states = sorted(set(params['state'])) if 'state' in params else None
    marker = common.uuid_dashed(params['marker']) if 'marker' in params \
        else None
    limit = common.page_size(api, params)
    rows = api.db.policy_images_get(policy_id=row['id'], states=states,
                                    marker=marker, limit=limit + 1)
    return common.listing(req, 'images', rows, limit, views.policy_image,
                          marker_key='image_id')
