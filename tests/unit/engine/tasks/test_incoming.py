"""The receiving cloud's import rules ([peer:<name>] import_project,
allowed_projects, allowed_visibilities) and the import tasks that apply
them before any image is created.
"""

import json
import logging
import os
import re
import tempfile
from unittest import mock

import fixtures
from oslo_config import cfg

from dtn_migrate import conf as dtn_conf
from dtn_migrate.common import states
from dtn_migrate.conf import peer as peer_conf
from dtn_migrate.engine import import_rules
from dtn_migrate.engine import resources
from dtn_migrate.engine.tasks import incoming
from dtn_migrate.engine.tasks import outgoing
from dtn_migrate import exception
from dtn_migrate.image import marker
from tests.unit.engine import fakes
from tests.unit import testcase

TID = "2" * 32
MID = "1" * 32
HASH = "ab" * 64


def make_conf(config_file=None, **peers):
    """A parsed configuration; ``peers`` maps a peer name to its
    [peer:<name>] overrides.
    """
    conf = cfg.ConfigOpts()
    dtn_conf.register_opts(conf)
    conf([], project="dtn-migrate-test",
         default_config_files=[config_file] if config_file else [])
    conf.set_override("poll_interval", 0.05, "engine")
    conf.set_override("stall_timeout", 10, "engine")
    conf.set_override("agent_host", "dtn-b", "engine")
    for name, values in peers.items():
        group = peer_conf.group_name(name)
        conf.register_opts(peer_conf.peer_opts, group=group)
        for key, value in values.items():
            conf.set_override(key, value, group)
    return conf


