"""dtn-migrate-api under uwsgi, behind a devcloud Keystone.

:class:`ApiServer` serves ``dtn_migrate.api.wsgi:application`` with the
uwsgi of the servers' venv but the Python packages of the project's own
venv (uwsgi's ``home``): the API needs this project's oslo releases, not
Glance's.  Its configuration file holds what the cloud's engine uses
(``[DEFAULT] transport_url``, ``[database] connection``), ``[api]
auth_strategy = keystone`` and a ``[keystone_authtoken]`` section for the
service user ``dtn-migrate``; the application finds that file through
``$OS_DTN_MIGRATE_CONFIG_FILES`` (and ``--config-file`` in its argv).
Once it answers, the server registers itself in Keystone's catalog as
service type ``dtn-migration`` (public, internal and admin endpoints) in
its region.

:func:`personas` makes the users the functional tests and the demo act
as; :func:`openstack_env` is the environment of the ``openstack``
executable acting as one of them.
"""

import json
import os
import sys

import dtn_migrate

from devcloud import _base
from devcloud import keystone as keystone_mod

MODULE = "dtn_migrate.api.wsgi:application"
SERVICE_TYPE = "dtn-migration"
SERVICE_NAME = "dtn-migrate"
SERVICE_USER = "dtn-migrate"
#: The environment variable naming the API's configuration files
#: (comma-separated), as OS_KEYSTONE_CONFIG_FILES does for Keystone.
CONFIG_ENV = "OS_DTN_MIGRATE_CONFIG_FILES"
PERSONA_PASSWORD = "devcloud-persona"
#: Persona -> (project, roles).  Keystone's implied roles (made by
#: ``keystone-manage bootstrap``: admin implies member, member implies
#: reader) give each one the roles below it, so only the top one is
#: assigned.  ``admin`` is the bootstrap admin: admin on its own
#: project, given admin on ``demo`` too.
PERSONAS = {
    "alice": ("demo", ("member",)),
    "rita": ("demo", ("reader",)),
    "bob": ("other", ("member",)),
}
PROJECTS = ("demo", "other")
#: Variables an ``openstack`` run must not inherit from the caller.
_OS_PREFIX = "OS_"


def project_venv():
    """The virtualenv this code runs from (the project's)."""
    return sys.prefix


def project_root():
    """The directory holding the ``dtn_migrate`` package."""
    return os.path.dirname(os.path.dirname(os.path.abspath(
        dtn_migrate.__file__)))


def personas(keystone):
    """Make projects ``demo`` and ``other`` and the users ``alice``
    (member of demo), ``rita`` (reader of demo), ``bob`` (member of
    other) in KEYSTONE; give ``admin`` the admin role on demo.  Returns
    {name: user dict} (``user_id``, ``username``, ``password``,
    ``project_id``, ``project_name``, ``session()``), ``admin`` on its
    own (admin) project.  Idempotent.
    """
    for project in PROJECTS:
        keystone.ensure_project(project)
    users = {}
    for name, (project, roles) in sorted(PERSONAS.items()):
        users[name] = keystone.create_user(name, PERSONA_PASSWORD,
                                           project_name=project,
                                           roles=roles)
    # Not create_user: setting the admin's password would revoke the
    # tokens of every admin session.
    keystone.grant(keystone_mod.ADMIN_USER, "demo", "admin")
    users["admin"] = keystone.admin_user()
    return users


def openstack_env(keystone, user, region=None, base_env=None,
                  project_name=None):
    """The environment of the ``openstack`` executable acting as USER (a
    dict of :func:`personas`) on KEYSTONE, with the catalog's public
    endpoints of REGION (default: Keystone's).  Every ``OS_*`` variable
    of BASE_ENV (default: this process's environment) is dropped first.
    """
    env = {k: v for k, v in (os.environ if base_env is None
                             else base_env).items()
           if not k.startswith(_OS_PREFIX)}
    env.update({
        "OS_AUTH_TYPE": "password",
        "OS_AUTH_URL": keystone.auth_url,
        "OS_IDENTITY_API_VERSION": "3",
        "OS_USERNAME": user["username"],
        "OS_PASSWORD": user["password"],
        "OS_PROJECT_NAME": project_name or user["project_name"],
        "OS_USER_DOMAIN_NAME": keystone_mod.DOMAIN,
        "OS_PROJECT_DOMAIN_NAME": keystone_mod.DOMAIN,
        "OS_REGION_NAME": region or keystone.region,
        "OS_INTERFACE": "public",
    })
    return env


