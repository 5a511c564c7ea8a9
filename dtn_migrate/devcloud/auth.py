"""keystoneauth1 plugin for a Glance without Keystone (devcloud noauth).

The devcloud's noauth Glance runs its ``context`` filter without
``authtoken``: it trusts the identity headers that keystonemiddleware
would have set.  This plugin sends them, so code written against a
keystoneauth1 Session works unchanged against such a Glance.

``IdentityHeadersLoader`` makes it loadable by name, so that a
configuration file can say ``auth_type = dtn_migrate_devcloud`` (with
``endpoint``, ``project_id`` and optionally ``user_id`` and ``roles``).
"""

from keystoneauth1 import loading
from keystoneauth1 import plugin

PLUGIN_NAME = "dtn_migrate_devcloud"
DEFAULT_ROLES = ("member", "reader")


class IdentityHeaders(plugin.BaseAuthPlugin):
    """Send X-Identity-Status/X-User-Id/X-Project-Id/X-Roles; every
    service's endpoint is ENDPOINT.
    """

    def __init__(self, endpoint, project_id, user_id=None,
                 roles=DEFAULT_ROLES):
        super().__init__()
        self.endpoint = endpoint
        self.project_id = project_id
        self.user_id = user_id or "%s-user" % project_id
        self.roles = tuple(roles)

    def headers(self):
        return {"X-Identity-Status": "Confirmed",
                "X-User-Id": self.user_id,
                "X-Project-Id": self.project_id,
                "X-Roles": ",".join(self.roles)}

    def get_headers(self, session, **kwargs):
        return self.headers()

    def get_endpoint(self, session, **kwargs):
        return self.endpoint

    def get_user_id(self, session, **kwargs):
        return self.user_id

    def get_project_id(self, session, **kwargs):
        return self.project_id

    def invalidate(self):
        return False


def _roles(value):
    """A role list from "a,b" (a config file) or a sequence (already
    parsed: keystoneauth1 applies the type twice).
    """
    if isinstance(value, str):
        value = value.split(",")
    return tuple(r.strip() for r in value if r.strip())


class IdentityHeadersLoader(loading.BaseLoader):
    """keystoneauth1 loader of ``IdentityHeaders`` (entry point
    ``dtn_migrate_devcloud`` of group ``keystoneauth1.plugin``).
    """

    @property
    def plugin_class(self):
        return IdentityHeaders

    def get_options(self):
        return super().get_options() + [
            loading.Opt("endpoint", required=True,
                        help="Glance URL, used for every service."),
            loading.Opt("project-id", required=True,
                        help="Project the requests act for."),
            loading.Opt("user-id",
                        help="User the requests act as (default: "
                             "<project_id>-user)."),
            loading.Opt("roles", type=_roles,
                        help="Comma-separated roles (default: %s)."
                             % ",".join(DEFAULT_ROLES)),
        ]

    def create_plugin(self, **kwargs):
        return IdentityHeaders(**{k: v for k, v in kwargs.items()
                                  if v is not None})