class RulesTestCase(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.log = self.useFixture(fixtures.FakeLogger(level=logging.INFO))

    def conf_from(self, text):
        """A configuration parsed from a file holding ``text``."""
        with tempfile.NamedTemporaryFile("w", suffix=".conf",
                                         delete=False) as f:
            f.write(text)
        self.addCleanup(os.unlink, f.name)
        return make_conf(config_file=f.name)

    def target(self, rules=None, source="shared", project=None,
               **options):
        """The target of an import of a ``source`` image (its
        visibility) by source project ``project``, asking for
        ``options``.
        """
        conf = make_conf(west=rules or {})
        extra = {"source_project": project} if project else {}
        return import_rules.import_target(
            conf, "west", {"visibility": source}, options, TID, **extra)

    def refused(self, rules=None, source="shared", project=None,
                **options):
        """The refusal's text, which reaches the source's members: it
        names what was refused, and none of what is allowed (other
        projects' ids); this cloud's log names both.
        """
        exc = self.assertRaises(exception.ImportNotAllowed, self.target,
                                rules, source, project, **options)
        self.assertEqual(403, exc.code)
        self.assertIn("Peer west may not import", str(exc))
        asked = {options.get("target_project"), options.get("visibility"),
                 source, project}
        rules = rules or {}
        allowed = set(rules.get("allowed_projects") or ()) | \
            set(rules.get("project_map") or {}).union(
                (rules.get("project_map") or {}).values()) | \
            {rules.get("import_project")} | \
            set(rules.get("allowed_visibilities",
                          peer_conf.DEFAULT_VISIBILITIES))
        for value in allowed - asked - {None}:
            self.assertNotRegex(str(exc), r"\b%s\b" % re.escape(value))
        # Logged on the receiving side, with the transfer.
        self.assertIn("import of transfer %s refused: %s" % (TID, exc),
                      self.log.output)
        return str(exc)


class TestDefaults(RulesTestCase):
    """No [peer:west] rules: imports land in the engine's own project,
    private or shared, as the source image was.
    """

    def test_the_source_visibility_is_kept_when_allowed(self):
        for vis in ("private", "shared"):
            self.assertEqual({"owner": None, "visibility": vis},
                             self.target(source=vis))

    def test_an_explicit_private_or_shared_is_allowed(self):
        self.assertEqual({"owner": None, "visibility": "private"},
                         self.target(source="public",
                                     visibility="private"))

    def test_public_and_community_are_refused(self):
        for vis in ("public", "community"):
            msg = self.refused(visibility=vis)
            self.assertIn("with visibility %s (asked for)" % vis, msg)
            self.assertIn("[peer:west] allowed_visibilities does not "
                          "list it", msg)
            # Only the log says what is allowed.
            self.assertIn("allowed: private, shared", self.log.output)

    def test_a_public_source_image_is_refused(self):
        msg = self.refused(source="public")
        self.assertIn("with visibility public (the source image's)", msg)

    def test_no_visibility_at_all_gets_private(self):
        self.assertEqual({"owner": None, "visibility": "private"},
                         self.target(source=None))

    def test_no_target_project_may_be_asked_for(self):
        msg = self.refused(target_project="p1")
        self.assertIn("into project p1", msg)
        self.assertIn("[peer:west] does not allow it for no source "
                      "project", msg)


class TestProjects(RulesTestCase):
    def test_import_project_is_the_default_and_may_be_asked_for(self):
        rules = {"import_project": "imp"}
        self.assertEqual("imp", self.target(rules)["owner"])
        self.assertEqual("imp", self.target(rules,
                                            target_project="imp")["owner"])
        msg = self.refused(rules, target_project="other")
        self.assertIn("into project other", msg)
        self.assertIn("(no source project; allowed: imp)",
                      self.log.output)

    def test_allowed_projects(self):
        rules = {"allowed_projects": ["p1", "p2"]}
        self.assertIsNone(self.target(rules)["owner"])
        self.assertEqual("p2", self.target(rules,
                                           target_project="p2")["owner"])
        msg = self.refused(rules, target_project="p3")
        self.assertIn("into project p3", msg)
        self.assertIn("allowed: p1, p2)", self.log.output)

    def test_both(self):
        rules = {"import_project": "imp", "allowed_projects": ["p1"]}
        self.assertEqual("imp", self.target(rules)["owner"])
        self.assertEqual("p1", self.target(rules,
                                           target_project="p1")["owner"])
        self.assertIn("into project p2",
                      self.refused(rules, target_project="p2"))
        self.assertIn("allowed: imp, p1)", self.log.output)


class TestProjectMap(RulesTestCase):
    """[peer:west] project_map: each source project of the peer cloud
    imports into its own project here, and into no other.
    """

    RULES = {"project_map": {"src1": "t1", "src2": "t2"},
             "import_project": "imp", "allowed_projects": ["t1", "t2"]}

    def test_a_mapped_project_lands_in_its_own(self):
        self.assertEqual({"owner": "t1", "visibility": "shared"},
                         self.target(self.RULES, project="src1"))
        self.assertEqual("t2", self.target(self.RULES,
                                           project="src2")["owner"])
        # Asking for its own project is asking for the default.
        self.assertEqual("t1", self.target(self.RULES, project="src1",
                                           target_project="t1")["owner"])

    def test_a_mapped_project_may_not_ask_for_another(self):
        # Not even one that allowed_projects lists for the peer: that is
        # for the source projects the map does not name.
        for asked in ("t2", "imp", "elsewhere"):
            msg = self.refused(self.RULES, project="src1",
                               target_project=asked)
            self.assertIn("into project %s: [peer:west] does not allow "
                          "it for source project src1" % asked, msg)
        self.assertIn("(source project src1; allowed: t1)",
                      self.log.output)

    def test_other_source_projects_keep_the_peers_rules(self):
        for project in ("src3", None):
            self.assertEqual("imp", self.target(self.RULES,
                                                project=project)["owner"])
            self.assertEqual("t2", self.target(
                self.RULES, project=project, target_project="t2")["owner"])
            self.refused(self.RULES, project=project,
                         target_project="elsewhere")

    def test_without_a_map_one_project_per_peer(self):
        self.assertEqual("imp", self.target({"import_project": "imp"},
                                            project="src1")["owner"])
        self.assertIsNone(self.target(project="src1")["owner"])

    def test_read_from_the_file(self):
        conf = self.conf_from(
            "[peer:west]\nproject_map = src1:t1, src2:t2\n")
        self.assertEqual({"src1": "t1", "src2": "t2"},
                         peer_conf.import_rules(conf, "west").project_map)
        self.assertEqual("t2", import_rules.import_target(
            conf, "west", {"visibility": "private"}, {}, TID,
            "src2")["owner"])

    def test_a_pair_without_a_project_is_a_config_error(self):
        conf = self.conf_from("[peer:west]\nproject_map = src1:\n")
        exc = self.assertRaises(exception.ConfigError,
                                import_rules.import_target, conf, "west",
                                {"visibility": "private"}, {}, TID, "src1")
        self.assertIn("[peer:west] project_map", str(exc))


class TestVisibilities(RulesTestCase):
    def test_public_when_allowed(self):
        rules = {"allowed_visibilities": ["private", "public"]}
        self.assertEqual("public", self.target(
            rules, source="public")["visibility"])
        self.assertEqual("public", self.target(
            rules, visibility="public")["visibility"])
        self.assertIn("with visibility shared (the source image's)",
                      self.refused(rules, source="shared"))

    def test_private_only(self):
        rules = {"allowed_visibilities": ["private"]}
        self.assertIn("with visibility shared (the source image's)",
                      self.refused(rules, source="shared"))
        self.assertEqual("private", self.target(
            rules, visibility="private")["visibility"])

    def test_the_first_allowed_when_none_is_asked_and_private_is_not(self):
        rules = {"allowed_visibilities": ["community", "public"]}
        self.assertEqual("community",
                         self.target(rules, source=None)["visibility"])

    def test_none_allowed_refuses_every_import(self):
        rules = {"allowed_visibilities": []}
        self.assertIn("allowed_visibilities is empty",
                      self.refused(rules, source=None))
        self.assertIn("allowed_visibilities does not list it",
                      self.refused(rules, source="private"))

    def test_the_choices_are_glance_visibilities(self):
        self.assertEqual(sorted(states.VISIBILITIES),
                         sorted(states.VISIBILITIES))

    def test_an_invalid_value_in_the_file_is_a_config_error(self):
        conf = self.conf_from(
            "[peer:west]\nallowed_visibilities = private,world\n")
        exc = self.assertRaises(exception.ConfigError,
                                import_rules.import_target, conf, "west",
                                {"visibility": "private"}, {}, TID)
        self.assertIn("[peer:west] allowed_visibilities", str(exc))

    def test_rules_are_read_from_the_file_for_any_peer(self):
        # The engine registers a peer's section when it first imports
        # from it: no [agent] peers list is needed.
        conf = self.conf_from("[peer:east]\nimport_project = imp\n"
                              "allowed_visibilities = public\n")
        self.assertEqual({"owner": "imp", "visibility": "public"},
                         import_rules.import_target(
                             conf, "east", {"visibility": "public"}, {},
                             TID))
        self.assertEqual({"owner": None, "visibility": "private"},
                         import_rules.import_target(
                             conf, "west", {"visibility": "private"}, {},
                             TID))


class FakeBackend:
    """A staging export holding one descriptor."""

    def __init__(self, payload):
        self.raw = json.dumps(payload).encode()

    def size(self, name):
        return len(self.raw)

    def read_small(self, name, limit):
        return self.raw[:limit]


def descriptor(source="shared", **options):
    options.setdefault("verify", True)
    return {"version": outgoing.DESCRIPTOR_VERSION, "transfer_id": TID,
            "attempt": 1,
            "image": {"id": "src", "name": "img", "size": 3,
                      "os_hash_value": HASH, "disk_format": "raw",
                      "container_format": "bare",
                      "visibility": source, "properties": {},
                      "tags": []},
            "options": options}


class TestTasks(RulesTestCase):
    def res(self, payload, **rules):
        self.images = fakes.FakeImages("b")
        agent = mock.Mock()
        agent.get_watermark.return_value = {"state": "done", "durable": 1}
        conf = make_conf(west=rules)
        return resources.Resources(conf, self.images, agent,
                                   FakeBackend(payload))

    def test_read_descriptor_decides_the_target(self):
        payload = descriptor(target_project="p1")
        task = incoming.ReadDescriptor(self.res(
            payload, import_project="imp", allowed_projects=["p1"]))
        got = task.execute(MID, TID, 1, "west")
        self.assertEqual({"owner": "p1", "visibility": "shared"},
                         got["target"])
        image_id = incoming.CreateImage(task.res).execute(MID, TID, got,
                                                          "west")
        image = self.images.get(image_id)
        self.assertEqual(("p1", "shared", TID),
                         (image["owner"], image["visibility"],
                          image[marker.MARKER]))

    def test_read_descriptor_maps_the_source_project(self):
        # The source says which of its projects migrates; the rules say
        # where that project's images land.
        rules = {"project_map": {"demo": "t-demo", "other": "t-other"},
                 "allowed_projects": ["t-demo", "t-other"]}
        payload = outgoing.descriptor_payload(
            TID, descriptor()["image"], {"verify": True}, 1, "demo")
        task = incoming.ReadDescriptor(self.res(payload, **rules))
        got = task.execute(MID, TID, 1, "west")
        self.assertEqual("demo", got["source_project"])
        self.assertEqual("t-demo", got["target"]["owner"])
        # demo asking for other's project is refused, nothing created.
        payload = outgoing.descriptor_payload(
            TID, descriptor()["image"],
            {"verify": True, "target_project": "t-other"}, 1, "demo")
        task = incoming.ReadDescriptor(self.res(payload, **rules))
        exc = self.assertRaises(exception.ImportNotAllowed, task.execute,
                                MID, TID, 1, "west")
        self.assertNotIn("t-demo", str(exc))
        self.assertEqual({}, self.images.images)

    def test_read_descriptor_refuses_a_bad_source_project(self):
        for bad in ("", "x" * 65, 5, ["demo"], "a\nb"):
            payload = dict(descriptor(), source_project=bad)
            task = incoming.ReadDescriptor(self.res(payload))
            exc = self.assertRaises(exception.InvalidInput, task.execute,
                                    MID, TID, 1, "west")
            self.assertIn("source_project", str(exc))

    def test_read_descriptor_refuses_before_any_image(self):
        for payload in (descriptor(target_project="p9"),
                        descriptor(source="public"),
                        descriptor(visibility="community")):
            task = incoming.ReadDescriptor(self.res(payload))
            self.assertRaises(exception.ImportNotAllowed, task.execute,
                              MID, TID, 1, "west")
            self.assertEqual({}, self.images.images)

    def test_create_image_applies_the_rules_of_an_older_flow(self):
        # A descriptor read before the rules existed has no "target".
        payload = descriptor(visibility="public")
        res = self.res(payload)
        self.assertRaises(exception.ImportNotAllowed,
                          incoming.CreateImage(res).execute, MID, TID,
                          payload, "west")
        self.assertEqual({}, self.images.images)
        payload = descriptor(source="private")
        res = self.res(payload, import_project="imp")
        image_id = incoming.CreateImage(res).execute(MID, TID, payload,
                                                     "west")
        self.assertEqual(("imp", "private"),
                         (self.images.get(image_id)["owner"],
                          self.images.get(image_id)["visibility"]))

    def test_read_descriptor_keeps_the_policy_served(self):
        payload = descriptor()
        payload["protection"] = {"policy_id": MID.replace("1", "a"),
                                 "name": "gold", "rpo_minutes": 15,
                                 "selector": {"tags": ["gold"]}}
        task = incoming.ReadDescriptor(self.res(payload))
        got = task.execute(MID, TID, 1, "west")
        self.assertEqual(payload["protection"], got["protection"])
        # A descriptor of an older source has none.
        task = incoming.ReadDescriptor(self.res(descriptor()))
        self.assertIsNone(task.execute(MID, TID, 1, "west").get(
            "protection"))

    def test_read_descriptor_refuses_a_bad_policy(self):
        for bad in ({"policy_id": "x", "name": "gold"},
                    {"policy_id": MID, "name": ""},
                    {"policy_id": MID, "name": "gold", "rpo_minutes": 0},
                    {"policy_id": MID, "name": "gold", "owner": "p1"},
                    ["gold"], "gold"):
            payload = descriptor()
            payload["protection"] = bad
            task = incoming.ReadDescriptor(self.res(payload))
            self.assertRaises(exception.InvalidInput, task.execute, MID,
                              TID, 1, "west")
            self.assertEqual({}, self.images.images)

    def test_validate_normalises_the_policy_id(self):
        payload = descriptor()
        payload["protection"] = {"policy_id": "%s-%s-%s-%s-%s" % (
            MID[:8], MID[8:12], MID[12:16], MID[16:20], MID[20:]),
            "name": "gold"}
        got = incoming._validate(payload, TID)
        self.assertEqual({"policy_id": MID, "name": "gold",
                          "rpo_minutes": None, "selector": None},
                         got["protection"])
        # Null: no policy.
        payload = dict(descriptor(), protection=None)
        self.assertIsNone(incoming._validate(payload, TID)["protection"])


class TestUploadHashesOnce(testcase.TestCase):
    """A pipelined import leaves the sha512 to the sink (the last block
    waits for its "done"); serial mode, or a transfer without the sink's
    check, still hashes here.
    """

    def upload(self, mode, **transfer_options):
        images = fakes.FakeImages("b")
        image_id = images.create({"name": "x"})["id"]
        agent = mock.Mock()
        agent.get_watermark.return_value = {"state": "done", "durable": 3,
                                            "path": None}
        agent.ping.return_value = {"staging_root": "/s", "pushes": []}
        backend = mock.Mock()
        backend.total_bytes.return_value = 1 << 30
        res = resources.Resources(make_conf(), images, agent, backend)
        res.copy_options = mock.Mock()
        images.upload = lambda image_id, opener, size: opener()
        opts = {"mode": mode}
        if transfer_options:
            opts["transfer_options"] = transfer_options
        incoming_ = {"image": {"size": 3, "os_hash_value": HASH},
                     "options": opts, "attempt": 1}
        with mock.patch.object(incoming.staging_stream,
                               "open_staged") as opened:
            incoming.UploadImage(res).execute(MID, TID, incoming_, image_id)
        return opened.call_args.kwargs

    def test_pipelined_does_not_hash_and_waits_for_done(self):
        kw = self.upload("pipelined")
        self.assertIsNone(kw["expected_sha512"])
        self.assertFalse(kw["digest"])
        self.assertTrue(kw["until_done"])
        self.assertIsNotNone(kw["follow"])
        self.assertTrue(kw["reuse_buffers"])    # _Body sends each block
        # The follower wakes on the agent's pushes of the watermark.
        self.assertTrue(callable(kw["follow"].wait))

    def test_serial_hashes(self):
        kw = self.upload("serial")
        self.assertEqual(HASH, kw["expected_sha512"])
        self.assertTrue(kw["digest"])
        self.assertIsNone(kw["follow"])

    def test_without_the_sinks_check_it_hashes(self):
        kw = self.upload("pipelined", verify_sha512=False)
        self.assertEqual(HASH, kw["expected_sha512"])
        self.assertTrue(kw["digest"])
        self.assertFalse(kw["until_done"])
