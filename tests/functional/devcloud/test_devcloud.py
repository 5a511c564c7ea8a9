"""The dev clouds themselves: real Glance and Keystone, fault injection.

These pin down what the migration tests rely on: image metadata, data
and hashes survive a round trip, an image can be created with a chosen
id, a fault proxy makes Glance answer 503/429 or drop connections, one
Keystone serves two Glances, and Glance's own glance-download and
web-download imports work between the two.
"""

import concurrent.futures
import datetime
import hashlib
import io
import os
import shutil
import tempfile
import time

from glanceclient import exc as glance_exc
import requests
import testtools

import devcloud
from tests.functional import base
from tests.functional.devcloud import harness as dc

MiB = dc.MiB
IMAGE_SIZE = 64 * MiB


def sha512_file(path):
    h = hashlib.sha512()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(4 * MiB), b""):
            h.update(block)
    return h.hexdigest()


def sha512_iter(chunks):
    h = hashlib.sha512()
    n = 0
    for chunk in chunks:
        h.update(chunk)
        n += len(chunk)
    return h.hexdigest(), n


class TestGlance(dc.DevcloudTestCase):
    """Two noauth Glances side by side."""

    def _qcow2(self, size=IMAGE_SIZE, seed=1):
        path = os.path.join(self.workdir, "disk-%d.qcow2" % seed)
        return devcloud.make_qcow2(path, size, seed=seed)

    def _upload(self, client, path, **props):
        image = client.images.create(disk_format="qcow2",
                                     container_format="bare", **props)
        with open(path, "rb") as f:
            client.images.upload(image["id"], f,
                                 image_size=os.path.getsize(path))
        return devcloud.wait_image(client, image["id"])

    def test_image_round_trip(self):
        glance = self.glance("a")
        client = glance.client()
        path = self._qcow2()
        size = os.path.getsize(path)
        image = self._upload(client, path, name="round-trip", min_disk=1,
                             min_ram=256, os_distro="cirros",
                             dtn_note="custom", tags=["dtn", "test"])

        self.assertEqual("active", image["status"])
        self.assertEqual(size, image["size"])
        self.assertEqual(IMAGE_SIZE, image["virtual_size"])
        self.assertEqual("sha512", image["os_hash_algo"])
        self.assertEqual(sha512_file(path), image["os_hash_value"])
        self.assertEqual(1, image["min_disk"])
        self.assertEqual(256, image["min_ram"])
        self.assertEqual("cirros", image["os_distro"])
        self.assertEqual("custom", image["dtn_note"])
        self.assertEqual(["dtn", "test"], sorted(image["tags"]))
        self.assertEqual(devcloud.glance.DEFAULT_PROJECT, image["owner"])

        body = client.images.data(image["id"])
        self.assertEqual((image["os_hash_value"], size), sha512_iter(body))

        # Another project does not see a private image.
        other = glance.client(project_id="someone-else")
        self.assertRaises(glance_exc.HTTPNotFound, other.images.get,
                          image["id"])

    def test_chosen_id_and_restart(self):
        a = self.glance("a")
        b = self.glance("b")
        client_a, client_b = a.client(), b.client()
        path = self._qcow2(4 * MiB, seed=2)
        src = self._upload(client_a, path, name="src")

        dst = client_b.images.create(id=src["id"], name="copy",
                                     disk_format="qcow2",
                                     container_format="bare")
        self.assertEqual(src["id"], dst["id"])
        self.assertEqual("queued", dst["status"])
        self.assertRaises(glance_exc.HTTPConflict, client_b.images.create,
                          id=src["id"], disk_format="qcow2",
                          container_format="bare")
        self.assertEqual("active", client_a.images.get(src["id"])["status"])

        # A killed Glance comes back with its images.
        a.stop(kill=True)
        a.start()
        self.assertEqual(src["os_hash_value"],
                         a.client().images.get(src["id"])["os_hash_value"])

    def test_fault_proxy(self):
        glance = self.glance("b")
        proxy = self.fault_proxy(glance.endpoint)
        session = glance.session()
        client = glance.client(endpoint=proxy.url)
        url = proxy.url + "/v2/images"

        self.assertEqual(200, session.get(url, raise_exc=False).status_code)

        proxy.fail(503, count=2, retry_after=7)
        for _ in range(2):
            resp = session.get(url, raise_exc=False)
            self.assertEqual(503, resp.status_code)
            self.assertEqual("7", resp.headers["Retry-After"])
        self.assertEqual(200, session.get(url, raise_exc=False).status_code)

        t0 = time.monotonic()
        proxy.fail(429, seconds=3, retry_after=1)
        self.assertEqual(429, session.get(url, raise_exc=False).status_code)
        self.assertRaises(glance_exc.HTTPException, client.images.get,
                          "00000000-0000-0000-0000-000000000000")
        time.sleep(max(0, t0 + 3.1 - time.monotonic()))
        self.assertEqual(200, session.get(url, raise_exc=False).status_code)

        # A refused upload: the body is read away, the client sees 503.
        image = client.images.create(disk_format="raw",
                                     container_format="bare")
        proxy.fail(503, count=1, method="PUT", path=r"/file$")
        data = os.urandom(8 * MiB)
        self.assertRaises(glance_exc.HTTPServiceUnavailable,
                          client.images.upload, image["id"], io.BytesIO(data))
        self.assertEqual("queued", client.images.get(image["id"])["status"])
        client.images.upload(image["id"], io.BytesIO(data))
        image = devcloud.wait_image(client, image["id"])

        # A download cut after 1 MiB, then a dropped connection.
        proxy.cut(MiB, count=1, method="GET", path=r"/file$")
        self.assertRaises((IOError, requests.RequestException),
                          lambda: b"".join(client.images.data(image["id"])))
        proxy.reset(count=1)
        self.assertRaises(glance_exc.CommunicationError, client.images.get,
                          image["id"])
        body = client.images.data(image["id"])
        self.assertEqual((hashlib.sha512(data).hexdigest(), len(data)),
                         sha512_iter(body))
        self.assertEqual(1, proxy.count("cut"))
        self.assertEqual(1, proxy.count("reset"))
        self.assertEqual(5, proxy.count("fail"))

    def test_web_download(self):
        b = self.glance("b")
        client = b.client()
        path = self._qcow2(8 * MiB, seed=3)
        uri = self.serve_file(path)
        image = client.images.create(name="web", disk_format="qcow2",
                                     container_format="bare")
        client.images.image_import(image["id"], method="web-download",
                                   uri=uri)
        image = devcloud.wait_image(client, image["id"], timeout=60)
        self.assertEqual(sha512_file(path), image["os_hash_value"])

    def test_glance_download_needs_keystone(self):
        # Without Keystone there is no service catalog to find the remote
        # region in: the import task fails and the image stays queued,
        # with os_glance_failed_import empty; wait_image sees the task.
        b = self.glance("b")
        client = b.client()
        image = client.images.create(disk_format="raw",
                                     container_format="bare")
        client.images.image_import(
            image["id"], method="glance-download", remote_region="RegionA",
            remote_image_id="00000000-0000-0000-0000-000000000001")
        error = self.assertRaises(RuntimeError, devcloud.wait_image, client,
                                  image["id"], timeout=60)
        self.assertIn("import task failed", str(error))
        self.assertEqual("queued", client.images.get(image["id"])["status"])


