"""[api] options of dtn-migrate-api."""

from oslo_config import cfg

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
        help='Page size of a listing that asks for none.'),
    cfg.FloatOpt(
        'engine_timeout', default=60.0, min=1.0,
        help='Seconds the API waits for the engine to answer a request '
             'before it answers 503.'),
]


def register_opts(conf):
    conf.register_group(api_group)
    conf.register_opts(api_opts, group=api_group)


def list_opts():
    return {api_group: api_opts}
