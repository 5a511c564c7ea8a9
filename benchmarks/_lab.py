"""The lab the benchmarks run in, from where it lives.

Network namespaces joined by a rate-limited veth (``netns``) and a real
nfs-ganesha server (``ganesha``) are the functional tests' lab; the
benchmarks import them from here only, so that a move of the lab is one
change here (the clouds' parts are in :mod:`benchmarks._clouds`)::

    from benchmarks._lab import netns
"""

from devcloud import ganesha  # noqa: F401
from devcloud import netns  # noqa: F401
