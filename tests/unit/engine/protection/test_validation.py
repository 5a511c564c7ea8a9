"""dtn_migrate.engine.protection.validation: the fields of a policy."""

import datetime


from dtn_migrate.engine.protection import validation
from dtn_migrate import exception

from tests.unit import testcase

SELECTOR = {"tags": ["gold"]}


def create(**values):
    values.setdefault("name", "gold")
    values.setdefault("peer", "dtn-b")
    values.setdefault("selector", SELECTOR)
    return values


def current(**values):
    row = {"id": "a" * 32, "name": "gold", "peer": "dtn-b",
           "mode": "continuous", "schedule": None, "rpo_minutes": 60,
           "selector": {"tags": ["gold"]}, "enabled": True,
           "project_id": "p1", "options": dict(validation.DEFAULT_OPTIONS)}
    row.update(values)
    return row


class TestCreate(testcase.TestCase):
    def invalid(self, values, *words, **kwargs):
        exc = self.assertRaises(exception.InvalidInput, validation.check,
                                values, **kwargs)
        for word in words:
            self.assertIn(word, str(exc))
        return exc

    def test_defaults(self):
        self.assertEqual(
            {"name": "gold", "peer": "dtn-b", "mode": "continuous",
             "rpo_minutes": 60, "enabled": True,
             "selector": {"tags": ["gold"], "properties": {},
                          "visibility": [], "name_pattern": None,
                          "projects": []},
             "options": {"keep_id": False, "target_project": None,
                         "deletion": "keep",
                         "deletion_grace_minutes": 60}},
            validation.check(create()))

    def test_default_rpo_from_caller(self):
        self.assertEqual(15, validation.check(create(), default_rpo=15)
                         ["rpo_minutes"])
        self.assertEqual(5, validation.check(create(rpo_minutes=5),
                                             default_rpo=15)["rpo_minutes"])

    def test_every_field(self):
        row = validation.check(create(
            description="the gold images", mode="scheduled",
            schedule="0 2 * * *", rpo_minutes=1440, enabled=False,
            options={"keep_id": True, "target_project": "p9",
                     "deletion": "mirror", "deletion_grace_minutes": 0},
            project_id="p1"))
        self.assertEqual("the gold images", row["description"])
        self.assertEqual("scheduled", row["mode"])
        self.assertEqual("0 2 * * *", row["schedule"])
        self.assertEqual(1440, row["rpo_minutes"])
        self.assertIs(False, row["enabled"])
        self.assertEqual({"keep_id": True, "target_project": "p9",
                          "deletion": "mirror",
                          "deletion_grace_minutes": 0}, row["options"])
        self.assertEqual("p1", row["project_id"])

    def test_needs_name_peer_and_selector(self):
        for key in ("name", "peer", "selector"):
            values = create()
            del values[key]
            self.invalid(values, "needs a %s" % key)

    def test_not_a_mapping(self):
        self.invalid(None, "mapping")
        self.invalid([("name", "gold")], "mapping")

    def test_unknown_fields(self):
        self.invalid(create(role="secondary", id="x"),
                     "unknown policy fields: id, role")

    def test_bad_texts(self):
        self.invalid(create(name=""), "name")
        self.invalid(create(name="x" * 256), "name")
        self.invalid(create(peer=None), "peer")
        self.invalid(create(peer="a\tb"), "peer")
        self.invalid(create(description="x" * 1025), "description")
        self.invalid(create(description=3), "description")
        self.invalid(create(project_id="p" * 65), "project_id")
        self.assertIsNone(validation.check(create(description=None))
                          ["description"])

    def test_bad_selector(self):
        self.invalid(create(selector={}), "at least one of")
        self.invalid(create(selector={"projects": ["p2"]}), "at least one")

    def test_bad_mode(self):
        self.invalid(create(mode="hourly"), "mode must be one of")

    def test_rpo_bounds(self):
        for value in (1, 525600):
            self.assertEqual(value, validation.check(
                create(rpo_minutes=value))["rpo_minutes"])
        for value in (0, -1, 525601, 1.5, "60", True, None):
            self.invalid(create(rpo_minutes=value), "rpo_minutes")

    def test_bools(self):
        for value in ("true", 1, None):
            self.invalid(create(enabled=value), "enabled")
            self.invalid(create(options={"keep_id": value}), "keep_id")

    def test_scheduled_needs_a_schedule(self):
        self.invalid(create(mode="scheduled"), "needs a schedule")
        self.invalid(create(mode="scheduled", schedule=None),
                     "needs a schedule")

    def test_schedule_only_when_scheduled(self):
        for mode in ("continuous", "manual"):
            self.invalid(create(mode=mode, schedule="0 * * * *"),
                         "only a scheduled policy")
        # Without a mode: continuous.
        self.invalid(create(schedule="0 * * * *"), "only a scheduled")
        # An explicit null schedule is no schedule.
        self.assertNotIn("schedule", validation.check(create(schedule=None)))

    def test_bad_cron(self):
        for schedule in ("61 * * * *", "* * * *", "0 0 * * * *",
                         "every day", "@daily", "", 5, "x" * 256):
            self.invalid(create(mode="scheduled", schedule=schedule),
                         "cron expression")
        for schedule in ("*/15 * * * *", "0 2 * * 1-5", "30 4 1 */2 *"):
            self.assertEqual(schedule, validation.check(create(
                mode="scheduled", schedule=schedule))["schedule"])

    def test_options(self):
        self.invalid(create(options="keep_id"), "options must be a mapping")
        self.invalid(create(options={"keep": True}), "unknown options: keep")
        self.invalid(create(options={"deletion": "purge"}), "keep, mirror")
        self.invalid(create(options={"deletion_grace_minutes": -1}),
                     "deletion_grace_minutes")
        self.invalid(create(options={"deletion_grace_minutes": 525601}),
                     "deletion_grace_minutes")
        self.invalid(create(options={"deletion_grace_minutes": "5"}),
                     "deletion_grace_minutes")
        self.invalid(create(options={"target_project": ""}),
                     "target_project")
        self.invalid(create(options={"target_project": "p" * 65}),
                     "target_project")
        self.assertEqual(
            {"keep_id": False, "target_project": None, "deletion": "keep",
             "deletion_grace_minutes": 60},
            validation.check(create(options={"target_project": None}))
            ["options"])


