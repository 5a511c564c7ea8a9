"""ImageService against real Glance and Keystone servers (devcloud).

Every service is built by ImageService.from_conf from a [glance] section:
the noauth Glances through keystoneauth1's ``admin_token`` plugin
(devcloud identity tokens), the Keystone-backed ones through
``password``.  Fault proxies
make Glance answer 503/429/401 or cut downloads; one in front of
Keystone counts the tokens issued.
"""

import hashlib
import io
import os
import time
import uuid

import fixtures
from oslo_config import cfg

from dtn_migrate.conf import glance as glance_conf
import devcloud
from devcloud import identity
from dtn_migrate import exception
from dtn_migrate.image import glance
from dtn_migrate.image import metadata
from tests.functional.devcloud import harness as dc

MiB = dc.MiB
CHUNK = 256 * 1024
TOKEN_PATH = r"^/v3/auth/tokens"


def sha512(data):
    return hashlib.sha512(data).hexdigest()


class ImageServiceTestCase(dc.DevcloudTestCase):

    def setUp(self):
        super().setUp()
        self.log = self.useFixture(fixtures.FakeLogger(
            name="dtn_migrate.image.glance"))

    def service(self, **options):
        """ImageService.from_conf on a config file with OPTIONS in
        [glance].
        """
        options.setdefault("chunk_size", CHUNK)
        path = os.path.join(self.workdir, "glance-%s.conf" % uuid.uuid4())
        with open(path, "w") as f:
            f.write("[glance]\n")
            for key, value in options.items():
                f.write("%s = %s\n" % (key, value))
        conf = cfg.ConfigOpts()
        glance_conf.register_opts(conf)
        conf(["--config-file", path], default_config_files=[])
        return glance.ImageService.from_conf(conf)

    def noauth_service(self, endpoint, cloud_name="a",
                       project_id=devcloud.glance.DEFAULT_PROJECT,
                       **options):
        return self.service(auth_type="admin_token", endpoint=endpoint,
                            token=identity.token(project_id),
                            cloud_name=cloud_name, **options)

    def password_service(self, keystone, glance_server, user, password=None,
                         auth_url=None, **options):
        return self.service(
            auth_type="password", auth_url=auth_url or keystone.auth_url,
            username=user["username"],
            password=password or user["password"],
            project_name=user["project_name"], user_domain_name="Default",
            project_domain_name="Default", region_name=glance_server.region,
            valid_interfaces="public", cloud_name=glance_server.name,
            **options)

    def raw_image(self, svc, data, **kwargs):
        kwargs.setdefault("disk_format", "raw")
        kwargs.setdefault("container_format", "bare")
        image = svc.create(kwargs)
        return svc.upload(image["id"], lambda: iter([data]), len(data))


