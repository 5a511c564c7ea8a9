"""Validation of migration requests."""

import uuid


from dtn_migrate.engine import requests
from dtn_migrate import exception

from tests.unit import testcase


class TestRequests(testcase.TestCase):
    def test_images_or_selector(self):
        self.assertEqual((["a", "b"], None),
                         requests.image_ids(["a", "b", "a"], None))
        ids, sel = requests.image_ids(None, {"tag": "dr"})
        self.assertIsNone(ids)
        self.assertEqual({"tag": "dr", "properties": None}, sel)
        for images, selector in ((None, None), (["a"], {"tag": "x"}),
                                 ([], None), ("a", None), ([1], None),
                                 (["a\nb"], None), (None, {}),
                                 (None, {"tag": ""}),
                                 (None, {"properties": {"k": 1}}),
                                 (None, {"owner": "x"}),
                                 (["x" * 65], None)):
            self.assertRaises(exception.InvalidInput, requests.image_ids,
                              images, selector)

    def test_options_defaults(self):
        opts = requests.options(None, "pipelined")
        self.assertEqual({"keep_id": False, "visibility": None,
                          "target_project": None, "verify": True,
                          "mode": "pipelined", "force": False,
                          "transfer_options": None, "protection": None},
                         opts)
        self.assertEqual("serial",
                         requests.options({"mode": "serial"},
                                          "pipelined")["mode"])

    def test_bad_options(self):
        for bad in ([], {"x": 1}, {"keep_id": "yes"}, {"verify": 1},
                    {"mode": "fast"}, {"visibility": "world"},
                    {"target_project": ""}, {"transfer_options": []},
                    {"keep_id": None, "force": 0}):
            self.assertRaises(exception.InvalidInput, requests.options, bad,
                              "pipelined")

    def test_peer_and_ids(self):
        self.assertEqual("dtn-b", requests.peer("dtn-b"))
        for bad in (None, "", 5, "x" * 256, "a\x00b"):
            self.assertRaises(exception.InvalidInput, requests.peer, bad)
        self.assertEqual("0" * 32, requests.uuid_hex("0" * 32, "id"))
        self.assertRaises(exception.InvalidInput, requests.uuid_hex,
                          "../../etc", "id")

    def test_protection(self):
        pid = uuid.uuid4()
        value = {"policy_id": str(pid), "name": "gold", "rpo_minutes": 15,
                 "selector": {"tags": ["gold"], "properties": {}}}
        # A dashed id comes out as the 32-hex id of policies.
        self.assertEqual(dict(value, policy_id=pid.hex),
                         requests.protection(value))
        self.assertEqual({"policy_id": pid.hex, "name": "gold",
                          "rpo_minutes": None, "selector": None},
                         requests.protection({"policy_id": pid.hex,
                                              "name": "gold"}))
        self.assertEqual("n" * 255, requests.protection(
            {"policy_id": pid.hex, "name": "n" * 255})["name"])
        # Validated with the other options.
        opts = requests.options({"protection": value}, "pipelined")
        self.assertEqual(pid.hex, opts["protection"]["policy_id"])
        self.assertIsNone(requests.options({"protection": None},
                                           "pipelined")["protection"])

    def test_bad_protection(self):
        good = {"policy_id": uuid.uuid4().hex, "name": "gold"}
        for bad in (None, [], "gold", {}, {"name": "gold"},
                    dict(good, policy_id="../x"), dict(good, policy_id=5),
                    dict(good, policy_id=None), dict(good, name=None),
                    dict(good, name=""), dict(good, name="n" * 256),
                    dict(good, name="a\nb"), dict(good, name=5),
                    dict(good, rpo_minutes=0), dict(good, rpo_minutes=-1),
                    dict(good, rpo_minutes=True), dict(good, rpo_minutes="5"),
                    dict(good, rpo_minutes=1.5), dict(good, selector=[]),
                    dict(good, selector="tags"),
                    dict(good, selector={"tags": ["x" * 20000]}),
                    dict(good, extra=1), dict(good, project_id="p1")):
            self.assertRaises(exception.InvalidInput, requests.protection,
                              bad)
        for bad in ([], "x", {"policy_id": "x", "name": "gold"}):
            self.assertRaises(exception.InvalidInput, requests.options,
                              {"protection": bad}, "pipelined")
