"""A real Keystone (fernet tokens, SQLite) for functional tests.

The database is ``keystone-manage db_sync`` plus ``bootstrap`` (admin
user, ``admin`` project, roles admin/member/reader and their system-scope
grant), built once per servers' venv and copied; fernet and credential
keys are fresh per server.  Regions, services, endpoints, projects and
users are then made through the API as the system-scoped admin.
"""

import base64
import os

from devcloud import _base

ADMIN_USER = "admin"
ADMIN_PASSWORD = "devcloud-admin"
ADMIN_PROJECT = "admin"
SERVICE_PROJECT = "service"
DOMAIN = "Default"
# bcrypt's minimum: every authentication hashes the password once.
HASH_ROUNDS = 4


def _sections(db_path, keydir, log):
    return {
        "DEFAULT": {"log_file": log, "use_stderr": False, "debug": False},
        "database": {"connection": "sqlite:///%s" % db_path},
        "identity": {"password_hash_algorithm": "bcrypt",
                     "password_hash_rounds": HASH_ROUNDS},
        "token": {"provider": "fernet"},
        "fernet_tokens": {"key_repository": os.path.join(keydir, "fernet")},
        "fernet_receipts": {
            "key_repository": os.path.join(keydir, "receipts")},
        "credential": {
            "key_repository": os.path.join(keydir, "credential")},
        # In-process cache (one uwsgi process): token validation, roles and
        # the catalog, else every API call takes about 0.3 s here.
        "cache": {"enabled": True, "backend": "dogpile.cache.memory"},
    }