class TestMetadataCalls(ImageServiceTestCase):

    def test_get_select_find(self):
        g = self.glance("a")
        svc = self.noauth_service(g.endpoint)
        gold = self.raw_image(svc, b"g" * 1000, name="gold",
                              tags=["dtn", "gold"], dtn_group="a")
        self.raw_image(svc, b"p" * 1000, name="plain", tags=["dtn"],
                       dtn_group="b")
        hidden = self.raw_image(svc, b"h" * 1000, name="hidden",
                                tags=["dtn"], dtn_group="a", os_hidden=True)
        queued = svc.create({"name": "queued", "disk_format": "raw",
                             "container_format": "bare", "tags": ["dtn"],
                             "dtn_group": "a", "dtn_marker": "m-1"})
        self.raw_image(svc, b"o" * 1000, name="other")

        got = svc.get(gold["id"])
        self.assertIs(dict, type(got))
        self.assertEqual(("gold", "active", 1000, sha512(b"g" * 1000)),
                         (got["name"], got["status"], got["size"],
                          got["os_hash_value"]))

        def names(images):
            return sorted(i["name"] for i in images)
        self.assertEqual(["gold", "hidden", "plain"],
                         names(svc.select(tag="dtn")))
        self.assertEqual(["gold"], names(svc.select(tag=["dtn", "gold"])))
        self.assertEqual(["gold", "hidden"],
                         names(svc.select(properties={"dtn_group": "a"})))
        self.assertEqual(["gold"], names(svc.select(
            tag="gold", properties={"dtn_group": "a"})))
        self.assertEqual([], svc.select(tag="nonesuch"))
        self.assertEqual([], svc.select(properties={"dtn_group": "a&b=c"}))
        # find() sees every status (the marker of an unfinished copy).
        self.assertEqual([queued["id"]],
                         [i["id"] for i in svc.find("dtn_marker", "m-1")])
        self.assertEqual([hidden["id"]], [i["id"] for i in svc.select(
            properties={"os_hidden": True})])

    def test_pagination(self):
        g = self.glance("a")
        svc = self.noauth_service(g.endpoint)
        for i in range(23):
            self.raw_image(svc, b"%d" % i, name="img-%02d" % i,
                           tags=["many"])
        self.assertEqual(["img-%02d" % i for i in range(23)],
                         sorted(i["name"] for i in svc.select(tag="many")))

    def test_missing_image(self):
        g = self.glance("a")
        svc = self.noauth_service(g.endpoint, cloud_name="east")
        missing = str(uuid.uuid4())
        e = self.assertRaises(exception.ImageNotFound, svc.get, missing)
        self.assertIn(missing, str(e))
        self.assertIn("east", str(e))
        self.assertRaises(exception.ImageNotFound, list,
                          svc.download(missing))
        self.assertRaises(exception.ImageNotFound, svc.upload, missing,
                          lambda: iter([b"x"]), 1)
        svc.delete(missing)  # already gone: not an error

    def test_another_project_does_not_see_a_private_image(self):
        g = self.glance("a")
        svc = self.noauth_service(g.endpoint)
        image = self.raw_image(svc, b"x" * 10, visibility="private")
        other = self.noauth_service(g.endpoint, project_id="other")
        self.assertRaises(exception.ImageNotFound, other.get, image["id"])

    def test_delete_protected_image_with_unprotect(self):
        g = self.glance("a")
        svc = self.noauth_service(g.endpoint)
        image = self.raw_image(svc, b"x" * 10, protected=True)
        e = self.assertRaises(exception.Conflict, svc.delete, image["id"])
        self.assertIn("protected", str(e))
        svc.delete(image["id"], unprotect=True)
        self.assertRaises(exception.ImageNotFound, svc.get, image["id"])


