"""A real Glance (SQLite, file store) for functional tests.

Two modes:

* noauth (``keystone=None``): the paste pipeline runs
  :class:`~devcloud.identity.IdentityFromToken` and Glance's
  ``context`` filter without ``authtoken``; clients use keystoneauth1's
  ``admin_token`` plugin with a :func:`~devcloud.identity.token`
  naming their project and roles (:meth:`GlanceServer.auth_options`), so
  images get real owners and roles.
* keystone: ``authtoken`` + ``context`` against a ``KeystoneServer``; the
  Glance registers itself in the catalog as service ``image`` in its own
  region (``RegionA`` for name ``a``), which is what the
  ``glance-download`` import method needs to find its peer.

``web-download`` is allowed from ``web_download_hosts`` on any port; when
that list is set Glance accepts *only* those hosts (loopback is refused
unless listed, private addresses are refused unless listed).
"""

import os
import random
import shutil
import subprocess

from devcloud import _base
from devcloud import identity
from dtn_migrate.common import polling

IMPORT_METHODS = ("glance-direct", "web-download", "copy-image",
                  "glance-download")
DEFAULT_PROJECT = "devcloud-project"
MEMBER_ROLES = identity.DEFAULT_ROLES
ADMIN_ROLES = ("admin", "member", "reader")
#: The module name of the noauth identity filter in Glance's conf dir.
IDENTITY_MODULE = "dtn_devcloud_identity"

_PASTE = """\
[composite:glance-api-devcloud]
paste.composite_factory = glance.api:root_app_factory
/: api
/healthcheck: healthcheck

[composite:glance-api-keystone]
paste.composite_factory = glance.api:root_app_factory
/: api
/healthcheck: healthcheck

[composite:api]
paste.composite_factory = glance.api:pipeline_factory
devcloud = http_proxy_to_wsgi versionnegotiation identity context rootapp
keystone = http_proxy_to_wsgi versionnegotiation authtoken context rootapp

[composite:rootapp]
paste.composite_factory = glance.api:root_app_factory
/: apiversions
/v2: apiv2app

[app:apiversions]
paste.app_factory = glance.api.versions:create_resource

[app:apiv2app]
paste.app_factory = glance.api.v2.router:API.factory

[app:healthcheck]
paste.app_factory = oslo_middleware:Healthcheck.app_factory
backends = disable_by_file
disable_by_file_path = {healthcheck_disable}

[filter:versionnegotiation]
paste.filter_factory = \
glance.api.middleware.version_negotiation:VersionNegotiationFilter.factory

[filter:identity]
paste.filter_factory = {identity_module}:filter_factory

[filter:context]
paste.filter_factory = \
glance.api.middleware.context:ContextMiddleware.factory

[filter:authtoken]
paste.filter_factory = keystonemiddleware.auth_token:filter_factory
delay_auth_decision = true

[filter:http_proxy_to_wsgi]
paste.filter_factory = oslo_middleware:HTTPProxyToWSGI.factory
"""


def _build_database(path):
    """glance-manage db_sync into PATH (the cached template)."""
    conf = os.path.join(os.path.dirname(path), "glance-manage.conf")
    _base.write_ini(conf, {"database": {
        "connection": "sqlite:///%s" % path}})
    _base.run([_base.executable("glance-manage"), "--config-file", conf,
               "db_sync"], conf + ".log")


