"""OpenStackClient plugin of dtn-migrate: the ``openstack dtn`` commands.

Registered through the ``openstack.cli.extension`` entry point ``dtn``;
the commands are in the ``openstack.dtn.v1`` group.  The endpoint is the
catalog's ``dtn-migration`` one for the session's interface and region,
unless overridden with ``--os-dtn-endpoint`` (``OS_DTN_ENDPOINT``, or
``dtn_migration_endpoint_override`` in clouds.yaml), or given with
``--os-endpoint`` under the ``none``/``admin_token`` auth types.
"""

import logging

from keystoneauth1 import exceptions as ksa_exc
from osc_lib import exceptions
from osc_lib import utils

from dtn_migrate.client import client as dtn_client

LOG = logging.getLogger(__name__)

API_NAME = "dtn"
API_VERSION_OPTION = "os_dtn_api_version"
DEFAULT_API_VERSION = "1"
API_VERSIONS = {"1": "dtn_migrate.client.client.Client"}
SERVICE_TYPE = dtn_client.SERVICE_TYPE


def make_client(instance):
    """The dtn-migration client of an osc-lib ClientManager."""
    version = instance._api_version.get(API_NAME) or DEFAULT_API_VERSION
    cls = utils.get_client_class(API_NAME, version, API_VERSIONS)
    try:
        endpoint = instance.get_endpoint_for_service_type(
            SERVICE_TYPE, region_name=instance.region_name,
            interface=instance.interface)
    except ksa_exc.EndpointNotFound:
        endpoint = None
    if not endpoint:
        raise exceptions.EndpointNotFound(
            "No %s endpoint in the service catalog for interface %s and "
            "region %s; give one with --os-dtn-endpoint"
            % (SERVICE_TYPE, instance.interface or "public",
               instance.region_name or "(any)"))
    LOG.debug("dtn-migration API %s at %s", version, endpoint)
    return cls(session=instance.session, endpoint_override=endpoint,
               interface=instance.interface,
               region_name=instance.region_name)


def build_option_parser(parser):
    """The plugin's global options."""
    parser.add_argument(
        "--os-dtn-api-version",
        metavar="<dtn-api-version>",
        default=utils.env("OS_DTN_API_VERSION"),
        help="dtn-migration API version, default=%s "
             "(Env: OS_DTN_API_VERSION)" % DEFAULT_API_VERSION)
    # openstack.config reads this dest as the dtn-migration service's
    # endpoint_override, which osc-lib's endpoint lookup honours.
    parser.add_argument(
        "--os-dtn-endpoint",
        metavar="<url>",
        dest="os_dtn_migration_endpoint_override",
        default=utils.env("OS_DTN_ENDPOINT"),
        help="dtn-migration API URL instead of the catalog's "
             "(Env: OS_DTN_ENDPOINT)")
    return parser


def check_api_version(check_version):
    """True for a supported version; otherwise False, and the
    openstack shell warns that it is not supported (other services'
    commands keep working).
    """
    return str(check_version) in API_VERSIONS
