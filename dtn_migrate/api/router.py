"""URL routing of the v1 API (Routes): a handler per path and method;
a known path with another method answers 405 with ``Allow``, an unknown
path 404.
"""

import routes
import webob.dec

from dtn_migrate.api import fault
from dtn_migrate.api.handlers import drills
from dtn_migrate.api.handlers import migrations
from dtn_migrate.api.handlers import peers
from dtn_migrate.api.handlers import protection_policies
from dtn_migrate.api.handlers import replicas
from dtn_migrate.api.handlers import root
from dtn_migrate.i18n import _

#: (path, {method: handler}); the OpenAPI document lists the same.
ROUTES = (
    ('/', {'GET': root.versions}),
    ('/v1', {'GET': root.version}),
    ('/v1/', {'GET': root.version}),
    ('/v1/migrations', {'GET': migrations.index,
                        'POST': migrations.create}),
    ('/v1/migrations/{migration_id}', {'GET': migrations.show}),
    ('/v1/migrations/{migration_id}/action', {'POST': migrations.action}),
    ('/v1/peers', {'GET': peers.index}),
    ('/v1/peers/{name}', {'GET': peers.show}),
    ('/v1/policies', {'GET': protection_policies.index,
     'POST': protection_policies.create}),
    ('/v1/policies/{policy_id}', {'GET': protection_policies.show,
                                  'PUT': protection_policies.update,
                                  'DELETE': protection_policies.delete}),
    ('/v1/policies/{policy_id}/action', {'POST': protection_policies.action}),
    ('/v1/policies/{policy_id}/images', {'GET': protection_policies.images}),
    ('/v1/replicas', {'GET': replicas.index}),
    ('/v1/drills', {'GET': drills.index, 'POST': drills.create}),
    ('/v1/drills/{drill_id}', {'GET': drills.show}),
)


def make_mapper():
    mapper = routes.Mapper()
    for path, methods in ROUTES:
        for method, handler in methods.items():
            mapper.connect(path, handler=handler,
                           conditions={'method': [method]})
        mapper.connect(path, allowed=', '.join(sorted(methods)))
    return mapper


class Router:

    def __init__(self, api):
        self.api = api
        self.mapper = make_mapper()

    @webob.dec.wsgify
    def __call__(self, req):
        try:
            match = self.mapper.match(environ=req.environ)
        except (UnicodeError, ValueError):
            match = None
        if not match:
            return fault.response(
                404, _("No resource at %s.") % req.path_info[:200])
        if 'allowed' in match:
            allowed = match['allowed']
            return fault.response(
                405, _("%(method)s is not allowed on %(path)s (allowed: "
                       "%(allowed)s).") % {'method': req.method[:20],
                                           'path': req.path_info[:200],
                                           'allowed': allowed},
                headers={'Allow': allowed})
        kwargs = {k: v for k, v in match.items()
                  if k not in ('handler', 'allowed')}
        return match['handler'](self.api, req, **kwargs)