def clouds_yaml(keystone, users, path, region=None):
    """Write a clouds.yaml at PATH with one cloud per user of USERS
    ({name: user dict}); ``OS_CLOUD=<name>`` (with
    ``OS_CLIENT_CONFIG_FILE=PATH``) then acts as that user.
    """
    clouds = {}
    for name, user in sorted(users.items()):
        clouds[name] = {
            "auth_type": "password",
            "auth": {"auth_url": keystone.auth_url,
                     "username": user["username"],
                     "password": user["password"],
                     "project_name": user["project_name"],
                     "user_domain_name": keystone_mod.DOMAIN,
                     "project_domain_name": keystone_mod.DOMAIN},
            "region_name": region or keystone.region,
            "interface": "public",
            "identity_api_version": 3,
        }
    # JSON is YAML: no YAML writer needed.
    with open(path, "w") as f:
        json.dump({"clouds": clouds}, f, indent=2, sort_keys=True)
    return path


class ApiServer(_base.UwsgiServer):
    """dtn-migrate-api on 127.0.0.1:port for one cloud.

    TRANSPORT_URL and DATABASE are the cloud engine's bus and
    ``[database] connection``; EXTRA_CONF is {section: {option: value}}
    overlaid on the configuration file.  KEYSTONE may be None for an
    API with ``auth_strategy = noauth2`` (nothing is registered then).
    """

    module = MODULE
    # Any HTTP answer means the application loaded (uwsgi's need-app
    # makes uwsgi exit otherwise); GET / may need a token.
    ready_status = (200, 300, 401)
    kind = "api"

    def __init__(self, workdir, keystone, transport_url, database,
                 name="a", region=None, port=None, extra_conf=None,
                 processes=1, threads=4):
        super().__init__(workdir, name, port, processes, threads)
        self.keystone = keystone
        self.region = region or (keystone.region if keystone is not None
                                 else "Region%s" % name.upper())
        self.transport_url = transport_url
        self.database = database
        self.extra_conf = extra_conf
        self.home = project_venv()
        self.conf = os.path.join(self.dir, "dtn-migrate-api.conf")
        self.log = os.path.join(self.dir, "dtn-migrate-api.log")
        self.env = {CONFIG_ENV: self.conf}
        self.pyargv = ["--config-file", self.conf]
        self.pythonpath = [project_root()]
        self._service_user = None

    def service_user(self):
        """The ``dtn-migrate`` user in the service project, with the
        service role (enough for keystonemiddleware to validate tokens).
        """
        if self._service_user is None:
            self._service_user = self.keystone.service_user(
                SERVICE_USER, roles=("service",))
        return self._service_user

    def sections(self):
        """The configuration file's content: {section: {key: value}}."""
        sections = {
            "DEFAULT": {"log_file": self.log, "use_stderr": False,
                        "debug": True,
                        "transport_url": self.transport_url},
            "database": {"connection": self.database},
            "api": {"auth_strategy": "keystone" if self.keystone
                    else "noauth2"},
            "oslo_messaging_notifications": {"driver": "noop"},
        }
        if self.keystone is not None:
            user = self.service_user()
            sections["keystone_authtoken"] = {
                "www_authenticate_uri": self.keystone.auth_url,
                "auth_url": self.keystone.auth_url,
                "auth_type": "password",
                "username": user["username"],
                "password": user["password"],
                "project_name": user["project_name"],
                "user_domain_name": keystone_mod.DOMAIN,
                "project_domain_name": keystone_mod.DOMAIN,
                "region_name": self.keystone.region,
                "service_token_roles_required": True,
            }
        return _base.merge(sections, self.extra_conf)

    def _configure(self):
        _base.write_ini(self.conf, self.sections())

    def _started(self):
        if self.keystone is not None:
            self.register_endpoint()

    def register_endpoint(self, url=None):
        """(Re)register the API in the catalog, at URL or its own."""
        self.keystone.register_endpoint(SERVICE_TYPE, SERVICE_NAME,
                                        url or self.endpoint, self.region)

    def _logs(self):
        return [self.log, self.uwsgi_log]

    def openstack_env(self, user, **kwargs):
        """:func:`openstack_env` on this API's Keystone and region."""
        kwargs.setdefault("region", self.region)
        return openstack_env(self.keystone, user, **kwargs)