class GlanceServer(_base.UwsgiServer):
    """Glance API on 127.0.0.1:port under uwsgi.

    ``extra_conf`` is {section: {option: value}} overlaid on
    glance-api.conf (lists as Python lists).  ``notifications_url`` is a
    transport URL (messagingv2 driver) or ``"log"``.
    """

    module = "glance.wsgi.api:application"
    ready_path = "/healthcheck"
    kind = "glance"

    def __init__(self, workdir, port=None, name="a", keystone=None,
                 notifications_url=None, import_methods=IMPORT_METHODS,
                 extra_conf=None, region=None,
                 web_download_hosts=("127.0.0.1", "localhost"),
                 processes=1, threads=8):
        super().__init__(workdir, name, port, processes, threads)
        self.keystone = keystone
        self.region = region or "Region%s" % name.upper()
        self.notifications_url = notifications_url
        self.import_methods = tuple(import_methods)
        self.web_download_hosts = web_download_hosts
        self.extra_conf = extra_conf
        self.confdir = os.path.join(self.dir, "etc")
        self.log = os.path.join(self.dir, "glance-api.log")
        self.db = os.path.join(self.dir, "glance.db")
        self.images_dir = os.path.join(self.dir, "images")
        self.staging_dir = os.path.join(self.dir, "staging")
        self.env = {"OS_GLANCE_CONFIG_DIR": self.confdir}
        self.pythonpath = [self.confdir]
        self._service_user = None
        self._default_user = None

    def _configure(self):
        for d in (self.confdir, self.images_dir, self.staging_dir,
                  os.path.join(self.dir, "tasks"),
                  os.path.join(self.dir, "cache"),
                  os.path.join(self.dir, "locks")):
            os.makedirs(d, exist_ok=True)
        if not os.path.exists(self.db):
            _base.cached_template("glance.db", _build_database, self.db)
        with open(os.path.join(self.confdir, "glance-api-paste.ini"),
                  "w") as f:
            f.write(_PASTE.format(
                healthcheck_disable=os.path.join(self.dir,
                                                 "healthcheck_disable"),
                identity_module=IDENTITY_MODULE))
        # The noauth identity filter, loaded from here by this Glance only.
        shutil.copyfile(identity.__file__, os.path.join(
            self.confdir, IDENTITY_MODULE + ".py"))
        sections = {
            "DEFAULT": {
                "log_file": self.log, "use_stderr": False, "debug": False,
                "enabled_backends": "fs:file",
                "enabled_import_methods": list(self.import_methods),
                "worker_self_reference_url": self.endpoint,
                "image_cache_dir": os.path.join(self.dir, "cache"),
            },
            "database": {"connection": "sqlite:///%s" % self.db},
            "glance_store": {"default_backend": "fs"},
            "fs": {"filesystem_store_datadir": self.images_dir},
            "os_glance_staging_store": {
                "filesystem_store_datadir": self.staging_dir},
            "os_glance_tasks_store": {
                "filesystem_store_datadir": os.path.join(self.dir, "tasks")},
            "oslo_concurrency": {"lock_path": os.path.join(self.dir,
                                                           "locks")},
            "paste_deploy": {"flavor": "keystone" if self.keystone
                             else "devcloud"},
            "oslo_messaging_notifications": {"driver": "noop"},
        }
        if self.web_download_hosts:
            sections["import_filtering_opts"] = {
                "allowed_hosts": list(self.web_download_hosts),
                # Empty: any port (the default is 80 and 443 only).
                "allowed_ports": [],
            }
        if self.notifications_url == "log":
            sections["oslo_messaging_notifications"] = {"driver": "log"}
        elif self.notifications_url:
            sections["oslo_messaging_notifications"] = {
                "driver": "messagingv2",
                "transport_url": self.notifications_url}
        if self.keystone:
            if self._service_user is None:
                self._service_user = self.keystone.service_user("glance")
            user = self._service_user
            sections["keystone_authtoken"] = {
                "www_authenticate_uri": self.keystone.auth_url,
                "auth_url": self.keystone.auth_url,
                "auth_type": "password",
                "username": user["username"],
                "password": user["password"],
                "project_name": user["project_name"],
                "user_domain_name": "Default",
                "project_domain_name": "Default",
                "region_name": self.keystone.region,
            }
        _base.write_ini(os.path.join(self.confdir, "glance-api.conf"),
                        _base.merge(sections, self.extra_conf))

    def _started(self):
        if self.keystone:
            self.register_endpoint()

    def register_endpoint(self, url=None):
        """(Re)register this Glance in Keystone's catalog, at URL (e.g. a
        FaultProxy in front of it) or at its own endpoint.
        """
        self.keystone.register_endpoint("image", "glance",
                                        url or self.endpoint, self.region)

    def _logs(self):
        return [self.log, self.uwsgi_log]

    def session(self, project_id=DEFAULT_PROJECT, roles=MEMBER_ROLES,
                user_id=None, endpoint=None):
        """A keystoneauth1 Session: identity headers (noauth) or, with
        Keystone, the default test user's password session.
        """
        from keystoneauth1 import session as ks_session
        from keystoneauth1 import token_endpoint
        if self.keystone:
            return self.default_user().session()
        return ks_session.Session(auth=token_endpoint.Token(
            endpoint or self.endpoint,
            identity.token(project_id, user_id, roles)))

    def auth_options(self, project_id=DEFAULT_PROJECT, roles=ADMIN_ROLES,
                     user_id=None, endpoint=None):
        """The keystoneauth1 options of a service's ``[glance]`` section,
        with stock plugins only (nothing of this package is loaded by
        name).  keystone: the default user's password, this Glance's
        region.  noauth: ``admin_token`` acting for PROJECT_ID with ROLES.
        """
        if self.keystone:
            user = self.default_user()
            return {"auth_type": "password",
                    "auth_url": self.keystone.auth_url,
                    "username": user["username"],
                    "password": user["password"],
                    "project_name": user["project_name"],
                    "user_domain_name": "Default",
                    "project_domain_name": "Default",
                    "region_name": self.region,
                    "valid_interfaces": "public"}
        return {"auth_type": "admin_token",
                "endpoint": endpoint or self.endpoint,
                "token": identity.token(project_id, user_id, roles)}

    def default_user(self):
        """Keystone mode: ``devcloud-user`` (member) of ``devcloud-project``,
        shared by every Glance of that Keystone.
        """
        if self._default_user is None:
            self._default_user = self.keystone.create_user(
                "devcloud-user", project_name=DEFAULT_PROJECT)
        return self._default_user

    def client(self, project_id=DEFAULT_PROJECT, roles=MEMBER_ROLES,
               user_id=None, session=None, endpoint=None):
        """A python-glanceclient v2 Client.

        noauth: identity headers for PROJECT_ID/ROLES/USER_ID.  keystone:
        SESSION (e.g. ``keystone.create_user(...).session()``), by default
        the default user's; the endpoint comes from the catalog (this
        Glance's region) unless ENDPOINT is given.
        """
        from glanceclient import client as glance_client
        if session is None:
            session = self.session(project_id, roles, user_id, endpoint)
        kwargs = {}
        if endpoint:
            kwargs["endpoint_override"] = endpoint
        elif self.keystone:
            kwargs.update(region_name=self.region, interface="public")
        return glance_client.Client("2", session=session, **kwargs)

    def admin_client(self, **kwargs):
        """noauth: a client with the admin role (e.g. public images)."""
        return self.client(roles=ADMIN_ROLES, **kwargs)