class TestKeystone(dc.DevcloudTestCase):
    """One Keystone, two Glances in two regions."""

    def setUp(self):
        super().setUp()
        self.ks = self.keystone()
        self.a = self.glance("a", keystone=self.ks)
        self.b = self.glance("b", keystone=self.ks)
        self.user = self.ks.create_user("alice")

    def test_password_sessions(self):
        session = self.user.session()
        client_a = self.a.client(session=session)
        client_b = self.b.client(session=session)
        image = client_a.images.create(name="on-a", disk_format="raw",
                                       container_format="bare")
        client_a.images.upload(image["id"], io.BytesIO(b"a" * MiB))
        image = client_a.images.get(image["id"])
        self.assertEqual("active", image["status"])
        self.assertEqual(self.user["project_id"], image["owner"])
        # The catalog sends each client to its own region's Glance.
        self.assertRaises(glance_exc.HTTPNotFound, client_b.images.get,
                          image["id"])
        self.assertEqual(self.b.endpoint, session.get_endpoint(
            service_type="image", region_name="RegionB"))
        self.assertEqual(401, requests.get(
            self.a.endpoint + "/v2/images").status_code)

    def test_glance_download(self):
        session = self.user.session()
        client_a = self.a.client(session=session)
        client_b = self.b.client(session=session)
        data = os.urandom(8 * MiB)
        src = client_a.images.create(name="src", disk_format="raw",
                                     container_format="bare",
                                     os_distro="debian", dtn_note="no-copy")
        client_a.images.upload(src["id"], io.BytesIO(data))
        src = devcloud.wait_image(client_a, src["id"])

        dst = client_b.images.create(id=src["id"], name="dst",
                                     disk_format="raw",
                                     container_format="bare")
        client_b.images.image_import(dst["id"], method="glance-download",
                                     remote_region=self.a.region,
                                     remote_image_id=src["id"])
        dst = devcloud.wait_image(client_b, dst["id"], timeout=60)
        self.assertEqual(src["os_hash_value"], dst["os_hash_value"])
        self.assertEqual(len(data), dst["size"])
        # Only [glance_download_properties] extra_properties are copied.
        self.assertEqual("debian", dst["os_distro"])
        self.assertNotIn("dtn_note", dst)


