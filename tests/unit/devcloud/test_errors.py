"""The dev clouds have one exception hierarchy (DevcloudError)."""

import inspect


import devcloud
from devcloud import _base
from devcloud import faultproxy
from devcloud import glance
from devcloud import identity
from devcloud import keystone

from tests.unit import testcase


class TestHierarchy(testcase.TestCase):

    def test_one_root(self):
        found = []
        for module in (_base, faultproxy, glance, identity, keystone):
            for name, obj in vars(module).items():
                if inspect.isclass(obj) and issubclass(obj, BaseException) \
                        and obj.__module__ == module.__name__:
                    found.append(obj)
                    self.assertTrue(issubclass(obj, devcloud.DevcloudError),
                                    name)
        self.assertGreaterEqual(len(found), 4)
        # Callers that catch RuntimeError keep working.
        self.assertTrue(issubclass(devcloud.ImageFailed, RuntimeError))
