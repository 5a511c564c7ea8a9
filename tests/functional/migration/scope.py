"""Clouds shared by a whole test class.

:class:`ClassScope` is :class:`devcloud.pair.Scope` (what the two-cloud
harness asks of a test case, for servers that outlive each test;
``close()`` in ``tearDownClass`` removes them) whose ``skipTest`` skips
the class, as a test's would (:func:`tests.functional.base.check_skip`).

:meth:`ClassScope.opened` is the ``setUpClass`` of such a class.
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

    @classmethod
    def opened(cls, prefix, checks, start):
        """A scope for a class, its servers up: the class is skipped when
        one of ``checks`` (``(ok, why)`` pairs) is not ok; ``start(scope)``
        then brings the servers up.  The scope is closed if either
        fails.
        """
        scope = cls(prefix)
        try:
            for ok, why in checks:
                if not ok:
                    scope.skipTest(why)
            start(scope)
        except BaseException:
            scope.close()
            raise
        return scope
