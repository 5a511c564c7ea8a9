"""keystoneauth1 plugin for a Glance without Keystone (devcloud noauth).

The devcloud's noauth Glance runs its ``context`` filter without
``authtoken``: it trusts the identity headers that keystonemiddleware
would have set.  This plugin sends them, so code written against a
keystoneauth1 Session works unchanged against such a Glance.
"""

from keystoneauth1 import plugin


class IdentityHeaders(plugin.BaseAuthPlugin):
    """Send X-Identity-Status/X-User-Id/X-Project-Id/X-Roles; every
    service's endpoint is ENDPOINT.
    """

    def __init__(self, endpoint, project_id, user_id=None,
                 roles=("member", "reader")):
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
