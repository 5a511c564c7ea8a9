"""Two real clouds with their REST APIs (:mod:`devcloud.apipair`),
shared by a test class.

Each cloud has its own Keystone (the personas of
:func:`devcloud.api.personas`), a Glance behind it, a DTN
agent, an engine and ``dtn-migrate-api`` under uwsgi, all on the cloud's
own RabbitMQ vhost; engine and API share the cloud's ``[database]``.
Cloud A's database is a private MariaDB (devcloud/dbserver.py)
that a test may restart; cloud B's is SQLite.  Cloud A's agent sends at
``RATE`` bytes/s, so that a migration lasts long enough to be cancelled
or to outlive a restart.

Tests act as an operator does: the real ``openstack`` executable as a
subprocess (:meth:`ApiPairTestCase.openstack`), or raw HTTP with a real
token (:meth:`ApiPairTestCase.http`).
"""

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid

import requests
import testtools
from testtools import content

import devcloud
from devcloud import apipair
from tests.functional import base
from devcloud import dbserver
from tests.functional.migration import harness as migration
from tests.functional.migration import scope as class_scope

MiB = 1 << 20
OPENSTACK = os.path.join(os.path.dirname(sys.executable), "openstack")
MANAGE = apipair.MANAGE
RATE = apipair.RATE
FINAL = ("complete", "failed", "cancelled")


#: The two clouds with their APIs (:mod:`devcloud.apipair`), under the
#: names the tests use.
ApiCloud = apipair.ApiCloud
start_pair = apipair.start_pair


