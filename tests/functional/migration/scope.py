"""Clouds shared by a whole test class.

:class:`ClassScope` is :class:`devcloud.pair.Scope` (what the two-cloud
harness asks of a test case, for servers that outlive each test;
``close()`` in ``tearDownClass`` removes them) whose ``skipTest`` skips
the class, as a test's would (:func:`tests.functional.base.check_skip`).
"""

import testtools

from devcloud import pair
from tests.functional import base


class ClassScope(pair.Scope):
    """What the two-cloud harness asks of a test case, for a class."""

    @staticmethod
    def skipTest(reason):
        base.check_skip(reason)
        raise testtools.TestCase.skipException(reason)
