"""devcloud.glance: waiting for Glance's import to let go of an image."""

import unittest

import devcloud

from tests.unit import testcase


class FakeImages:
    """glanceclient's ``images`` manager: each ``get`` and each task
    listing answers the next of the given states (the last one stays).
    """

    def __init__(self, images, tasks):
        self.images, self.tasks = list(images), list(tasks)
        self.gets = 0

    def _next(self, seq):
        return seq.pop(0) if len(seq) > 1 else seq[0]

    def get(self, image_id):
        self.gets += 1
        return dict(self._next(self.images), id=image_id)

    def get_associated_image_tasks(self, image_id):
        return {"tasks": self._next(self.tasks)}


class FakeClient:
    def __init__(self, images, tasks):
        self.images = FakeImages(images, tasks)


ACTIVE = {"status": "active"}
LOCKED = {"status": "active", "os_glance_import_task": "t-1"}
PROCESSING = [{"id": "t-1", "status": "processing"}]
SUCCEEDED = [{"id": "t-1", "status": "success"}]


class WaitImportEndTest(testcase.TestCase):

    def test_waits_for_the_lock_then_the_task(self):
        client = FakeClient([LOCKED, LOCKED, ACTIVE, ACTIVE, ACTIVE],
                            [PROCESSING, SUCCEEDED])
        devcloud.wait_import_end(client, "img", timeout=30)
        # Two polls held by the lock, one by the task, then free.
        self.assertEqual(4, client.images.gets)

    def test_an_image_no_import_holds_is_free_at_once(self):
        client = FakeClient([ACTIVE], [SUCCEEDED])
        devcloud.wait_import_end(client, "img", timeout=30)
        self.assertEqual(1, client.images.gets)
        client = FakeClient([ACTIVE], [[]])
        devcloud.wait_import_end(client, "img", timeout=30)

    def test_says_what_still_holds_it_when_time_is_up(self):
        client = FakeClient([LOCKED], [SUCCEEDED])
        err = self.assertRaises(TimeoutError, devcloud.wait_import_end,
                                client, "img", timeout=0.3)
        self.assertIn("image img: the import lock of task t-1 still holds "
                      "it after 0.3s", str(err))
        client = FakeClient([ACTIVE], [PROCESSING + [
            {"id": "t-0", "status": "pending"},
            {"id": "t-9", "status": "failure"}]])
        err = self.assertRaises(TimeoutError, devcloud.wait_import_end,
                                client, "img", timeout=0.3)
        self.assertIn("task t-0, t-1 still holds", str(err))

    def assertRaises(self, exc, func, *args, **kwargs):
        with super().assertRaises(exc) as ctx:
            func(*args, **kwargs)
        return ctx.exception


if __name__ == "__main__":
    unittest.main()
