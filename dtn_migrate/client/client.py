"""The dtn-migration API client: a keystoneauth1 session and the catalog.

::

    from keystoneauth1 import session
    from dtn_migrate import client

    dtn = client.Client(session.Session(auth=auth), interface="public",
                        region_name="RegionOne")
    req = dtn.migrations.create("cloud-b", images=[image_id])
    policy = dtn.policies.create(name="gold", peer="cloud-b",
                                 selector={"tags": ["gold"]})
    done = dtn.migrations.wait([m["id"] for m in req["migrations"]])

The endpoint comes from the service catalog (service type
``dtn-migration``) unless ``endpoint_override`` is given.  Either may be
the service root or its ``/v1`` URL.  Resources are returned as the
API's JSON objects (dicts); errors raise
:class:`dtn_migrate.client.exceptions.ClientException`.
"""

import re

from keystoneauth1 import adapter
from keystoneauth1 import exceptions as ksa_exc

from dtn_migrate.client import drills
from dtn_migrate.client import exceptions
from dtn_migrate.client import migrations
from dtn_migrate.client import peers
from dtn_migrate.client import protection_policies
from dtn_migrate.client import replicas

SERVICE_TYPE = "dtn-migration"
API_VERSION = "1"
_VERSIONED = re.compile(r"/v\d+(\.\d+)?$")


class Client:
    """A client of the dtn-migration API, version 1.

    :param session: a keystoneauth1 Session (its auth plugin gives the
        token and the catalog).
    :param endpoint_override: the API's URL, instead of the catalog's.
    :param interface: the catalog interface (public, internal, admin).
    :param region_name: the catalog region.
    :param service_type: the catalog service type.
    Further keyword arguments go to keystoneauth1's Adapter (e.g.
    ``connect_retries``, ``timeout``, ``user_agent``).
    """

    def __init__(self, session, endpoint_override=None, interface=None,
                 region_name=None, service_type=SERVICE_TYPE,
                 version=API_VERSION, **kwargs):
        if str(version) not in ("1", "1.0", "v1"):
            raise exceptions.ClientException(
                "Unsupported dtn-migration API version %s (supported: 1)"
                % version)
        kwargs.setdefault("user_agent", "dtn-migrate-client")
        self.adapter = adapter.Adapter(
            session, service_type=service_type, interface=interface,
            region_name=region_name, endpoint_override=endpoint_override,
            raise_exc=False, **kwargs)
        self._base = None
        self.migrations = migrations.MigrationManager(self)
        self.peers = peers.PeerManager(self)
        self.policies = protection_policies.PolicyManager(self)
        self.replicas = replicas.ReplicaManager(self)
        self.drills = drills.DrillManager(self)

    @property
    def endpoint(self):
        """The API's versioned URL, e.g. ``http://host:8779/v1``."""
        if self._base is None:
            try:
                url = self.adapter.get_endpoint()
            except ksa_exc.EndpointNotFound as exc:
                raise exceptions.EndpointNotFound(str(exc))
            except ksa_exc.ClientException as exc:
                raise _mapped(exc)
            if not url:
                raise exceptions.EndpointNotFound(
                    "No %s endpoint in the service catalog (interface %s, "
                    "region %s); give one with an endpoint override"
                    % (self.adapter.service_type,
                       self.adapter.interface or "public",
                       self.adapter.region_name or "any"))
            url = url.rstrip("/")
            if not _VERSIONED.search(url):
                url += "/v" + API_VERSION
            self._base = url
        return self._base

    def request(self, method, path, body=None, params=None):
        """The decoded JSON answer to ``method`` on ``path`` (relative to
        the versioned endpoint), or None when the answer has no body.
        """
        url = self.endpoint + path
        kwargs = {"headers": {"Accept": "application/json"}}
        if body is not None:
            kwargs["json"] = body
        if params:
            kwargs["params"] = params
        try:
            resp = self.adapter.request(url, method, **kwargs)
        except ksa_exc.ClientException as exc:
            raise _mapped(exc, method=method, url=url)
        if resp.status_code >= 400:
            raise exceptions.from_response(resp, method=method, url=url)
        if resp.status_code == 204 or not resp.content:
            return None
        try:
            return resp.json()
        except ValueError:
            raise exceptions.InvalidResponse(
                "%s %s answered %s with a body that is not JSON"
                % (method, url, resp.status_code),
                http_status=resp.status_code, method=method, url=url)

    def get(self, path, params=None):
        return self.request("GET", path, params=params)

    def post(self, path, body):
        return self.request("POST", path, body=body)

    def put(self, path, body):
        return self.request("PUT", path, body=body)

    def delete(self, path):
        return self.request("DELETE", path)


def _mapped(exc, method=None, url=None):
    """The client exception for a keystoneauth1 one."""
    message = getattr(exc, "message", None) or str(exc) or \
        exc.__class__.__name__
    if isinstance(exc, ksa_exc.EndpointNotFound):
        return exceptions.EndpointNotFound(message, method=method, url=url)
    if isinstance(exc, (ksa_exc.ConnectionError,
                        ksa_exc.DiscoveryFailure)):
        return exceptions.CommunicationError(message, method=method,
                                             url=url)
    if isinstance(exc, ksa_exc.HttpError):
        cls = exceptions._BY_STATUS.get(exc.http_status,
                                        exceptions.HttpError)
        return cls(message, http_status=exc.http_status,
                   request_id=getattr(exc, "request_id", None),
                   method=method, url=url)
    return exceptions.ClientException(message, method=method, url=url)
