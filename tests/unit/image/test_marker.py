"""The import marker and its seal: which images an import made."""

import logging

import fixtures

from dtn_migrate.image import marker
from tests.unit.engine import fakes
from tests.unit import testcase

KEY = b"k" * 32
TID = "2" * 32


class TestSeal(testcase.TestCase):
    def test_binds_image_transfer_peer_owner_and_key(self):
        base = marker.seal(KEY, "i", TID, "west", "p1")
        self.assertEqual(base, marker.seal(KEY, "i", TID, "west", "p1"))
        for other in (marker.seal(KEY, "j", TID, "west", "p1"),
                      marker.seal(KEY, "i", "3" * 32, "west", "p1"),
                      marker.seal(KEY, "i", TID, "east", "p1"),
                      marker.seal(KEY, "i", TID, "west", "p2"),
                      marker.seal(KEY, "i", TID, "west", None),
                      marker.seal(b"x" * 32, "i", TID, "west", "p1")):
            self.assertNotEqual(base, other)

    def test_properties(self):
        props = marker.properties(KEY, "i", TID, "west", "p1")
        self.assertEqual(set(marker.PROPERTIES), set(props))
        self.assertEqual(TID, props[marker.MARKER])


class TestGenuine(testcase.TestCase):
    def image(self, owner="p1", **fields):
        image = dict(marker.properties(KEY, "i", TID, "west", owner),
                     id="i", owner=owner)
        image.update(fields)
        return image

    def test_genuine(self):
        self.assertTrue(marker.genuine(KEY, self.image(), TID, "west",
                                       "p1"))
        # Into the service's own project, which it may not know.
        own = self.image(owner=None)
        own["owner"] = "svc"
        self.assertTrue(marker.genuine(KEY, own, TID, "west", None, "svc"))
        self.assertTrue(marker.genuine(KEY, own, TID, "west", None))

    def test_anything_else_is_not(self):
        for image, args in (
                (self.image(), (TID, "west", "p2")),      # another owner
                (self.image(owner="p2"), (TID, "west", "p1")),
                (self.image(), (TID, "east", "p1")),      # another peer
                (self.image(), ("3" * 32, "west", "p1")),
                (self.image(id="j"), (TID, "west", "p1")),  # copied
                (self.image(**{marker.SEAL: None}), (TID, "west", "p1")),
                (self.image(**{marker.SEAL: "00"}), (TID, "west", "p1"))):
            self.assertFalse(marker.genuine(KEY, image, *args), image)
        own = self.image(owner=None)
        own["owner"] = "other"
        self.assertFalse(marker.genuine(KEY, own, TID, "west", None, "svc"))


class TestFind(testcase.TestCase):
    def test_only_genuine_ones_and_each_other_logged(self):
        log = self.useFixture(fixtures.FakeLogger(level=logging.WARNING))
        images = fakes.FakeImages("b")
        real = fakes.add_imported(images, KEY, TID, "west", "p1")
        own = fakes.add_imported(images, KEY, TID, "west")
        planted = images.add(b"x", owner="p1", **{marker.MARKER: TID})
        elsewhere = images.add(b"x", owner="p2", **{marker.MARKER: TID})
        self.assertEqual([real["id"]], [i["id"] for i in marker.find(
            images, KEY, TID, "west", "p1")])
        self.assertEqual([own["id"]], [i["id"] for i in marker.find(
            images, KEY, TID, "west", None)])
        self.assertEqual([], marker.find(images, KEY, TID, "east", "p1"))
        self.assertIn("image %s carries the marker of transfer %s"
                      % (planted["id"], TID), log.output)
        # Glance is asked for the project's images only.
        self.assertNotIn(elsewhere["id"], log.output)
