"""Python client of the dtn-migration REST API (service type
``dtn-migration``), shared by the ``openstack dtn`` commands and the
dashboard.  No OpenStackClient imports here.
"""

from dtn_migrate.client.client import Client  # noqa: F401
from dtn_migrate.client.client import SERVICE_TYPE  # noqa: F401
