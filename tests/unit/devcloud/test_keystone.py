"""KeystoneServer's identity helpers, against a recorded fake API."""

import fixtures

from devcloud import keystone

from tests.unit import testcase


class FakeApi:
    def __init__(self):
        self.calls = []
        self.users = {}

    def __call__(self, method, path, body=None, ok=(200, 201, 204)):
        self.calls.append((method, path))
        if method == "GET" and path.startswith("/users?"):
            name = path.split("name=")[1].split("&")[0]
            found = [{"id": self.users[name]}] if name in self.users else []
            return {"users": found}
        if method == "GET":
            kind = path.split("?")[0].strip("/")
            return {kind: [{"id": kind + "-id"}]}
        if method == "POST" and path == "/users":
            name = body["user"]["name"]
            self.users[name] = name + "-id"
            return {"user": {"id": self.users[name]}}
        return {}


class TestCreateUser(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.ks = keystone.KeystoneServer(
            self.useFixture(fixtures.TempDir()).path, port=1)
        self.api = FakeApi()
        self.ks._api = self.api

    def patches(self):
        return [c for c in self.api.calls if c[0] == "PATCH"]

    def test_same_password_again_is_not_set_again(self):
        # Keystone revokes a user's tokens when its password is set, so
        # a second Glance asking for the shared user must not set it.
        for _ in range(5):
            user = self.ks.create_user("devcloud-user", "pw")
        self.assertEqual("pw", user["password"])
        self.assertEqual([], self.patches())
        self.assertEqual(1, sum(1 for c in self.api.calls
                                if c == ("POST", "/users")))

    def test_a_new_password_is_set(self):
        self.ks.create_user("u", "one")
        self.ks.create_user("u", "two")
        self.assertEqual([("PATCH", "/users/u-id")], self.patches())

    def test_a_user_made_elsewhere_gets_its_password(self):
        self.api.users["old"] = "old-id"
        self.ks.create_user("old", "pw")
        self.assertEqual([("PATCH", "/users/old-id")], self.patches())
