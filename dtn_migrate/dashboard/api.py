"""Per-request access to the dtn-migration API for the dashboard.

Each request gets its own :class:`dtn_migrate.client.Client`, built on a
keystoneauth1 session that carries the logged-in user's token; the
endpoint is the catalog's ``dtn-migration`` service as Horizon sees it
(region and interface from the user's session and settings).  The
wrappers return :class:`Migration`, :class:`Peer`, :class:`Policy`,
:class:`PolicyImage` and :class:`Drill` objects, which answer both
attribute and item access.
"""

from django.conf import settings
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
from openstack_dashboard.api import base

from dtn_migrate import client as dtn_client

SERVICE_TYPE = dtn_client.SERVICE_TYPE
#: Seconds before a request to the API gives up.
TIMEOUT = 30
_CACHE_ATTR = "_dtn_migrate_client"


class Migration(base.APIDictWrapper):
    """A migration record of the API."""

    @property
    def name(self):
        return self._apidict.get("image_name") or \
            self._apidict.get("image_id") or self._apidict.get("id")


class Peer(base.APIDictWrapper):
    """A peer DTN and its health."""

    @property
    def id(self):
        return self._apidict.get("name")


def _verify():
    if getattr(settings, "OPENSTACK_SSL_NO_VERIFY", False):
        return False
    return getattr(settings, "OPENSTACK_SSL_CACERT", None) or True


def endpoint(request):
    """The dtn-migration URL of the request's catalog.

    Raises horizon's ServiceCatalogException when there is none.
    """
    return base.url_for(request, SERVICE_TYPE)


def dtnclient(request):
    """The API client of this request (built once per request)."""
    cached = getattr(request, _CACHE_ATTR, None)
    if cached is not None:
        return cached
    url = endpoint(request)
    auth = token_endpoint.Token(url, request.user.token.id)
    sess = ks_session.Session(auth=auth, verify=_verify(), timeout=TIMEOUT)
    client = dtn_client.Client(sess, endpoint_override=url,
                               user_agent="dtn-migrate-dashboard")
    try:
        setattr(request, _CACHE_ATTR, client)
    except AttributeError:
        pass
    return client


def is_enabled(request):
    """True when the catalog has a dtn-migration endpoint."""
    return base.is_service_enabled(request, SERVICE_TYPE)


def migration_list(request, all_projects=False, **filters):
    """Migrations, newest first; filters as the client's ``list``."""
    filters = {k: v for k, v in filters.items() if v not in (None, "")}
    items = dtnclient(request).migrations.list(all_projects=all_projects,
                                               **filters)
    return [Migration(m) for m in items]


def migration_get(request, migration_id):
    """One migration with its ``events``."""
    return Migration(dtnclient(request).migrations.get(migration_id))


def migration_create(request, peer, images=None, tag=None, options=None):
    """Start migrations; returns the list of new Migration records."""
    body = dtnclient(request).migrations.create(
        peer, images=images, tag=tag, options=options)
    return [Migration(m) for m in (body or {}).get("migrations") or ()]


def migration_cancel(request, migration_id):
    return Migration(dtnclient(request).migrations.cancel(migration_id))


def migration_retry(request, migration_id):
    return Migration(dtnclient(request).migrations.retry(migration_id))


def peer_list(request):
    """Every peer of this cloud with its health."""
    return [Peer(p) for p in dtnclient(request).peers.list()]


def peer_get(request, name):
    return Peer(dtnclient(request).peers.get(name))


# Protection policies and their drills.

class Policy(base.APIDictWrapper):
    """A protection policy, with its ``rpo`` and image ``images``
    counts flattened for the tables.
    """

    def _rpo(self):
        return self._apidict.get("rpo") or {}

    def _count(self, *states):
        counts = self._apidict.get("images") or {}
        return sum(int(counts.get(s) or 0) for s in states)

    @property
    def rpo_state(self):
        return self._rpo().get("state")

    @property
    def rpo_seconds(self):
        return self._rpo().get("seconds")

    @property
    def rpo_target(self):
        return self._rpo().get("target_minutes")

    @property
    def replicated(self):
        return self._count("replicated")

    @property
    def pending(self):
        """Images waiting for their replica: pending and syncing."""
        return self._count("pending", "syncing")

    @property
    def failed(self):
        return self._count("failed")


class PolicyImage(base.APIDictWrapper):
    """An image a policy protects (one row of ``/images``)."""

    @property
    def id(self):
        return self._apidict.get("image_id")

    @property
    def name(self):
        return self._apidict.get("image_name") or \
            self._apidict.get("image_id")


class Drill(base.APIDictWrapper):
    """A drill of a policy, in the cloud holding its replicas."""


def policy_list(request, all_projects=False, **filters):
    """Policies, newest first; filters as the client's ``list``."""
    filters = {k: v for k, v in filters.items() if v not in (None, "")}
    items = dtnclient(request).policies.list(all_projects=all_projects,
                                             **filters)
    return [Policy(p) for p in items]


def policy_get(request, policy_id):
    return Policy(dtnclient(request).policies.get(policy_id))


def policy_create(request, **fields):
    """Create a policy (the client's fields); returns it."""
    return Policy(dtnclient(request).policies.create(**fields))


def policy_delete(request, policy_id):
    dtnclient(request).policies.delete(policy_id)


def policy_sync(request, policy_id):
    """Replicate now; returns (the Policy, [Migration started or
    found]).
    """
    body = dtnclient(request).policies.sync(policy_id) or {}
    return (Policy(body.get("policy") or {"id": policy_id}),
            [Migration(m) for m in body.get("migrations") or ()])


def policy_images(request, policy_id, **filters):
    """The images the policy protects, oldest first."""
    filters = {k: v for k, v in filters.items() if v not in (None, "")}
    return [PolicyImage(i) for i in
            dtnclient(request).policies.images(policy_id, **filters)]


def drill_list(request, policy_id=None, all_projects=False):
    """Drills, newest first (of one policy when ``policy_id``)."""
    return [Drill(d) for d in dtnclient(request).drills.list(
        policy_id=policy_id, all_projects=all_projects)]


def drill_get(request, drill_id):
    return Drill(dtnclient(request).drills.get(drill_id))


def drill_start(request, policy_id, clone=False):
    """Start a drill of the policy; returns it (running)."""
    return Drill(dtnclient(request).drills.start(policy_id, clone=clone))
