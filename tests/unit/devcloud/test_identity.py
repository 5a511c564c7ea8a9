"""The noauth Glance's identity filter and its tokens."""

import fixtures
from keystoneauth1 import loading as ks_loading
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
from oslo_config import cfg

from dtn_migrate.conf import glance as glance_conf
from devcloud import glance
from devcloud import identity

from tests.unit import testcase


def _run(environ):
    seen = {}

    def app(env, start_response):
        seen.update(env)
        return [b""]

    identity.filter_factory({})(app)(environ, lambda *a: None)
    return seen


class TestIdentityFromToken(testcase.TestCase):

    def test_token_becomes_identity_headers(self):
        env = _run({"HTTP_X_AUTH_TOKEN": identity.token(
            "p1", "u1", "admin, member")})
        self.assertEqual("Confirmed", env["HTTP_X_IDENTITY_STATUS"])
        self.assertEqual("u1", env["HTTP_X_USER_ID"])
        self.assertEqual("p1", env["HTTP_X_PROJECT_ID"])
        self.assertEqual("admin,member", env["HTTP_X_ROLES"])

    def test_defaults(self):
        self.assertEqual({"project": "p1", "user": "p1-user",
                          "roles": "member,reader"},
                         identity.parse(identity.token("p1")))

    def test_forged_headers_are_dropped(self):
        forged = {"HTTP_X_IDENTITY_STATUS": "Confirmed",
                  "HTTP_X_ROLES": "admin", "HTTP_X_PROJECT_ID": "evil",
                  "HTTP_X_USER_ID": "evil", "HTTP_X_TENANT_ID": "evil"}
        for token in (None, "", "garbage", identity.PREFIX,
                      identity.PREFIX + "project=p"):
            env = dict(forged)
            if token is not None:
                env["HTTP_X_AUTH_TOKEN"] = token
            seen = _run(env)
            for key in identity.IDENTITY_KEYS:
                self.assertNotIn(key, seen, token)
        env = dict(forged, HTTP_X_AUTH_TOKEN=identity.token("p2"))
        seen = _run(env)
        self.assertEqual(("p2", "member,reader"),
                         (seen["HTTP_X_PROJECT_ID"], seen["HTTP_X_ROLES"]))
        self.assertNotIn("HTTP_X_TENANT_ID", seen)

    def test_separators_refused(self):
        self.assertRaises(ValueError, identity.token, "a;roles=admin")
        self.assertRaises(ValueError, identity.token, "p", "u=1")


class TestClientSide(testcase.TestCase):
    """Clients use keystoneauth1's own admin_token plugin."""

    def test_auth_options_load_the_stock_plugin(self):
        server = glance.GlanceServer.__new__(glance.GlanceServer)
        server.port = 9292
        server.keystone = None
        options = server.auth_options(project_id="p1", roles=["admin"])
        self.assertEqual("admin_token", options["auth_type"])
        path = self.useFixture(fixtures.TempDir()).join("glance.conf")
        with open(path, "w") as f:
            f.write("[glance]\n" + "".join(
                "%s = %s\n" % kv for kv in options.items()))
        conf = cfg.ConfigOpts()
        glance_conf.register_opts(conf)
        conf(["--config-file", path], default_config_files=[])
        plugin = ks_loading.load_auth_from_conf_options(conf, "glance")
        self.assertIsInstance(plugin, token_endpoint.Token)
        self.assertEqual("http://127.0.0.1:9292",
                         plugin.get_endpoint(None, service_type="image"))
        headers = plugin.get_headers(ks_session.Session(auth=plugin))
        self.assertEqual({"project": "p1", "user": "p1-user",
                          "roles": "admin"},
                         identity.parse(headers["X-Auth-Token"]))