class TestTokenExpiry(dc.DevcloudTestCase):

    def test_expired_token(self):
        ks = self.keystone(token_expiration=10)
        glance = self.glance("a", keystone=ks)
        session = ks.create_user("bob").session()
        client = glance.client(session=session)
        self.assertEqual([], list(client.images.list()))  # warm up

        url = glance.endpoint + "/v2/images"
        access = session.auth.get_access(session)
        self.assertEqual(200, requests.get(
            url, headers={"X-Auth-Token": access.auth_token}).status_code)
        left = (access.expires - datetime.datetime.now(
            datetime.timezone.utc)).total_seconds()
        time.sleep(max(0, left) + 1)
        self.assertEqual(401, requests.get(
            url, headers={"X-Auth-Token": access.auth_token}).status_code)
        # keystoneauth1 renews tokens that are about to expire by itself.
        self.assertEqual([], list(client.images.list()))
        self.assertNotEqual(access.auth_token, session.get_token())


class TestNoauthIdentity(testtools.TestCase):
    """A noauth Glance's identities come from tokens of keystoneauth1's
    stock ``admin_token`` plugin (no plugin of this package): owners,
    roles and project isolation hold, and forged identity headers are
    ignored.  One Glance serves the whole class.
    """

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        ok, why = devcloud.available()
        if not ok:
            base.check_skip(why)
            raise testtools.TestCase.skipException(why)
        cls.workdir = tempfile.mkdtemp(prefix="dtnm-identity-",
                                       dir=base.data_root())
        cls.server = devcloud.GlanceServer(cls.workdir, name="id")
        try:
            cls.server.start()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.server.close()
        shutil.rmtree(cls.workdir, ignore_errors=True)
        super().tearDownClass()

    def client(self, project_id, roles=devcloud.glance.MEMBER_ROLES):
        return self.server.client(project_id=project_id, roles=roles)

    def create(self, client, **fields):
        return client.images.create(disk_format="raw",
                                    container_format="bare", **fields)

    def test_owners_and_isolation_under_many_clients_at_once(self):
        projects = ["tenant-%02d" % i for i in range(16)]

        def one(project):
            client = self.client(project)
            image = self.create(client, name=project)
            return project, dict(client.images.get(image["id"]))

        # Metadata only: the devcloud Glance's SQLite refuses concurrent
        # uploads ("database is locked"), whoever sends them.
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            made = dict(pool.map(one, projects))
        for project, image in made.items():
            self.assertEqual((project, project),
                             (image["owner"], image["name"]))
        one_client = self.client(projects[0])
        one_client.images.upload(made[projects[0]]["id"], io.BytesIO(b"x"))
        self.assertEqual("active", one_client.images.get(
            made[projects[0]]["id"])["status"])
        # Each project sees its own private image only.
        for project in projects[:4]:
            seen = {i["id"] for i in self.client(project).images.list()}
            self.assertIn(made[project]["id"], seen)
            for other in projects:
                if other != project:
                    self.assertNotIn(made[other]["id"], seen)
        self.assertRaises(glance_exc.HTTPNotFound,
                          self.client(projects[1]).images.get,
                          made[projects[0]]["id"])

    def test_roles_decide(self):
        member = self.client("roles-p")
        self.assertRaises(glance_exc.HTTPForbidden, self.create, member,
                          visibility="public")
        admin = self.client("roles-p", roles=devcloud.glance.ADMIN_ROLES)
        image = self.create(admin, visibility="public")
        self.assertEqual(("public", "roles-p"),
                         (image["visibility"], image["owner"]))
        self.assertEqual(image["id"], self.client("elsewhere").images.get(
            image["id"])["id"])

    def test_the_stock_plugin_through_the_service_config(self):
        from oslo_config import cfg

        from dtn_migrate.conf import glance as glance_conf
        from dtn_migrate.image import glance as image_glance

        path = os.path.join(self.workdir, "svc-%s.conf" % self.id())
        options = self.server.auth_options(project_id="svc-p")
        with open(path, "w") as f:
            f.write("[glance]\n" + "".join("%s = %s\n" % kv
                                           for kv in options.items()))
        conf = cfg.ConfigOpts()
        glance_conf.register_opts(conf)
        conf(["--config-file", path], default_config_files=[])
        svc = image_glance.ImageService.from_conf(conf)
        image = svc.create({"disk_format": "raw", "container_format": "bare",
                            "visibility": "public"})
        self.assertEqual("svc-p", image["owner"])

    def test_forged_headers_give_no_identity(self):
        url = self.server.endpoint + "/v2/images"
        forged = {"X-Identity-Status": "Confirmed", "X-Roles": "admin",
                  "X-Project-Id": "victim", "X-User-Id": "mallory",
                  "Content-Type": "application/json"}
        body = '{"disk_format": "raw", "container_format": "bare"}'
        for token in (None, "garbage", "devcloud-identity:project=x"):
            headers = dict(forged)
            if token:
                headers["X-Auth-Token"] = token
            resp = requests.post(url, data=body, headers=headers,
                                 timeout=30)
            self.assertIn(resp.status_code, (401, 403), (token, resp.text))
        # A real token wins over forged headers sent with it.
        client = self.client("honest")
        client.http_client.session.session.headers.update(forged)
        image = self.create(client)
        self.assertEqual("honest", image["owner"])
