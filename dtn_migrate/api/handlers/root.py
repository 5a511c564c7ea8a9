"""GET / and GET /v1/: the API's versions."""

from dtn_migrate.api import middleware

VERSION = 'v1'


def _version(req):
    return {'id': VERSION, 'status': 'CURRENT',
            'links': [{'rel': 'self',
                       'href': req.application_url + '/' + VERSION + '/'}]}


def versions(api, req):
    return middleware.json_response(200, {'versions': [_version(req)]})


def version(api, req):
    return middleware.json_response(200, {'version': _version(req)})
