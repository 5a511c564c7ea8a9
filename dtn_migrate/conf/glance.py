"""[glance] options: how the engine reaches its own cloud's image service.

Session (TLS, timeout), authentication (``auth_type`` and the plugin's
options) and endpoint (``region_name``, ``valid_interfaces``,
``endpoint_override``) options come from keystoneauth1's loading helpers,
as in Nova's or Cinder's ``[glance]`` section.
"""

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

GROUP = 'glance'
SERVICE_TYPE = 'image'
MiB = 1 << 20


def _group():
    # A new group each time: ConfigOpts copies a group shallowly, so one
    # shared OptGroup would carry the auth plugin options one ConfigOpts
    # loads (some required) into every other.
    return cfg.OptGroup(
        GROUP, title='Image service options',
        help='The Glance of this cloud: the engine exports images from it '
             '(source side) or creates and uploads them into it (peer '
             'side). Set auth_type and the options of that plugin (for '
             'instance auth_type = password with auth_url, username, '
             'password, project_name, user_domain_name and '
             'project_domain_name).')


glance_opts = [
    cfg.StrOpt(
        'cloud_name', default='local',
        help='Name of this cloud in messages and logs.'),
    cfg.IntOpt(
        'retries', default=8, min=0,
        help='How many times a request is retried after HTTP 429/502/'
             '503/504 (and 500, but for a download) or a connection '
             'error, uploads included (the '
             'image data is sent again from the start). It replaces '
             'connect_retries and status_code_retries.'),
    cfg.FloatOpt(
        'retry_max_delay', default=30.0, min=0,
        help='Longest wait in seconds between two retries of an image '
             'data transfer: the delay doubles from 0.5 s with jitter up '
             'to this value; a Retry-After answer is honoured up to this '
             'value too.'),
    cfg.IntOpt(
        'chunk_size', default=MiB, min=4096,
        help='Size in bytes of the pieces image data is read in.'),
]


def _adapter_opts():
    opts = ks_loading.get_adapter_conf_options(include_deprecated=False)
    for opt in opts:
        if opt.dest == 'service_type':
            opt.default = SERVICE_TYPE
    return opts


def register_opts(conf):
    conf.register_group(_group())
    conf.register_opts(glance_opts, group=GROUP)
    ks_loading.register_session_conf_options(conf, GROUP)
    ks_loading.register_auth_conf_options(conf, GROUP)
    ks_loading.register_adapter_conf_options(conf, GROUP,
                                             include_deprecated=False)
    conf.set_default('service_type', SERVICE_TYPE, group=GROUP)


def list_opts():
    """Own, session, adapter and auth options, with the password plugin's
    for the sample configuration (other plugins load their own).
    """
    opts = (glance_opts + ks_loading.get_session_conf_options() +
            _adapter_opts() + ks_loading.get_auth_common_conf_options() +
            ks_loading.get_auth_plugin_conf_options('password'))
    seen = set()
    unique = []
    for opt in opts:
        if opt.dest not in seen:
            seen.add(opt.dest)
            unique.append(opt)
    return {_group(): unique}