class TestUpdate(testcase.TestCase):
    def invalid(self, values, row=None, *words):
        exc = self.assertRaises(exception.InvalidInput, validation.check,
                                values, current=row or current())
        for word in words:
            self.assertIn(word, str(exc))
        return exc

    def test_only_what_changes(self):
        self.assertEqual({"rpo_minutes": 30},
                         validation.check({"rpo_minutes": 30},
                                          current=current()))
        self.assertEqual({"enabled": False},
                         validation.check({"enabled": False},
                                          current=current()))

    def test_nothing_to_change(self):
        self.invalid({}, None, "at least one field")

    def test_project_cannot_change(self):
        self.invalid({"project_id": "p2"}, None, "project cannot change")
        self.invalid({"project_id": "p1", "name": "x"}, None,
                     "project cannot change")

    def test_options_replace_the_current_ones(self):
        # As the API documents PUT: given options replace the policy's
        # (openstack dtn policy set merges before it sends).
        row = current(options={"keep_id": True, "target_project": "p9",
                               "deletion": "keep",
                               "deletion_grace_minutes": 60})
        self.assertEqual(
            {"options": {"keep_id": False, "target_project": None,
                         "deletion": "mirror",
                         "deletion_grace_minutes": 60}},
            validation.check({"options": {"deletion": "mirror"}},
                             current=row))

    def test_to_scheduled(self):
        self.invalid({"mode": "scheduled"}, None, "needs a schedule")
        self.assertEqual(
            {"mode": "scheduled", "schedule": "0 * * * *"},
            validation.check({"mode": "scheduled", "schedule": "0 * * * *"},
                             current=current()))

    def test_schedule_of_a_scheduled_policy(self):
        row = current(mode="scheduled", schedule="0 * * * *")
        self.assertEqual({"schedule": "5 * * * *"},
                         validation.check({"schedule": "5 * * * *"},
                                          current=row))
        self.invalid({"schedule": "5 * *"}, row, "cron")
        self.invalid({"schedule": None}, row, "needs a schedule")
        # Another field keeps the current schedule (checked again).
        self.assertEqual({"rpo_minutes": 5, "schedule": "0 * * * *"},
                         validation.check({"rpo_minutes": 5}, current=row))

    def test_no_longer_scheduled_drops_the_schedule(self):
        row = current(mode="scheduled", schedule="0 * * * *")
        self.assertEqual({"mode": "continuous", "schedule": None},
                         validation.check({"mode": "continuous"}, current=row))
        self.invalid({"mode": "manual", "schedule": "0 * * * *"}, row,
                     "only a scheduled policy")

    def test_schedule_of_a_continuous_policy(self):
        self.invalid({"schedule": "0 * * * *"}, None,
                     "only a scheduled policy")

    def test_rpo_bounds(self):
        for value in (0, 525601, False):
            self.invalid({"rpo_minutes": value}, None, "rpo_minutes")


class TestNextRun(testcase.TestCase):
    def test_next_run(self):
        after = datetime.datetime(2026, 1, 1, 10, 20)
        self.assertEqual(datetime.datetime(2026, 1, 1, 10, 30),
                         validation.next_run("*/15 * * * *", after))
        self.assertEqual(datetime.datetime(2026, 1, 2, 2, 0),
                         validation.next_run("0 2 * * *", after))