class ApiPairTestCase(testtools.TestCase):
    """Clouds ``a`` (source) and ``b`` (peer) with their APIs."""

    timeout = 600

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.scope = class_scope.ClassScope.opened(
            "dtnm-apiclass-", (devcloud.available(), base.Broker.available(),
                               dbserver.available("mariadb")),
            cls._start_clouds)

    @classmethod
    def _start_clouds(cls, scope):
        cls.mariadb = scope._started(dbserver.MariaDB())
        cls.a, cls.b = start_pair(scope, cls.mariadb.database(
            "dtnm_api_%s" % uuid.uuid4().hex[:8]))

    @classmethod
    def tearDownClass(cls):
        cls.scope.close()
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        self.workdir = tempfile.mkdtemp(prefix="dtnm-api-",
                                        dir=base.data_root())
        self.addCleanup(shutil.rmtree, self.workdir, True)
        for c in (self.a, self.b):
            for name, server in (("engine", c.engine), ("agent", c.agent)):
                self.addOnException(
                    lambda exc_info, c=c, n=name, s=server: self.addDetail(
                        "log-%s-%s" % (n, c.name),
                        content.text_content(s.tail(300))))
            self.addOnException(
                lambda exc_info, c=c: self.addDetail(
                    "log-api-%s" % c.name,
                    content.text_content(c.api.log_text()[-20000:])))

    # The operator's tools.

    def openstack(self, persona, *args, cloud=None, check=True,
                  timeout=300):
        """Run ``openstack ARGS`` as PERSONA on CLOUD (default A); the
        CompletedProcess (text).  CHECK: fail unless it exits 0.
        """
        cloud = cloud or self.a
        proc = subprocess.run([OPENSTACK] + list(args),
                              env=cloud.env(persona), capture_output=True,
                              text=True, timeout=timeout)
        self.addDetail("openstack-%s-%s" % (persona, uuid.uuid4().hex[:4]),
                       content.text_content(
                           "$ openstack %s\nrc=%d\n--- stdout\n%s\n"
                           "--- stderr\n%s" % (
                               " ".join(args), proc.returncode,
                               proc.stdout, proc.stderr)))
        if check:
            self.assertEqual(0, proc.returncode, "openstack %s: %s%s" % (
                " ".join(args), proc.stdout, proc.stderr))
        return proc

    def openstack_json(self, persona, *args, **kwargs):
        proc = self.openstack(persona, *(args + ("-f", "json")), **kwargs)
        return json.loads(proc.stdout)

    def token(self, persona, cloud=None):
        return (cloud or self.a).users[persona].session().get_token()

    def http(self, persona, method, path, cloud=None, **kwargs):
        """A raw request to CLOUD's API with PERSONA's token."""
        cloud = cloud or self.a
        headers = kwargs.pop("headers", {})
        if persona is not None:
            headers.setdefault("X-Auth-Token", self.token(persona, cloud))
        return requests.request(method, cloud.api.endpoint + path,
                                headers=headers, timeout=60, **kwargs)

    # Images and migrations.

    def upload(self, size, persona="alice", cloud=None, write=None,
               **fields):
        """An image of SIZE random bytes owned by PERSONA's project, or
        of what ``write(path, size)`` puts in its file.
        """
        cloud = cloud or self.a
        client = cloud.glance.client(
            session=cloud.users[persona].session())
        fields.setdefault("disk_format", "raw")
        fields.setdefault("container_format", "bare")
        fields.setdefault("name", "api-%s" % uuid.uuid4().hex[:6])
        image = client.images.create(**fields)
        path = os.path.join(self.workdir, image["id"])
        (write or functools.partial(base.make_file, seed=size))(path, size)
        with open(path, "rb") as f:
            client.images.upload(image["id"], f)
        os.unlink(path)
        return dict(devcloud.wait_image(client, image["id"]))

    def peer_image(self, image_id):
        """Cloud B's copy of image IMAGE_ID (by id, as admin)."""
        return dict(self.b.glance.client(
            session=self.b.users["admin"].session()).images.get(image_id))

    def migrations_of(self, image_id, persona="alice"):
        resp = self.http(persona, "GET", "/v1/migrations",
                         params={"image_id": image_id})
        self.assertEqual(200, resp.status_code, resp.text)
        return resp.json()["migrations"]

    def show(self, migration_id, persona="alice"):
        return self.openstack_json(persona, "dtn", "migration", "show",
                                   migration_id)

    def rest_show(self, migration_id, persona="alice"):
        resp = self.http(persona, "GET", "/v1/migrations/%s" % migration_id)
        self.assertEqual(200, resp.status_code, resp.text)
        return resp.json()["migration"]

    wait_until = migration.MigrationTestCase.wait_until

    def start_migration(self, image_id, persona="alice"):
        """Ask for a migration over REST; its Migration object."""
        resp = self.http(persona, "POST", "/v1/migrations", json={
            "peer": self.b.agent_name, "images": [image_id]})
        self.assertEqual(202, resp.status_code, resp.text)
        [rec] = resp.json()["migrations"]
        return rec

    def wait_transferring(self, migration_id):
        """Wait until some bytes crossed the DTN link."""
        return self.wait_until(
            lambda: (lambda m: m if m["bytes"]["transfer"] else None)(
                self.rest_show(migration_id)),
            "bytes on the DTN link of %s" % migration_id, interval=0.2)

    def wait_final(self, migration_id, timeout=300):
        return self.wait_until(
            lambda: (lambda m: m if m["state"] in FINAL else None)(
                self.rest_show(migration_id)),
            "migration %s to end" % migration_id, timeout=timeout,
            interval=0.5)

    def assertMigrated(self, rec, source):
        """REC (a Migration object) is complete with the whole image,
        and cloud B holds an active image of the same data.
        """
        self.assertEqual("complete", rec["state"], rec.get("error"))
        self.assertEqual(source["id"], rec["image_id"])
        self.assertEqual(source["size"], rec["size"])
        self.assertEqual(1.0, rec["progress"])
        self.assertEqual(source["size"], rec["bytes"]["transfer"])
        self.assertEqual(source["os_hash_value"], rec["os_hash_value"])
        self.assertEqual(source["os_hash_value"], rec["peer_image_hash"])
        self.assertIsNotNone(rec["finished_at"])
        peer = self.peer_image(rec["peer_image_id"])
        self.assertEqual("active", peer["status"])
        self.assertEqual(source["os_hash_value"], peer["os_hash_value"])
        self.assertEqual(source["size"], peer["size"])
        return peer
