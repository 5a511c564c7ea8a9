"""Identities for the devcloud's noauth Glance, without a plugin.

The noauth Glance (``keystone=None``) has no ``authtoken``: its paste
pipeline runs :class:`IdentityFromToken` before Glance's ``context``
filter.  Clients use keystoneauth1's own ``admin_token`` plugin
(``keystoneauth1.token_endpoint.Token``: ``auth_type = admin_token``,
``endpoint``, ``token``) with a token made by :func:`token`, which names
the project, user and roles the request acts for; the filter turns it
into the identity headers keystonemiddleware would have set, so images
get real owners and roles.

Test-only: nothing registers this module anywhere.  The Glance of
:class:`~devcloud.glance.GlanceServer` loads a copy of this
file from its own configuration directory, so the module needs nothing
beyond the standard library.
"""

PREFIX = "devcloud-identity:"
DEFAULT_ROLES = ("member", "reader")
#: What keystonemiddleware sets and this filter replaces (WSGI names).
IDENTITY_KEYS = ("HTTP_X_IDENTITY_STATUS", "HTTP_X_USER_ID",
                 "HTTP_X_PROJECT_ID", "HTTP_X_TENANT_ID", "HTTP_X_ROLES",
                 "HTTP_X_SERVICE_TOKEN", "HTTP_X_SERVICE_ROLES")


def token(project_id, user_id=None, roles=DEFAULT_ROLES):
    """The token acting for PROJECT_ID as USER_ID (default
    ``<project_id>-user``) with ROLES (a sequence or "a,b").
    """
    if isinstance(roles, str):
        roles = roles.split(",")
    fields = {"project": project_id,
              "user": user_id or "%s-user" % project_id,
              "roles": ",".join(r.strip() for r in roles if r.strip())}
    for value in fields.values():
        if ";" in value or "=" in value:
            raise ValueError("';' or '=' in identity %r" % value)
    return PREFIX + ";".join("%s=%s" % kv for kv in fields.items())


def parse(value):
    """{project, user, roles} of a :func:`token`, or None."""
    if not value or not value.startswith(PREFIX):
        return None
    fields = dict(part.partition("=")[::2]
                  for part in value[len(PREFIX):].split(";"))
    if not fields.get("project") or not fields.get("user"):
        return None
    return {"project": fields["project"], "user": fields["user"],
            "roles": fields.get("roles", "")}


class IdentityFromToken:
    """WSGI middleware: identity headers from a :func:`token`; requests
    without one carry no identity (whatever headers they sent).
    """

    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        for key in IDENTITY_KEYS:
            environ.pop(key, None)
        ident = parse(environ.get("HTTP_X_AUTH_TOKEN"))
        if ident is not None:
            environ["HTTP_X_IDENTITY_STATUS"] = "Confirmed"
            environ["HTTP_X_USER_ID"] = ident["user"]
            environ["HTTP_X_PROJECT_ID"] = ident["project"]
            environ["HTTP_X_ROLES"] = ident["roles"]
        return self.app(environ, start_response)


def filter_factory(global_conf, **local_conf):
    """paste.deploy filter factory."""
    return IdentityFromToken
