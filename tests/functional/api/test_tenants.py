"""Two tenants on each of two real clouds (issue 36, items 1, 11 and 12):
what a project member may ask of the peer cloud, through the real
``openstack`` executable.

Each cloud has its own Keystone with the projects ``demo`` (alice,
member; rita, reader) and ``other`` (bob, member).  Cloud B trusts
cloud A's DTN with several of its projects and with publishing: its
``[peer:<A's DTN>]`` maps A's ``demo`` to B's ``demo`` and A's
``other`` to B's ``other`` (``project_map``), lets A's other source
projects (its administrator's) ask for either (``allowed_projects``),
and allows every visibility.  A member still cannot land an image in
the other tenant's project, publish it, or choose its id: those are an
administrator's to ask for (policy rules), and B keeps each of A's
projects to its own.  One pair of clouds serves the class; images are
1 MiB.
"""

import uuid

from dtn_migrate import exception
from tests.functional.api import harness as api
from tests.functional.migration import harness as migration

MiB = 1 << 20
VISIBILITIES = "private, shared, public, community"


def _peer_rules(a, b):
    """Cloud B's rules for A's DTN, which name both clouds' projects."""
    def project(cloud, persona):
        return cloud.users[persona]["project_id"]

    b.extra = dict(b.extra, **{"peer:%s" % a.agent_name: {
        "project_map": "%s:%s, %s:%s" % (
            project(a, "alice"), project(b, "alice"),
            project(a, "bob"), project(b, "bob")),
        "allowed_projects": "%s, %s" % (project(b, "alice"),
                                        project(b, "bob")),
        "allowed_visibilities": VISIBILITIES}})


