"""Helpers of the handlers."""

import json
import urllib.parse
import uuid

from dtn_migrate.api import middleware
from dtn_migrate.common import text
from dtn_migrate import exception
from dtn_migrate.i18n import _
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


def authorize_options(api, ctxt, options, rules, current=None):
    """403 naming the option, when ``options`` asks for one that the
    caller's rule does not allow: ``rules`` are (option, rule, asks),
    ``asks(value)`` true when the value needs the rule.  A value equal
    to ``current``'s (the options of what is being changed) asks for
    nothing new.
    """
    for key, rule, asks in rules:
        if key not in options or not asks(options[key]):
            continue
        if current is not None and current.get(key) == options[key]:
            continue
        if not may(api, ctxt, rule, ctxt.project_id):
            raise exception.PolicyNotAuthorized(
                message=_("Policy does not allow options.%(option)s "
                          "%(value)s (rule %(rule)s).") % {
                    'option': key, 'value': json.dumps(options[key]),
                    'rule': rule}, action=rule)


def engine_call(method, *args, **kwargs):
    """Call the engine; a bus failure is 503 EngineUnavailable."""
    try:
        return method(*args, **kwargs)
    except middleware.BUS_ERRORS as exc:
        text = str(exc).splitlines()[0] if str(exc) else \
            exc.__class__.__name__
        raise exception.EngineUnavailable(reason=text)


def page_size(api, params):
    """A listing's ``limit``, or [api] default_limit."""
    conf = api.conf.api
    return params.get('limit', min(conf.default_limit, conf.max_limit))


def next_href(req, marker):
    """The URL of the page after ``marker``, with the same query."""
    params = [(k, v) for k, v in req.GET.items() if k != 'marker']
    params.append(('marker', marker))
    return req.path_url + '?' + urllib.parse.urlencode(params)


def listing(req, key, rows, limit, view, marker_key='id'):
    """The 200 answer of a listing: the first ``limit`` of ``rows`` (read
    with ``limit + 1``) through ``view``, and a ``next`` link when there
    are more.
    """
    body = {key: [view(row) for row in rows[:limit]]}
    if len(rows) > limit:
        body['links'] = [{'rel': 'next', 'href': next_href(
            req, rows[limit - 1][marker_key])}]
    return middleware.json_response(200, body)


def owned(api, ctxt, action, record_id, fetch, not_found):
    """The row ``fetch(id)`` gives for ``record_id`` (a UUID, hex or
    dashed), if the caller may ``action`` it; else ``not_found(id)``
    raised, as for a missing one (or 403 when the caller's role may not
    do ``action`` at all).  Another project's record is answered as
    missing, so that a member learns nothing about it.
    """
    authorize(api, ctxt, action)
    try:
        key = uuid_hex(record_id)
    except ValueError:
        raise not_found(text.shorten(record_id))
    row = fetch(key)
    if not may(api, ctxt, action, row.get('project_id')):
        raise not_found(text.shorten(record_id))
    return row
