"""The receiving cloud decides who owns what it imports (issue 12, 3).

Cloud B's engine holds rules for cloud A's DTN ([peer:<A's agent>]): an
import project, one more project A may ask for, and the visibilities A
may ask for.  Requests outside them are refused by B before any image
is created; the refusal, naming the rule, reaches A's record, and B
logs it.  One pair of clouds serves every case: its migrations run at
once.
"""

import io
import os
import uuid

import fixtures

import devcloud
from devcloud import pair
from dtn_migrate import exception
from tests.functional.migration import harness as migration

MiB = 1 << 20
IMPORT_PROJECT = "imp-%s" % uuid.uuid4().hex[:8]
ALLOWED_PROJECT = "ok-%s" % uuid.uuid4().hex[:8]
DENIED_PROJECT = "no-%s" % uuid.uuid4().hex[:8]
ALLOWED_VISIBILITIES = ("private", "public")


class TestImportRules(migration.MigrationTestCase):

    def setUp(self):
        super().setUp()
        self.peers_of = {}
        engine_class = pair.Engine
        case = self

        def engine(workdir, name, transport_url, agent_host, *args, **kw):
            # Cloud B's engine gets the rules for the DTN of cloud A
            # (the only peer of B's agent).
            if name.startswith("engine-b-"):
                [peer] = case.peers_of[agent_host]
                kw["extra"] = {"peer:%s" % peer: {
                    "import_project": IMPORT_PROJECT,
                    "allowed_projects": ALLOWED_PROJECT,
                    "allowed_visibilities": ",".join(ALLOWED_VISIBILITIES)}}
            return engine_class(workdir, name, transport_url, agent_host,
                                *args, **kw)

        # The clouds' harness (devcloud.pair) makes the engines.
        self.useFixture(fixtures.MockPatchObject(pair, "Engine", engine))

    def agent(self, name, peers, **kw):
        self.peers_of[name] = sorted(peers)
        return super().agent(name, peers, **kw)

    def images_of(self, transfer_id):
        return [dict(i) for i in self.b.admin().images.list(
            filters={"dtn_migrate_transfer_id": transfer_id})]

    def test_rules_hold(self):
        a, b = self.clouds()
        rule = "[peer:%s]" % a.agent_name

        def image(name, **fields):
            # One image per case: a second request for an image that
            # migrates to the same peer would join the first.
            return self.upload(a, data=os.urandom(MiB), name=name,
                               **fields)

        def private(name):
            return image(name, visibility="private")

        shared = image("shared")
        self.assertEqual("shared", shared["visibility"])
        cases = {
            # name: (source image, options, what A's error must say)
            "denied-project": (private("p1"),
                               {"target_project": DENIED_PROJECT},
                               ["may not import into project %s"
                                % DENIED_PROJECT,
                                "%s does not allow it for no source "
                                "project" % rule]),
            "denied-visibility": (private("p2"), {"visibility": "community"},
                                  ["with visibility community (asked for)",
                                   "%s allowed_visibilities does not list "
                                   "it" % rule]),
            "denied-source-visibility": (
                shared, {}, ["with visibility shared (the source "
                             "image's)"]),
            "allowed": (private("p3"), {"target_project": ALLOWED_PROJECT,
                                        "visibility": "public"}, None),
            "default": (private("p4"), {}, None),
        }
        started = {}
        for name, (image, options, _) in cases.items():
            req = self.migrate(images=[image["id"]], **options)
            started[name] = req["migrations"][0]["migration_id"]
        recs = {name: self.wait_migration(mid)
                for name, mid in started.items()}

        for name, (image, options, error) in cases.items():
            rec = recs[name]
            if error is None:
                continue
            # Refused by B's preflight, before any byte (issue 37, 3).
            self.assertEqual(("failed", "preflight"),
                             (rec["state"], rec["stage"]), (name, rec))
            self.assertIn("Peer %s refused the import of image %s before "
                          "any byte was sent: " % (b.agent_name,
                                                   image["id"]),
                          rec["error"])
            for text in error:
                self.assertIn(text, rec["error"], name)
            # It reaches A's members: it names what was refused, never
            # what B allows (its projects' ids).
            for allowed in (IMPORT_PROJECT, ALLOWED_PROJECT):
                self.assertNotIn(allowed, rec["error"], name)
            # Nothing of the refused import reached B's Glance.
            self.assertEqual([], self.images_of(rec["transfer_id"]), name)

        peer = self.assertMigrated(recs["allowed"], cases["allowed"][0],
                                   visibility="public")
        self.assertEqual(ALLOWED_PROJECT, peer["owner"])
        peer = self.assertMigrated(recs["default"], cases["default"][0])
        self.assertEqual(IMPORT_PROJECT, peer["owner"])
        self.assertEqual("private", peer["visibility"])
        self.assertNotEqual(devcloud.glance.DEFAULT_PROJECT, peer["owner"])

        # B logged each refusal as a warning, with the transfer.
        log = b.engine.log_text()
        for name in ("denied-project", "denied-visibility",
                     "denied-source-visibility"):
            tid = recs[name]["transfer_id"]
            self.assertIn("WARNING dtn_migrate.engine.import_rules "
                          "[-] import of transfer %s refused: Peer %s may "
                          "not import" % (tid, a.agent_name), log)

        self.check_planted_markers(a, b, peer)

    def test_refused_at_preflight(self):
        """Issue 37, 3: a visibility or a project that B does not allow
        fails A's migration at stage preflight, before any byte: no
        transfer on the DTN link (neither agent knows it), nothing
        staged on either side, nothing in B's Glance; twice over, and
        for a protection policy's creation.
        """
        a, b = self.clouds()
        cases = (({"visibility": "community"},
                  "may not import with visibility community (asked for)"),
                 ({"target_project": DENIED_PROJECT},
                  "may not import into project %s" % DENIED_PROJECT))
        for round_ in range(2):
            started = []
            for options, error in cases:
                image = self.upload(a, data=os.urandom(4 * MiB),
                                    name="refused-%d" % round_,
                                    visibility="private")
                req = self.migrate(images=[image["id"]], **options)
                started.append((image, req["migrations"][0], error))
            for image, rec, error in started:
                rec = self.wait_migration(rec["migration_id"])
                tid = rec["transfer_id"]
                self.assertEqual(("failed", "preflight"),
                                 (rec["state"], rec["stage"]), rec)
                self.assertIn("Peer %s refused the import of image %s "
                              "before any byte was sent: Peer %s %s"
                              % (b.agent_name, image["id"], a.agent_name,
                                 error), rec["error"])
                self.assertEqual((None, None, None), (
                    rec["bytes_export"], rec["bytes_transfer"],
                    rec["bytes_import"]))
                # No transfer: not a byte of it on the DTN link.
                self.assertEqual({}, self.transfer_status(a, tid))
                self.assertNotIn(tid, [i.get("transfer_id") for i in
                                       b.bus.agent().list_incoming(
                                           {}, b.agent_name)])
                self.assertEqual([], self.images_of(tid))
                self.assertFalse(os.path.exists(os.path.join(
                    b.staging_dir, ".dtn-partial", tid)))
            self.assertEqual([], a.staged_files())
            self.assertEqual([], b.staged_files())
        # B's engine decided, from what A's agent asked over the link.
        log = b.engine.log_text()
        for image, rec, _error in started:
            self.assertIn("import of transfer %s refused"
                          % rec["transfer_id"], log)

        # A policy B would refuse is refused at its creation (409).
        values = {"name": "refused", "peer": b.agent_name,
                  "mode": "manual", "selector": {"tags": ["gold"]},
                  "project_id": "p-%s" % uuid.uuid4().hex[:8],
                  "options": {"target_project": DENIED_PROJECT}}
        exc = self.assertRaises(exception.PreflightRefused,
                                a.bus.engine.create_policy,
                                migration.ADMIN, values)
        self.assertEqual(409, exc.code)
        self.assertIn("refused the policy's imports before any byte was "
                      "sent: Peer %s may not import into project %s"
                      % (a.agent_name, DENIED_PROJECT), str(exc))
        values["options"]["target_project"] = ALLOWED_PROJECT
        created = a.bus.engine.create_policy(migration.ADMIN, values)
        self.assertEqual(ALLOWED_PROJECT,
                         created["options"]["target_project"])

    def check_planted_markers(self, a, b, sealed):
        """Glance users of B mark images with the id of a transfer that
        is on its way (B's engine is down meanwhile): a member of the
        import's project twice (a queued image, and an active one with
        the source's data and the seal of another import, ``sealed``,
        copied), a member of another project once, all protected.  The
        import makes an image of its own and leaves theirs as they were.
        """
        data = os.urandom(MiB)
        source = self.upload(a, data=data, name="planted",
                             visibility="private")
        b.engine.stop()
        req = self.migrate(images=[source["id"]])
        rec = req["migrations"][0]
        tid = rec["transfer_id"]
        member = b.glance.client(project_id=IMPORT_PROJECT)
        outsider = b.glance.client(project_id=DENIED_PROJECT)
        fields = {"disk_format": "raw", "container_format": "bare",
                  "dtn_migrate_transfer_id": tid}
        queued = member.images.create(name="hostile-queued", **fields)
        active = member.images.create(
            name="hostile-active", dtn_migrate_import_seal=sealed.get(
                "dtn_migrate_import_seal", "0" * 64), **fields)
        member.images.upload(active["id"], io.BytesIO(data))
        other = outsider.images.create(name="hostile-other", **fields)
        outsider.images.upload(other["id"], io.BytesIO(data))
        planted = {}
        for client, image in ((member, queued), (member, active),
                              (outsider, other)):
            client.images.update(image["id"], protected=True)
            planted[image["id"]] = dict(client.images.get(image["id"]))
        b.engine.start()
        b.wait_ready()

        rec = self.wait_migration(rec["migration_id"])
        self.assertEqual("complete", rec["state"], rec.get("error"))
        imported = rec["peer_image"]["image_id"]
        self.assertNotIn(imported, planted)
        admin = b.admin()
        peer = dict(admin.images.get(imported))
        self.assertEqual((IMPORT_PROJECT, "active", source["os_hash_value"],
                          tid),
                         (peer["owner"], peer["status"],
                          peer["os_hash_value"],
                          peer["dtn_migrate_transfer_id"]))
        log = b.engine.log_text()
        for image_id, before in planted.items():
            after = dict(admin.images.get(image_id))
            self.assertEqual(
                {k: before[k] for k in before if k != "updated_at"},
                {k: after[k] for k in before if k != "updated_at"},
                image_id)
            self.assertTrue(after["protected"])
        # Each of the project's is logged; the outsider's is not even
        # asked for (Glance is asked for the project's images only).
        for image in (queued, active):
            self.assertIn("WARNING dtn_migrate.image.marker [-] image %s "
                          "carries the marker of transfer %s"
                          % (image["id"], tid), log)
