"""The preflight (issue 37, 3): before the first byte, the peer's engine
says whether it would import the image, with the rules its import meets
on arrival; on the real flows of two engines (fake agents carry the
request, as the DTN link's request channel does).
"""

from unittest import mock

import fixtures

from dtn_migrate.conf import peer as peer_conf
from dtn_migrate.engine import preflight
from dtn_migrate.engine.tasks import outgoing
from dtn_migrate import exception
from dtn_migrate.image import marker
from tests.unit.engine import base
from tests.unit.engine import fakes


class TestPreflight(base.EngineTestCase):

    def setUp(self):
        super().setUp()
        # Engine B's rules for the DTN it receives from (named "a").
        group = peer_conf.group_name("a")
        self.b.conf.register_opts(peer_conf.peer_opts, group=group)
        self.b.conf.set_override("allowed_projects", ["t1"], group)
        self.b.conf.set_override("allowed_visibilities", ["private"], group)
        self.agents.engines["dtn-b"] = self.b
        self.useFixture(fixtures.MockPatchObject(
            outgoing.Preflight, "RETRY_INTERVAL", 0.05))

    def image(self, size=1 << 20, **fields):
        fields.setdefault("visibility", "private")
        return super().image(size, **fields)

    def preflights(self):
        return [r for _h, _p, r in self.agents.requests
                if r.get("action") == "preflight"]

    def assertRefusedAtPreflight(self, rec, *texts):
        """Failed at stage preflight: nothing exported, sent, staged or
        imported on either side.
        """
        self.assertEqual(("failed", "preflight"), (rec["state"],
                                                   rec["stage"]), rec)
        self.assertIn("Peer b refused the import of image %s before any "
                      "byte was sent: " % rec["image_id"], rec["error"])
        for text in texts:
            self.assertIn(text, rec["error"])
        self.assertEqual(0, self.glance_a.downloaded)
        self.assertEqual({}, self.agents.transfers)
        self.assertEqual([], self.staged("dtn-a"))
        self.assertEqual([], self.staged("dtn-b"))
        self.assertEqual([], self.b.list())
        self.assertEqual([], self.glance_b.find(
            "dtn_migrate_transfer_id", rec["transfer_id"]))
        self.assertEqual((None, None, None), (
            rec["bytes_export"], rec["bytes_transfer"], rec["bytes_import"]))
        events = [(e["stage"], e["event"]) for e in self.a.events(
            rec["migration_id"])]
        self.assertIn(("preflight", "failed"), events)
        self.assertIn((None, "refused"), events)

    def test_a_disallowed_visibility_fails_at_preflight(self):
        image = self.image()
        [rec] = self.run_request([image["id"]], visibility="public")
        self.assertRefusedAtPreflight(
            rec, "may not import with visibility public (asked for)",
            "[peer:a] allowed_visibilities does not list it")
        [req] = self.preflights()
        self.assertEqual(image["size"], req["size"])
        self.assertEqual(rec["transfer_id"], req["transfer_id"])

    def test_a_disallowed_source_visibility_fails_at_preflight(self):
        image = self.image(visibility="shared")
        [rec] = self.run_request([image["id"]])
        self.assertRefusedAtPreflight(
            rec, "with visibility shared (the source image's)")

    def test_a_disallowed_project_fails_at_preflight(self):
        [rec] = self.run_request([self.image()["id"]],
                                 target_project="t2")
        self.assertRefusedAtPreflight(
            rec, "may not import into project t2: [peer:a] does not allow "
                 "it for no source project")
        # What is allowed (B's projects) is not A's to read.
        self.assertNotIn("t1", rec["error"])

    def test_a_kept_id_taken_in_the_peer_fails_at_preflight(self):
        image = self.image()
        self.glance_b.add(b"other", id=image["id"], name="someone else's")
        [rec] = self.run_request([image["id"]], keep_id=True)
        self.assertEqual(("failed", "preflight"), (rec["state"],
                                                   rec["stage"]), rec)
        self.assertIn("an image with id %s exists in the peer's Glance"
                      % image["id"], rec["error"])
        self.assertEqual(0, self.glance_a.downloaded)
        self.assertEqual({}, self.agents.transfers)

    def test_allowed_migrates_after_its_preflight(self):
        image = self.image()
        [rec] = self.run_request([image["id"]], target_project="t1",
                                 keep_id=True)
        self.assertEqual("complete", rec["state"], rec["error"])
        self.assertEqual("complete", rec["stages"]["preflight"]["state"])
        self.assertEqual("t1", self.assertImported(image)["owner"])
        [req] = self.preflights()
        self.assertEqual({"keep_id": True, "target_project": "t1",
                          "visibility": None}, req["options"])
        events = [(e["stage"], e["event"]) for e in self.a.events(
            rec["migration_id"])]
        self.assertLess(events.index(("preflight", "finished")),
                        events.index(("export", "started")))

    def test_a_peer_that_does_not_answer_at_first_is_asked_again(self):
        self.agents.unanswered = 3
        image = self.image()
        [rec] = self.run_request([image["id"]])
        self.assertEqual("complete", rec["state"], rec["error"])
        self.assertEqual(4, len(self.preflights()))

    def test_a_peer_that_never_answers_fails_the_preflight(self):
        self.a.conf.set_override("stall_timeout", 10, "engine")
        self.agents.unanswered = 10 ** 6
        [rec] = self.run_request([self.image()["id"]])
        self.assertEqual(("failed", "preflight"), (rec["state"],
                                                   rec["stage"]), rec)
        self.assertIn("b did not answer the preflight for 10 s: Peer DTN b "
                      "cannot be reached: connection refused", rec["error"])
        self.assertEqual(0, self.glance_a.downloaded)
        self.assertEqual({}, self.agents.transfers)

    def test_the_import_checks_its_rules_whatever_the_preflight_said(self):
        # A peer whose preflight answered yes (an engine that changed its
        # rules meanwhile, say): the import refuses on arrival.
        with mock.patch.object(fakes.preflight, "answer",
                               return_value={"allowed": True}):
            [rec] = self.run_request([self.image()["id"]],
                                     visibility="public")
        self.assertEqual("failed", rec["state"])
        self.assertIn("import at b failed", rec["error"])
        self.assertIn("may not import with visibility public", rec["error"])
        self.assertEqual([], self.glance_b.find(
            "dtn_migrate_transfer_id", rec["transfer_id"]))