class TestData(ImageServiceTestCase):

    def test_download_from_offsets(self):
        g = self.glance("a")
        svc = self.noauth_service(g.endpoint)
        data = os.urandom(3 * MiB + 4321)
        image = self.raw_image(svc, data)
        self.assertEqual(sha512(data), image["os_hash_value"])

        pieces = list(svc.download(image["id"]))
        self.assertTrue(all(0 < len(p) <= CHUNK for p in pieces))
        self.assertEqual(data, b"".join(pieces))

        # The first part from offset 0, cut short, then the rest.
        middle = MiB + 12345
        head = b""
        stream = svc.download(image["id"])
        for piece in stream:
            head += piece
            if len(head) >= middle:
                break
        stream.close()
        head = head[:middle]
        tail = list(svc.download(image["id"], middle))
        self.assertTrue(all(len(p) <= CHUNK for p in tail))
        self.assertEqual(image["os_hash_value"],
                         sha512(head + b"".join(tail)))
        self.assertEqual(b"", b"".join(svc.download(image["id"],
                                                    len(data))))
        self.assertRaises(exception.InvalidInput, list,
                          svc.download(image["id"], len(data) + 1))

    def test_download_resumes_after_a_cut(self):
        g = self.glance("a")
        proxy = self.fault_proxy(g.endpoint)
        svc = self.noauth_service(proxy.url)
        data = os.urandom(2 * MiB + 99)
        image = self.raw_image(svc, data)
        proxy.cut(MiB + 777, count=1, method="GET", path=r"/file$")
        gets = proxy.count(method="GET")
        self.assertEqual(image["os_hash_value"],
                         sha512(b"".join(svc.download(image["id"]))))
        self.assertEqual(1, proxy.count("cut"))
        self.assertEqual(2, proxy.count(method="GET") - gets)
        self.assertIn("download of image %s at byte" % image["id"],
                      self.log.output)

    def test_copy_between_clouds_keeps_id_and_metadata(self):
        a, b = self.glance("a"), self.glance("b")
        src_svc = self.noauth_service(a.endpoint, "a")
        dst_svc = self.noauth_service(b.endpoint, "b")
        path = devcloud.make_qcow2(os.path.join(self.workdir, "d.qcow2"),
                                   4 * MiB, seed=7)
        src = src_svc.create({
            "name": "debian", "disk_format": "qcow2",
            "container_format": "bare", "min_disk": 3, "min_ram": 768,
            "tags": ["prod", "base"], "os_distro": "debian",
            "a b": "spaces", "ключ": "значение", "x&y=z": "?#%",
            "backend": "not-a-store"})
        src = src_svc.upload(src["id"], lambda: open(path, "rb"),
                             os.path.getsize(path))
        metadata.check_migratable(src)
        desc = metadata.describe(src)
        self.assertEqual("not-a-store", desc["properties"]["backend"])

        args = metadata.create_args(
            desc, keep_id=True, extra_properties={"dtn_migration_id": "m-7"})
        dst = dst_svc.create(args)
        self.assertEqual((src["id"], "queued"), (dst["id"], dst["status"]))
        self.assertEqual([dst["id"]], [
            i["id"] for i in dst_svc.find("dtn_migration_id", "m-7")])
        self.assertRaises(exception.Conflict, dst_svc.create, args)
        # Straight from one Glance into the other.
        dst = dst_svc.upload(dst["id"],
                             lambda: src_svc.download(src["id"]),
                             src["size"])
        self.assertEqual("active", dst["status"])
        self.assertEqual([], metadata.compare(desc, dst_svc.get(dst["id"])))
        self.assertEqual((3, 768, "?#%"),
                         (dst["min_disk"], dst["min_ram"], dst["x&y=z"]))

        # A copy that differs is caught.
        bad = self.raw_image(dst_svc, b"not the image", **dict(
            metadata.create_args(desc), min_ram=1, disk_format="raw",
            tags=["prod"], os_distro="ubuntu"))
        self.assertEqual(
            {"min_ram", "size", "os_hash_value", "disk_format", "tags",
             "properties.os_distro"},
            {d.field for d in metadata.compare(desc, bad)})

    def test_upload_retries_503(self):
        g = self.glance("b")
        proxy = self.fault_proxy(g.endpoint)
        svc = self.noauth_service(proxy.url, "b")
        data = os.urandom(MiB + 3)
        image = svc.create({"disk_format": "raw",
                            "container_format": "bare"})
        opened = []

        def open_stream():
            opened.append(time.monotonic())
            return iter([data[:MiB], data[MiB:]])
        proxy.fail(503, seconds=3, retry_after=None, method="PUT",
                   path=r"/file$")
        t0 = time.monotonic()
        image = svc.upload(image["id"], open_stream, len(data))
        self.assertGreater(time.monotonic() - t0, 2.5)
        self.assertEqual(("active", sha512(data)),
                         (image["status"], image["os_hash_value"]))
        refused = proxy.count("fail", "PUT")
        self.assertGreaterEqual(refused, 2)
        self.assertEqual(refused + 1, len(opened))
        self.assertEqual(refused, self.log.output.count("HTTP 503"))
        self.assertIn("upload of image %s (queued): HTTP 503; retry 1 of 8"
                      % image["id"], self.log.output)

    def test_upload_honours_retry_after_429(self):
        g = self.glance("b")
        proxy = self.fault_proxy(g.endpoint)
        svc = self.noauth_service(proxy.url, "b")
        data = os.urandom(MiB)
        image = svc.create({"disk_format": "raw",
                            "container_format": "bare"})
        proxy.fail(429, count=2, retry_after=2, method="PUT")
        t0 = time.monotonic()
        image = svc.upload(image["id"], lambda: io.BytesIO(data), len(data))
        self.assertGreaterEqual(time.monotonic() - t0, 4)
        self.assertEqual(sha512(data), image["os_hash_value"])
        self.assertEqual(2, proxy.count("fail", "PUT"))
        self.assertEqual(2, self.log.output.count("HTTP 429"))
        self.assertIn("retry 2 of 8 in 2.0 s", self.log.output)

    def test_upload_after_a_dropped_connection(self):
        g = self.glance("b")
        proxy = self.fault_proxy(g.endpoint)
        svc = self.noauth_service(proxy.url, "b")
        data = os.urandom(2 * MiB)
        image = svc.create({"disk_format": "raw",
                            "container_format": "bare"})
        proxy.reset(count=1, method="PUT")
        image = svc.upload(image["id"], lambda: iter([data]), len(data))
        self.assertEqual(sha512(data), image["os_hash_value"])
        self.assertEqual(1, proxy.count("reset"))

    def test_metadata_calls_retry_503_429_and_500(self):
        g = self.glance("b")
        proxy = self.fault_proxy(g.endpoint)
        svc = self.noauth_service(proxy.url, "b")
        image = self.raw_image(svc, b"x" * 100, tags=["t"])
        proxy.fail(503, count=2, retry_after=None, method="GET")
        self.assertEqual(image["id"], svc.get(image["id"])["id"])
        proxy.fail(429, count=1, retry_after=1, method="GET")
        self.assertEqual([image["id"]],
                         [i["id"] for i in svc.select(tag="t")])
        self.assertEqual(3, proxy.count("fail"))
        self.assertIn("Retriable status code 503", self.log.output)
        self.assertIn("Retriable status code 429", self.log.output)
        # A 500 is what Glance answers for a database error of a moment
        # (its SQLite "database is locked" under load, a deadlock):
        # asked again, as a 503, whatever the method.
        proxy.fail(500, count=1, retry_after=None, method="GET")
        self.assertEqual(image["id"], svc.get(image["id"])["id"])
        proxy.fail(500, count=1, retry_after=None, method="POST")
        created = svc.create({"disk_format": "raw",
                              "container_format": "bare", "name": "again"})
        self.assertEqual("queued", created["status"])
        proxy.fail(500, count=1, retry_after=None, method="PATCH")
        self.assertEqual("renamed", svc.update(created["id"],
                                               {"name": "renamed"})["name"])
        self.assertEqual(6, proxy.count("fail"))
        self.assertIn("Retriable status code 500", self.log.output)

    def test_gives_up_when_glance_stays_unavailable(self):
        g = self.glance("b")
        proxy = self.fault_proxy(g.endpoint)
        svc = self.noauth_service(proxy.url, "b", retries=2,
                                  retry_max_delay=0.2)
        image = svc.create({"disk_format": "raw",
                            "container_format": "bare"})
        proxy.fail(503, retry_after=None, method="PUT")
        e = self.assertRaises(exception.ImageServiceUnavailable, svc.upload,
                              image["id"], lambda: iter([b"x" * 10]), 10)
        self.assertIn("gave up after 2 retries", str(e))
        self.assertEqual(3, proxy.count("fail", "PUT"))
        proxy.fail(503, retry_after=None, method="GET")
        self.assertRaises(exception.ImageServiceUnavailable, svc.get,
                          image["id"])


