"""dtn_migrate.engine.protection.selectors: checking and matching."""


from dtn_migrate.engine.protection import selectors
from dtn_migrate import exception

from tests.unit import testcase


def image(**fields):
    out = {"id": "11111111-2222-3333-4444-555555555555", "owner": "p1",
           "name": "web-01", "visibility": "private", "tags": [],
           "status": "active"}
    out.update(fields)
    return out


class TestCheck(testcase.TestCase):
    def invalid(self, selector, *words):
        exc = self.assertRaises(exception.InvalidInput, selectors.check,
                                selector)
        for word in words:
            self.assertIn(word, str(exc))
        return exc

    def test_normalized(self):
        self.assertEqual(
            {"tags": ["gold", "db"], "properties": {"os_distro": "ubuntu"},
             "visibility": ["public", "shared"], "name_pattern": "web-*",
             "projects": ["p1", "p2"]},
            selectors.check({"tags": ["gold", "db", "gold"],
                             "properties": {"os_distro": "ubuntu"},
                             "visibility": ["public", "shared", "public"],
                             "name_pattern": "web-*",
                             "projects": ["p1", "p2", "p1"]}))

    def test_every_key_present(self):
        self.assertEqual(
            {"tags": ["gold"], "properties": {}, "visibility": [],
             "name_pattern": None, "projects": []},
            selectors.check({"tags": ["gold"]}))

    def test_one_narrowing_key_is_enough(self):
        for selector in ({"tags": ["t"]}, {"properties": {"k": "v"}},
                         {"visibility": ["public"]},
                         {"name_pattern": "*"}):
            selectors.check(selector)

    def test_needs_a_narrowing_key(self):
        for selector in ({}, {"projects": ["p1"]}, {"tags": []},
                         {"properties": {}, "name_pattern": None}):
            self.invalid(selector, "at least one of")

    def test_not_a_mapping(self):
        for selector in (None, ["tags"], "tags=gold", 1):
            self.invalid(selector, "mapping")

    def test_unknown_keys(self):
        self.invalid({"tags": ["t"], "tag": "t", "owner": "p"},
                     "unknown keys: owner, tag")

    def test_bad_tags(self):
        self.invalid({"tags": "gold"}, "selector tag")
        self.invalid({"tags": [""]}, "selector tag")
        self.invalid({"tags": [1]}, "selector tag")
        self.invalid({"tags": ["a\nb"]}, "selector tag")
        self.invalid({"tags": ["a\x7fb"]}, "selector tag")
        self.invalid({"tags": ["x" * 256]}, "255")
        self.invalid({"tags": ["t%d" % i for i in range(101)]}, "100")
        selectors.check({"tags": ["x" * 255]})
        selectors.check({"tags": ["t%d" % i for i in range(100)]})

    def test_bad_properties(self):
        self.invalid({"properties": [["k", "v"]]}, "properties")
        self.invalid({"properties": {"k": 1}}, "property value")
        self.invalid({"properties": {"k": ""}}, "property value")
        self.invalid({"properties": {"": "v"}}, "property name")
        self.invalid({"properties": {"k%d" % i: "v" for i in range(101)}},
                     "100")

    def test_bad_visibility(self):
        self.invalid({"visibility": ["hidden"]}, "'hidden'", "public")
        self.invalid({"visibility": "public"}, "visibility")

    def test_bad_name_pattern(self):
        self.invalid({"name_pattern": ""}, "name_pattern")
        self.invalid({"name_pattern": 5}, "name_pattern")
        self.invalid({"name_pattern": "x" * 256}, "name_pattern")

    def test_bad_projects(self):
        self.invalid({"tags": ["t"], "projects": "p1"}, "selector project")
        self.invalid({"tags": ["t"], "projects": ["p" * 65]}, "64")


class TestMatches(testcase.TestCase):
    def test_owner_scoping(self):
        selector = selectors.check({"tags": ["gold"]})
        self.assertTrue(selectors.matches(
            selector, "p1", image(tags=["gold"])))
        # Another project's image, even public, is not the policy's.
        self.assertFalse(selectors.matches(
            selector, "p2", image(tags=["gold"], visibility="public")))
        self.assertFalse(selectors.matches(
            selector, "p1", image(tags=["gold"], owner=None)))

    def test_projects_any(self):
        selector = selectors.check({"tags": ["gold"],
                                    "projects": ["p2", "p3"]})
        self.assertTrue(selectors.matches(
            selector, "admin", image(owner="p3", tags=["gold"])))
        # The policy's own project is not implied.
        self.assertFalse(selectors.matches(
            selector, "p1", image(owner="p1", tags=["gold"])))

    def test_tags_all(self):
        selector = selectors.check({"tags": ["gold", "db"]})
        self.assertTrue(selectors.matches(
            selector, "p1", image(tags=["x", "db", "gold"])))
        self.assertFalse(selectors.matches(
            selector, "p1", image(tags=["gold"])))
        self.assertFalse(selectors.matches(selector, "p1", image(tags=None)))

    def test_properties_exact(self):
        selector = selectors.check({"properties": {"os_distro": "ubuntu",
                                                   "tier": "1"}})
        self.assertTrue(selectors.matches(
            selector, "p1", image(os_distro="ubuntu", tier="1")))
        self.assertFalse(selectors.matches(
            selector, "p1", image(os_distro="ubuntu", tier="2")))
        self.assertFalse(selectors.matches(
            selector, "p1", image(os_distro="ubuntu")))

    def test_visibility_any(self):
        selector = selectors.check({"visibility": ["public", "shared"]})
        self.assertTrue(selectors.matches(
            selector, "p1", image(visibility="shared")))
        self.assertTrue(selectors.matches(
            selector, "p1", image(visibility="public")))
        self.assertFalse(selectors.matches(
            selector, "p1", image(visibility="private")))

    def test_name_glob_case_sensitive(self):
        selector = selectors.check({"name_pattern": "web-*"})
        self.assertTrue(selectors.matches(selector, "p1",
                                          image(name="web-01")))
        self.assertFalse(selectors.matches(selector, "p1",
                                           image(name="WEB-01")))
        self.assertFalse(selectors.matches(selector, "p1",
                                           image(name="db-web-01")))
        self.assertFalse(selectors.matches(selector, "p1", image(name=None)))
        selector = selectors.check({"name_pattern": "db-[0-9]?"})
        self.assertTrue(selectors.matches(selector, "p1",
                                          image(name="db-1x")))
        self.assertFalse(selectors.matches(selector, "p1",
                                           image(name="db-xx")))

    def test_every_key_must_match(self):
        selector = selectors.check({"tags": ["gold"], "name_pattern": "w*",
                                    "visibility": ["private"]})
        self.assertTrue(selectors.matches(
            selector, "p1", image(tags=["gold"])))
        self.assertFalse(selectors.matches(
            selector, "p1", image(tags=["gold"], name="db")))
        self.assertFalse(selectors.matches(
            selector, "p1", image(tags=["gold"], visibility="public")))
        self.assertFalse(selectors.matches(selector, "p1", image()))

    def test_glance_query(self):
        self.assertEqual(
            (["a", "b"], {"k": "v"}),
            selectors.glance_query(selectors.check(
                {"tags": ["a", "b"], "properties": {"k": "v"}})))
        self.assertEqual(([], {}), selectors.glance_query(
            selectors.check({"name_pattern": "*"})))