def _key_repository(path, keys=2):
    """A fernet key repository: 0 is the staged key, the highest primary."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    for i in range(keys):
        name = os.path.join(path, str(i))
        if not os.path.exists(name):
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(base64.urlsafe_b64encode(os.urandom(32)))


def _build_database(path):
    """db_sync + bootstrap into PATH (the cached template)."""
    work = os.path.dirname(path)
    for sub in ("fernet", "receipts", "credential"):
        _key_repository(os.path.join(work, sub))
    conf = os.path.join(work, "keystone.conf")
    log = os.path.join(work, "manage.log")
    _base.write_ini(conf, _sections(path, work, log))
    manage = _base.executable("keystone-manage")
    _base.run([manage, "--config-file", conf, "db_sync"], log)
    _base.run([manage, "--config-file", conf, "bootstrap",
               "--bootstrap-username", ADMIN_USER,
               "--bootstrap-password", ADMIN_PASSWORD,
               "--bootstrap-project-name", ADMIN_PROJECT,
               "--bootstrap-role-name", "admin"], log)


class KeystoneServer(_base.UwsgiServer):
    """Keystone on 127.0.0.1:port.

    ``token_expiration`` is ``[token] expiration`` in seconds.  Note that
    keystoneauth1 renews a token that has less than 120 s left before
    every request, so a shorter lifetime means one authentication per
    request rather than an expired token.
    """

    module = "keystone.wsgi.api:application"
    ready_path = "/v3"
    kind = "keystone"

    def __init__(self, workdir, port=None, name="ks", region="RegionOne",
                 token_expiration=3600, extra_conf=None, processes=1,
                 threads=4):
        super().__init__(workdir, name, port, processes, threads)
        self.region = region
        self.token_expiration = token_expiration
        self.extra_conf = extra_conf
        self.conf = os.path.join(self.dir, "keystone.conf")
        self.log = os.path.join(self.dir, "keystone.log")
        self.db = os.path.join(self.dir, "keystone.db")
        self.env = {"OS_KEYSTONE_CONFIG_FILES": self.conf}
        self._admin = None
        self._roles = {}
        self._passwords = {}    # user name -> password this object set

    @property
    def auth_url(self):
        """Identity v3 URL for keystoneauth1."""
        return self.endpoint + "/v3"

    def _configure(self):
        if not os.path.exists(self.db):
            _base.cached_template("keystone.db", _build_database, self.db)
        for sub in ("fernet", "receipts", "credential"):
            _key_repository(os.path.join(self.dir, sub))
        sections = _sections(self.db, self.dir, self.log)
        sections["token"]["expiration"] = self.token_expiration
        _base.write_ini(self.conf, _base.merge(sections, self.extra_conf))

    def _started(self):
        self._admin = None
        self.register_endpoint("identity", "keystone", self.endpoint,
                               self.region)

    def _logs(self):
        return [self.log, self.uwsgi_log]

    # Sessions.

    def session(self, username, password, project_name=None,
                system_scope=None, domain=DOMAIN):
        """A keystoneauth1 Session authenticating with a password."""
        from keystoneauth1.identity import v3
        from keystoneauth1 import session as ks_session
        kw = {"system_scope": system_scope} if system_scope else {
            "project_name": project_name, "project_domain_name": domain}
        auth = v3.Password(auth_url=self.auth_url, username=username,
                           password=password, user_domain_name=domain, **kw)
        return ks_session.Session(auth=auth)

    def admin_session(self, system=True):
        """The bootstrap admin, system-scoped (or on the admin project)."""
        if system:
            return self.session(ADMIN_USER, ADMIN_PASSWORD,
                                system_scope="all")
        return self.session(ADMIN_USER, ADMIN_PASSWORD, ADMIN_PROJECT)

    def _api(self, method, path, body=None, ok=(200, 201, 204)):
        if self._admin is None:
            self._admin = self.admin_session()
        resp = self._admin.request(self.auth_url + path, method, json=body,
                                   raise_exc=False)
        if resp.status_code not in ok:
            raise _base.ServerFailed("keystone %s %s: %d %s" % (
                method, path, resp.status_code, resp.text[:500]))
        return resp.json() if resp.content else {}

    def _find(self, collection, **query):
        qs = "&".join("%s=%s" % kv for kv in sorted(query.items()))
        return self._api("GET", "/%s?%s" % (collection, qs))[collection]

    # Identity objects; every ensure_* is idempotent and returns the id.

    def ensure_project(self, name):
        found = self._find("projects", name=name, domain_id="default")
        if found:
            return found[0]["id"]
        return self._api("POST", "/projects", {"project": {
            "name": name, "domain_id": "default"}})["project"]["id"]

    def ensure_role(self, name):
        if name not in self._roles:
            found = self._find("roles", name=name)
            self._roles[name] = found[0]["id"] if found else self._api(
                "POST", "/roles", {"role": {"name": name}})["role"]["id"]
        return self._roles[name]

    def ensure_region(self, region):
        if "region" not in self._api("GET", "/regions/%s" % region,
                                     ok=(200, 404)):
            self._api("POST", "/regions", {"region": {"id": region}})
        return region

    def create_user(self, name, password="secret", project_name=None,
                    roles=("member", "reader")):
        """A user with ROLES on PROJECT_NAME (default: NAME-project).

        Returns a dict: user_id, username, password, project_id,
        project_name, and ``session()`` for a ready keystoneauth1 session.
        """
        project_name = project_name or "%s-project" % name
        project_id = self.ensure_project(project_name)
        found = self._find("users", name=name, domain_id="default")
        if found:
            user_id = found[0]["id"]
            # A password change revokes the user's tokens (to the second):
            # set it only when it is not already the one wanted.
            if self._passwords.get(name) != password:
                self._api("PATCH", "/users/%s" % user_id,
                          {"user": {"password": password}})
        else:
            user_id = self._api("POST", "/users", {"user": {
                "name": name, "password": password, "domain_id": "default",
                "default_project_id": project_id}})["user"]["id"]
        self._passwords[name] = password
        for role in roles:
            self._api("PUT", "/projects/%s/users/%s/roles/%s" % (
                project_id, user_id, self.ensure_role(role)))
        return _User(self, user_id, name, password, project_id,
                     project_name)

    def grant(self, username, project_name, role):
        """Give the existing user USERNAME ROLE on PROJECT_NAME (made if
        missing); its password is left alone.  Returns the user's id.
        """
        found = self._find("users", name=username, domain_id="default")
        if not found:
            raise _base.ServerFailed("keystone: no user %r" % username)
        user_id = found[0]["id"]
        self._api("PUT", "/projects/%s/users/%s/roles/%s" % (
            self.ensure_project(project_name), user_id,
            self.ensure_role(role)))
        return user_id

    def admin_user(self):
        """The bootstrap admin, on its ``admin`` project."""
        found = self._find("users", name=ADMIN_USER, domain_id="default")
        return _User(self, found[0]["id"], ADMIN_USER, ADMIN_PASSWORD,
                     self.ensure_project(ADMIN_PROJECT), ADMIN_PROJECT)

    def service_user(self, name, roles=("admin", "service")):
        """A service's user (e.g. glance) in the ``service`` project with
        the admin and service roles (keystonemiddleware validates tokens).
        """
        return self.create_user(name, "%s-devcloud" % name, SERVICE_PROJECT,
                                roles=roles)

    def ensure_service(self, service_type, name):
        for svc in self._find("services", type=service_type):
            if svc["name"] == name:
                return svc["id"]
        return self._api("POST", "/services", {"service": {
            "type": service_type, "name": name}})["service"]["id"]

    def register_endpoint(self, service_type, name, url, region,
                          interfaces=("public", "internal", "admin")):
        """Catalog entries of a service in REGION, replacing older ones."""
        service_id = self.ensure_service(service_type, name)
        self.ensure_region(region)
        for ep in self._find("endpoints", service_id=service_id):
            if ep["region_id"] == region:
                self._api("DELETE", "/endpoints/%s" % ep["id"])
        for interface in interfaces:
            self._api("POST", "/endpoints", {"endpoint": {
                "service_id": service_id, "interface": interface,
                "url": url, "region_id": region}})


class _User(dict):
    """What create_user returns; ``session()`` authenticates as it."""

    def __init__(self, keystone, user_id, username, password, project_id,
                 project_name):
        super().__init__(user_id=user_id, username=username,
                         password=password, project_id=project_id,
                         project_name=project_name)
        self._keystone = keystone

    def session(self):
        return self._keystone.session(self["username"], self["password"],
                                      self["project_name"])