class TestKeystone(ImageServiceTestCase):

    def test_wrong_credentials(self):
        ks = self.keystone()
        g = self.glance("a", keystone=ks)
        user = ks.create_user("alice")
        svc = self.password_service(ks, g, user, password="wrong")
        e = self.assertRaises(exception.ImageServiceAuthFailed, svc.select,
                              tag="x")
        self.assertIn("image service of a", str(e))
        self.assertIn("401", str(e))
        self.assertEqual([], self.password_service(ks, g, user).select(
            tag="x"))

    def test_tokens_are_renewed_during_a_long_migration(self):
        # keystoneauth1 renews a token 120 s before it expires: with a
        # 125 s lifetime the first token serves about 5 s.
        ks = self.keystone(token_expiration=125)
        g = self.glance("a", keystone=ks)
        user = ks.create_user("bob")
        ks_proxy = self.fault_proxy(ks.endpoint)
        svc = self.password_service(ks, g, user,
                                    auth_url=ks_proxy.url + "/v3")

        def issued():
            return ks_proxy.count("pass", "POST")
        data = os.urandom(MiB)
        t0 = time.monotonic()
        image = svc.create({"disk_format": "raw",
                            "container_format": "bare"})
        image = svc.upload(image["id"], lambda: iter([data]), len(data))
        self.assertEqual([image["id"]], [i["id"] for i in svc.select()])
        first = svc.session.get_token()
        self.assertEqual(1, issued())

        time.sleep(max(0, t0 + 6 - time.monotonic()))
        self.assertEqual(data, b"".join(svc.download(image["id"])))
        self.assertEqual(data[7:], b"".join(svc.download(image["id"], 7)))
        other = svc.create({"disk_format": "raw",
                            "container_format": "bare"})
        svc.upload(other["id"], lambda: iter([data]), len(data))
        self.assertEqual(image["os_hash_value"],
                         svc.get(other["id"])["os_hash_value"])
        self.assertNotEqual(first, svc.session.get_token())
        self.assertGreater(issued(), 1)

    def test_401_in_the_middle_authenticates_again(self):
        ks = self.keystone()
        g = self.glance("a", keystone=ks)
        user = ks.create_user("carol")
        ks_proxy = self.fault_proxy(ks.endpoint)
        glance_proxy = self.fault_proxy(g.endpoint)
        svc = self.password_service(ks, g, user,
                                    auth_url=ks_proxy.url + "/v3",
                                    endpoint_override=glance_proxy.url)
        image = svc.create({"disk_format": "raw",
                            "container_format": "bare"})
        tokens = [svc.session.get_token()]
        self.assertEqual(1, ks_proxy.count("pass", "POST"))

        # Glance refuses the token once during the upload, then once
        # during a metadata call and a download.
        data = os.urandom(MiB)
        glance_proxy.fail(401, count=1, method="PUT", retry_after=None)
        image = svc.upload(image["id"], lambda: iter([data]), len(data))
        self.assertEqual(sha512(data), image["os_hash_value"])
        tokens.append(svc.session.get_token())
        glance_proxy.fail(401, count=1, method="GET", retry_after=None)
        self.assertEqual("active", svc.get(image["id"])["status"])
        tokens.append(svc.session.get_token())
        glance_proxy.fail(401, count=1, method="GET", path=r"/file$",
                          retry_after=None)
        self.assertEqual(data, b"".join(svc.download(image["id"])))
        tokens.append(svc.session.get_token())

        self.assertEqual(3, glance_proxy.count("fail"))
        self.assertEqual(4, ks_proxy.count("pass", "POST"))
        self.assertEqual(4, len(set(tokens)))

        # A 401 that persists is an authentication failure.
        glance_proxy.fail(401, count=2, method="PUT", retry_after=None)
        other = svc.create({"disk_format": "raw",
                            "container_format": "bare"})
        self.assertRaises(exception.ImageServiceAuthFailed, svc.upload,
                          other["id"], lambda: iter([data]), len(data))
