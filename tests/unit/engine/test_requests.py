"""Validation of migration requests."""

import testtools

from dtn_migrate.engine import requests
from dtn_migrate import exception


class TestRequests(testtools.TestCase):
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
                          "transfer_options": None}, opts)
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