def wait_image(client, image_id, status="active", timeout=120):
    """Poll until the image reaches STATUS; raise on timeout or when an
    import failed.  Glance puts the image back to ``queued``, with
    ``os_glance_failed_import`` naming the stores when the data step
    failed, but left empty when an earlier step did (glance-download's
    metadata fetch): then only the image's import task says ``failure``.
    """
    seen = {}

    def reached():
        image = seen["image"] = client.images.get(image_id)
        if image["status"] == status:
            return image
        why = None
        if image.get("os_glance_failed_import") or image["status"] in (
                "killed", "deleted"):
            why = "failed import %r" % image.get("os_glance_failed_import")
        elif image["status"] == "queued":
            tasks = client.images.get_associated_image_tasks(image_id)
            tasks = sorted(tasks.get("tasks", ()),
                           key=lambda t: t.get("created_at") or "")
            if tasks and tasks[-1]["status"] == "failure":
                why = "import task failed: %s" % tasks[-1].get("message")
        if why:
            raise _base.ImageFailed("image %s: status %s, %s" % (
                image_id, image["status"], why))
        return None

    image = polling.poll(reached, timeout, 0.2)
    if not image:
        raise TimeoutError("image %s still %s after %ss" % (
            image_id, seen["image"]["status"], timeout))
    return image


#: Statuses of a Glance task that has not ended.
TASK_RUNNING = ("pending", "processing")


def import_holds(client, image_id):
    """What of Glance's import still holds the image, or None: its lock
    (``os_glance_import_task``) or a task that has not ended.
    """
    image = client.images.get(image_id)
    if image.get("os_glance_import_task"):
        return "the import lock of task %s" % image["os_glance_import_task"]
    tasks = client.images.get_associated_image_tasks(image_id)
    running = sorted(t["id"] for t in tasks.get("tasks", ())
                     if t.get("status") in TASK_RUNNING)
    if running:
        return "task %s" % ", ".join(running)
    return None


def wait_import_end(client, image_id, timeout=60):
    """Poll until Glance's import has let go of the image.  The image
    goes active before the import's last step saves its task and drops
    its lock: a delete in between races those writes, and on SQLite a
    "database is locked" there half-deletes the image (listed with
    status ``deleted``, refused by every later delete).
    """
    seen = {}

    def let_go():
        seen["holds"] = import_holds(client, image_id)
        return not seen["holds"]

    if not polling.poll(let_go, timeout, 0.2):
        raise TimeoutError("image %s: %s still holds it after %ss" % (
            image_id, seen["holds"], timeout))


def make_qcow2(path, size, seed=0, virtual_size=None):
    """A real qcow2 holding SIZE bytes of pseudo-random data (made with
    qemu-img from a raw file; Debian package qemu-utils).
    """
    qemu_img = shutil.which("qemu-img")
    if qemu_img is None:
        raise _base.CloudsNotInstalled(
            "qemu-img not found: run %s (installs qemu-utils)"
            % _base.BOOTSTRAP)
    raw = path + ".raw"
    rng = random.Random(seed)
    block = 1 << 20
    with open(raw, "wb") as f:
        left = size
        while left > 0:
            n = min(left, block)
            f.write(rng.randbytes(n))
            left -= n
        if virtual_size and virtual_size > size:
            f.truncate(virtual_size)
    try:
        subprocess.run([qemu_img, "convert", "-q", "-f", "raw", "-O",
                        "qcow2", raw, path], check=True,
                       stderr=subprocess.PIPE, timeout=300)
    finally:
        os.unlink(raw)
    return path
