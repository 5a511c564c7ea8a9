"""[api] options of dtn-migrate-api, and the defaults it gives the
oslo.policy and CORS options.
"""

from oslo_config import cfg
from oslo_middleware import cors

from dtn_migrate.conf import utils

api_group = cfg.OptGroup(
    'api', title='REST API options',
    help='dtn-migrate-api serves the v1 REST API under a WSGI server '
         '(uwsgi), behind Keystone.')

api_opts = [
    cfg.StrOpt(
        'auth_strategy', default='keystone', choices=['keystone', 'noauth2'],
        help='keystone: keystonemiddleware auth_token checks every request. '
             'noauth2: trust the X-User-Id, X-Project-Id and X-Roles '
             'headers (tests only; never in production).'),
    cfg.IntOpt(
        'max_limit', default=1000, min=1,
        help='Largest page a listing returns.'),
    cfg.IntOpt(
        'default_limit', default=100, min=1,
        help='Page size of a listing that asks for none (at most '
             'max_limit).'),
    cfg.FloatOpt(
        'engine_timeout', default=60.0, min=1.0,
        help='Seconds the API waits for the engine to answer a request '
             'before it answers 503.'),
]

#: Headers a browser client (Horizon's JavaScript) may send and read.
CORS_ALLOW_HEADERS = ['X-Auth-Token', 'X-Openstack-Request-Id',
                      'X-Identity-Status', 'X-Roles', 'X-Service-Catalog',
                      'X-User-Id', 'X-Tenant-Id', 'X-Project-Id',
                      'Content-Type']
CORS_EXPOSE_HEADERS = ['X-Auth-Token', 'X-Openstack-Request-Id',
                       'X-Subject-Token', 'X-Service-Token']


def set_defaults():
    """The API's defaults of oslo.middleware's [cors] options."""
    cors.set_defaults(allow_headers=CORS_ALLOW_HEADERS,
                      expose_headers=CORS_EXPOSE_HEADERS,
                      allow_methods=['GET', 'POST'])


def register_opts(conf):
    utils.register(conf, api_group, api_opts)
    set_defaults()


def list_opts():
    return {api_group: api_opts}
