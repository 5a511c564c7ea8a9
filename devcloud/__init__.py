"""Real local clouds for functional tests, benchmarks and the demo.

``GlanceServer`` and ``KeystoneServer`` run the PyPI releases of Glance and
Keystone under uwsgi from a virtualenv of their own (made by
``tools/bootstrap-clouds.sh``; ``$DTN_CLOUDS_VENV`` overrides its place),
each in a directory of its own, on a free port of 127.0.0.1.
``ApiServer`` runs dtn-migrate-api under that uwsgi with the project's
own venv, registered in a ``KeystoneServer``'s catalog; ``personas()``
makes the users tests act as.  ``FaultProxy`` stands in front of a
server and can answer 503/429 or cut connections for a while.

Importing this package needs nothing beyond the standard library;
``client()`` and sessions need python-glanceclient and keystoneauth1 in
the calling venv.
"""

from devcloud._base import available
from devcloud.api import ApiServer
from devcloud.api import openstack_env
from devcloud.api import personas
from devcloud._base import clouds_venv
from devcloud._base import CloudsNotInstalled
from devcloud._base import DevcloudError
from devcloud._base import free_port
from devcloud._base import ImageFailed
from devcloud._base import ServerFailed
from devcloud.faultproxy import FaultProxy
from devcloud.glance import GlanceServer
from devcloud.glance import make_qcow2
from devcloud.glance import wait_image
from devcloud.glance import wait_import_end
from devcloud.keystone import KeystoneServer

__all__ = [
    "ApiServer", "available", "clouds_venv", "CloudsNotInstalled",
    "DevcloudError",
    "FaultProxy", "free_port", "GlanceServer", "ImageFailed",
    "KeystoneServer", "make_qcow2", "openstack_env", "personas",
    "ServerFailed", "wait_image", "wait_import_end",
]