class TestTenants(api.ApiPairTestCase):

    @classmethod
    def _start_clouds(cls, scope):
        cls.a, cls.b = api.start_pair(scope, prepare=_peer_rules)

    def project_at_b(self, persona):
        """The project of PERSONA's tenant in cloud B."""
        return self.b.users[persona]["project_id"]

    def image(self, persona, **fields):
        return self.upload(MiB, persona=persona,
                           name="tenants-%s" % uuid.uuid4().hex[:8],
                           **fields)

    def migrate(self, persona, image, *args, check=True):
        return self.openstack(persona, "dtn", "migrate", image["id"],
                              "--peer", self.b.agent_name, "--wait", *args,
                              check=check)

    def at_b(self, image):
        """Cloud B's images named as IMAGE."""
        client = self.b.glance.client(
            session=self.b.users["admin"].session())
        return [dict(i) for i in client.images.list(
            filters={"name": image["name"]})]

    def landed(self, persona, image):
        """The peer image of PERSONA's one complete migration of IMAGE."""
        [rec] = self.migrations_of(image["id"], persona)
        return self.assertMigrated(rec, image)

    def assertRefused(self, persona, image, args, option):
        proc = self.migrate(persona, image, *args, check=False)
        out = proc.stdout + proc.stderr
        self.assertNotEqual(0, proc.returncode, out)
        self.assertIn("HTTP 403", out)
        self.assertIn("options.%s" % option, out)

    def test_a_member_asks_nothing_of_the_peer(self):
        other_b = self.project_at_b("bob")
        demo_b = self.project_at_b("alice")
        # Community in A (alice's own to choose there), which B allows.
        mine = self.image("alice", visibility="community")
        for args, option in (
                (["--target-project", other_b], "target_project"),
                (["--visibility", "public"], "visibility"),
                (["--visibility", "community"], "visibility"),
                (["--visibility", "shared"], "visibility"),
                (["--keep-id"], "keep_id")):
            self.assertRefused("alice", mine, args, option)
        bobs = self.image("bob")
        self.assertRefused("bob", bobs, ["--target-project", demo_b],
                           "target_project")
        # Nothing started, nothing reached B.
        self.assertEqual([], self.migrations_of(mine["id"]))
        self.assertEqual([], self.migrations_of(bobs["id"], "bob"))
        self.assertEqual([], self.at_b(mine) + self.at_b(bobs))

        # What a member may: each tenant lands in its own project at B,
        # private whatever its visibility in A, with a new id.
        self.migrate("alice", mine)
        self.migrate("bob", bobs)
        for persona, image, project in (("alice", mine, demo_b),
                                        ("bob", bobs, other_b)):
            peer = self.landed(persona, image)
            self.assertEqual((project, "private"),
                             (peer["owner"], peer["visibility"]), persona)
            self.assertNotEqual(image["id"], peer["id"])
        # The engine logged each request with its caller.
        log = self.a.engine.log_text()
        for persona in ("alice", "bob"):
            user = self.a.users[persona]
            self.assertIn("migrate by user %s project %s request req-"
                          % (user["user_id"], user["project_id"]), log)

    def test_an_admin_chooses_where_the_peer_allows(self):
        other_b = self.project_at_b("bob")
        demo_b = self.project_at_b("alice")
        public = self.image("admin")
        self.migrate("admin", public, "--target-project", other_b,
                     "--visibility", "public", "--keep-id")
        peer = self.landed("admin", public)
        self.assertEqual((public["id"], other_b, "public"),
                         (peer["id"], peer["owner"], peer["visibility"]))
        community = self.image("admin")
        self.migrate("admin", community, "--target-project", demo_b,
                     "--visibility", "community")
        peer = self.landed("admin", community)
        self.assertEqual((demo_b, "community"),
                         (peer["owner"], peer["visibility"]))

        # Not where B does not allow it: B refuses before creating
        # anything, and its refusal names what was refused, never the
        # projects B allows.
        elsewhere = uuid.uuid4().hex
        refused = self.image("admin")
        proc = self.migrate("admin", refused, "--target-project", elsewhere,
                            check=False)
        self.assertNotEqual(0, proc.returncode)
        [rec] = self.migrations_of(refused["id"], "admin")
        self.assertEqual("failed", rec["state"])
        self.assertIn("may not import into project %s" % elsewhere,
                      rec["error"])
        for allowed in (demo_b, other_b):
            self.assertNotIn(allowed, rec["error"])
        self.assertEqual([], self.at_b(refused))

    def test_the_peer_keeps_a_project_to_its_own(self):
        # Even an administrator of A cannot send demo's images into
        # other's project at B: B maps A's demo to its demo only.  B
        # says so before any byte crosses, when a protection policy of
        # demo is made or changed (twice over: nothing is saved).
        other_b = self.project_at_b("bob")
        demo_b = self.project_at_b("alice")
        alice_a = self.a.users["alice"]["project_id"]
        tag = "tenants-%s" % uuid.uuid4().hex[:6]
        image = self.image("alice", tags=[tag])

        def refused(text):
            # What alice reads names what was refused and her own
            # project, not the project B lets demo import into.
            self.assertIn("may not import into project %s" % other_b, text)
            self.assertIn("for source project %s" % alice_a, text)
            self.assertNotIn(demo_b, text)

        for _ in range(2):
            resp = self.http("admin", "POST", "/v1/policies", json={
                "name": tag, "peer": self.b.agent_name, "mode": "manual",
                "selector": {"tags": [tag]},
                "options": {"target_project": other_b},
                "project_id": alice_a})
            self.assertEqual(409, resp.status_code, resp.text)
            refused(resp.text)
        resp = self.http("admin", "POST", "/v1/policies", json={
            "name": tag, "peer": self.b.agent_name, "mode": "manual",
            "selector": {"tags": [tag]},
            "options": {"target_project": demo_b},
            "project_id": alice_a})
        self.assertEqual(201, resp.status_code, resp.text)
        policy = resp.json()["policy"]
        # Alice may sync her project's policy, not change what it asks.
        resp = self.http("alice", "PUT", "/v1/policies/%s" % policy["id"],
                         json={"options": {"target_project": other_b}})
        self.assertEqual(403, resp.status_code, resp.text)
        self.assertIn("options.target_project", resp.text)
        # Nor may the administrator point it at other's project.
        resp = self.http("admin", "PUT", "/v1/policies/%s" % policy["id"],
                         json={"options": {"target_project": other_b}})
        self.assertEqual(409, resp.status_code, resp.text)
        refused(resp.text)
        self.assertEqual([], self.at_b(image))

    def test_peer_details_are_an_admins(self):
        for persona in ("rita", "alice"):
            rows = self.openstack_json(persona, "dtn", "peer", "list")
            [row] = rows
            self.assertEqual(self.b.agent_name, row["Name"])
            self.assertTrue(row["Reachable"])
            self.assertIsNotNone(row["RTT (ms)"])
            self.assertFalse({"Address", "Port", "Error"} & set(row))
            shown = self.openstack_json(persona, "dtn", "peer", "show",
                                        self.b.agent_name)
            self.assertTrue(shown["reachable"])
            self.assertFalse({"address", "port", "error"} & set(shown))
        [row] = self.openstack_json("admin", "dtn", "peer", "list")
        self.assertTrue(row["Address"])
        self.assertIsInstance(row["Port"], int)
        self.assertIn("Error", row)

    def test_the_engine_refuses_an_empty_context(self):
        # Taken for an administrator's before: anything on the bus that
        # sent none saw every project's migrations.
        for call in (lambda: self.a.bus.engine.list_migrations({}),
                     lambda: self.a.bus.engine.list_peers({})):
            err = self.assertRaises(exception.Forbidden, call)
            self.assertIn("names no caller", str(err))
        # A named service context (dtn-migrate-manage's) is served.
        self.assertIsInstance(
            self.a.bus.engine.list_migrations(migration.ADMIN), list)
