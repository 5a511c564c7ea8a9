"""The source project travels with a migration, and the peer's rules map
it to a project of the peer's own (``[peer:<name>] project_map``), on
the real flows of two engines.
"""

from dtn_migrate.conf import peer as peer_conf
from dtn_migrate import context
from tests.unit.engine import base


class TestSourceProject(base.EngineTestCase):

    def setUp(self):
        super().setUp()
        # Engine B's rules for the DTN it receives from (named "a").
        group = peer_conf.group_name("a")
        self.b.conf.register_opts(peer_conf.peer_opts, group=group)
        self.b.conf.set_override("project_map", {"p1": "t1", "p2": "t2"},
                                 group)
        self.b.conf.set_override("allowed_projects", ["t1", "t2"], group)

    def migrate(self, project, **options):
        image = self.image(size=1 << 20)
        ctx = context.RequestContext(user_id="u-%s" % project,
                                     project_id=project, is_admin=False,
                                     overwrite=False)
        [rec] = self.a.request("b", images=[image["id"]],
                               options=options or None,
                               context=ctx)["migrations"]
        self.assertTrue(self.a.wait_idle(60))
        self.assertTrue(self.b.wait_idle(60))
        return image, self.a.get(rec["migration_id"])

    def test_each_project_lands_in_its_own(self):
        for project, owner in (("p1", "t1"), ("p2", "t2")):
            image, rec = self.migrate(project)
            self.assertEqual("complete", rec["state"], rec["error"])
            self.assertEqual(owner, self.assertImported(image)["owner"])

    def test_a_project_cannot_land_in_anothers(self):
        # Even though the peer allows t2 for the sources it does not map.
        image, rec = self.migrate("p1", target_project="t2")
        self.assertEqual("failed", rec["state"])
        self.assertIn("may not import into project t2: [peer:a] does not "
                      "allow it for source project p1", rec["error"])
        # The refusal, which p1's members read, names no other project.
        self.assertNotIn("t1", rec["error"])
        self.assertEqual([], self.glance_b.find(
            "dtn_migrate_transfer_id", rec["transfer_id"]))
        # A project the map does not name keeps the peer's rules.
        image, rec = self.migrate("p3", target_project="t2")
        self.assertEqual("complete", rec["state"], rec["error"])
        self.assertEqual("t2", self.assertImported(image)["owner"])
