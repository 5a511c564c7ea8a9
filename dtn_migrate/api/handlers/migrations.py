"""/v1/migrations: create, list, show, and the cancel and retry
actions.

Records of another project are answered as missing (404), so that a
member learns nothing about them; a role that may not do something at
all is answered 403.
"""

import uuid

from dtn_migrate.api.handlers import common
from dtn_migrate.api import middleware
from dtn_migrate.api.schemas import migrations as schemas
from dtn_migrate.api import validation
from dtn_migrate.api import views
from dtn_migrate import exception
from dtn_migrate.i18n import _

_EITHER = _("give either images (a list of image ids) or a selector "
            "(tag and/or properties), not both")
#: The root-level combinators of the body schema say one thing.
CREATE_MESSAGES = {'oneOf': _EITHER, 'anyOf': _EITHER, 'not': _EITHER}
VISIBILITY_RULE = 'dtn:migration:create:visibility'
#: What a caller asks of the peer only with a rule of its own: (option,
#: rule, whether a value asks for it).
OPTION_RULES = (
    ('target_project', 'dtn:migration:create:target_project',
     lambda value: value is not None),
    ('visibility', VISIBILITY_RULE,
     lambda value: value not in (None, 'private')),
    ('keep_id', 'dtn:migration:create:keep_id', bool),
)


def _options(api, ctxt, options):
    """The options the engine gets: 403 for one the caller may not ask
    for; without the visibility rule, the images are imported private
    rather than with the source image's visibility (which a member
    cannot choose, but may read: a public or community image).
    """
    options = dict(options or {})
    common.authorize_options(api, ctxt, options, OPTION_RULES)
    if options.get('visibility') is None and \
            not common.may(api, ctxt, VISIBILITY_RULE, ctxt.project_id):
        options['visibility'] = 'private'
    return options


def create(api, req):
    ctxt = common.context(req)
    common.authorize(api, ctxt, 'dtn:migration:create')
    body = validation.json_body(req, schemas.CREATE, CREATE_MESSAGES)
    options = _options(api, ctxt, body.get('options'))
    request_id = common.uuid_hex(body['request_id']) \
        if 'request_id' in body else uuid.uuid4().hex
    images = None
    selector = None
    if 'images' in body:
        images = []
        for image in body['images']:
            image = common.uuid_dashed(image)
            if image not in images:
                images.append(image)
    else:
        selector = {key: body[key] for key in ('tag', 'properties')
                    if key in body}
    try:
        result = common.engine_call(
            api.engine.migrate, ctxt.to_dict(), body['peer'],
            images=images, selector=selector,
            options=options, request_id=request_id)
    except exception.EngineUnavailable as exc:
        raise exception.EngineUnavailable(reason=_(
            "%(reason)s; follow request %(request_id)s with GET "
            "/v1/migrations?request_id=%(request_id)s") % {
            'reason': exc.kwargs.get('reason'), 'request_id': request_id})
    return middleware.json_response(202, {
        'request_id': result.get('request_id') or request_id,
        'migrations': [views.requested(row)
                       for row in result.get('migrations', [])]})


def index(api, req):
    ctxt = common.context(req)
    conf = api.conf.api
    common.authorize(api, ctxt, 'dtn:migration:list')
    params = validation.query(req, schemas.list_query(conf.max_limit))
    project_id = ctxt.project_id
    if params.get('all_projects'):
        common.authorize(api, ctxt, 'dtn:migration:list:all_projects')
        project_id = None
    filters = {}
    if 'state' in params:
        filters['state'] = sorted(set(params['state']))
    for key in ('peer', 'direction'):
        if key in params:
            filters[key] = params[key]
    if 'image_id' in params:
        filters['image_id'] = common.uuid_dashed(params['image_id'])
    if 'request_id' in params:
        filters['request_id'] = common.uuid_hex(params['request_id'])
    if 'changes-since' in params:
        filters['changes_since'] = validation.parse_time(
            params['changes-since'])
    limit = common.page_size(api, params)
    marker = common.uuid_hex(params['marker']) if 'marker' in params \
        else None
    sort_keys = sort_dirs = None
    if 'sort_key' in params or 'sort_dir' in params:
        sort_keys = [params.get('sort_key', 'created_at')]
        sort_dirs = [params.get('sort_dir', 'desc')]
    rows = api.db.migration_get_all(
        filters=filters, marker=marker, limit=limit + 1,
        sort_keys=sort_keys, sort_dirs=sort_dirs, project_id=project_id)
    return common.listing(req, 'migrations', rows, limit, views.migration)


def _get(api, ctxt, migration_id, action):
    """The record, if the caller may ``action`` it; else 404 (or 403
    when the caller's role may not do ``action`` at all).
    """
    return common.owned(
        api, ctxt, action, migration_id, api.db.migration_get,
        lambda key: exception.MigrationNotFound(migration_id=key))


def show(api, req, migration_id):
    ctxt = common.context(req)
    validation.query(req, schemas.SHOW_QUERY)
    row = _get(api, ctxt, migration_id, 'dtn:migration:show')
    events = api.db.migration_events_get(row['id'])
    return middleware.json_response(
        200, {'migration': views.migration_detail(row, events)})


def action(api, req, migration_id):
    ctxt = common.context(req)
    body = validation.json_body(req, schemas.ACTION)
    name = next(iter(body))
    row = _get(api, ctxt, migration_id, 'dtn:migration:%s' % name)
    method = {'cancel': api.engine.cancel_migration,
              'retry': api.engine.retry_migration}[name]
    result = common.engine_call(method, ctxt.to_dict(), row['id'])
    return middleware.json_response(202,
                                    {'migration': views.migration(result)})