class TestAnswer(base.EngineTestCase):
    """The receiving engine's answer to a preflight request."""

    def answer(self, **req):
        req.setdefault("action", "preflight")
        req.setdefault("options", {})
        return preflight.answer(self.b.conf, self.b.res, "a", req)

    def test_a_malformed_request_is_invalid(self):
        for req in ({"options": None}, {"options": {"visibility": 3}},
                    {"source_project": ""}, {"image": "x"},
                    {"image": {"id": "i"}, "transfer_id": "nope"}):
            self.assertRaises(exception.InvalidInput, self.answer, **req)

    def test_a_policy_asks_without_an_image(self):
        self.assertEqual({"allowed": True}, self.answer(
            source_project="p1", options={"target_project": None}))

    def test_the_kept_id_of_this_transfers_own_import_is_free(self):
        # A retried migration resumes the import its first attempt made.
        tid = "ab" * 16
        kept = fakes.add_imported(self.glance_b, self.b.res.seal_key(), tid,
                                  "a")["id"]
        image = {"id": kept, "visibility": "private"}
        self.assertEqual({"allowed": True}, self.answer(
            options={"keep_id": True}, transfer_id=tid, size=3,
            image=image))
        # Another transfer's, or one a Glance user marked with its id.
        self.glance_b.update(kept, {marker.SEAL: "0" * 64})
        for other in (tid, "cd" * 16):
            self.assertEqual({"allowed": False, "reason": (
                "an image with id %s exists in the peer's Glance: the id "
                "cannot be kept" % kept)}, self.answer(
                    options={"keep_id": True}, transfer_id=other, size=3,
                    image=image))
