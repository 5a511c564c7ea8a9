"""The policies a cloud holds replicas for.

A source tells its peer, in each migration's descriptor, which policy the
migration serves.  The peer keeps a policy row of its own for it: the
same id, role ``replica``, mode ``manual`` and disabled (it replicates
nothing from here), its peer the source's DTN, its project the one that
owns the replicas here.  Drills, and later failover, address the policy
by that row on the cloud that holds the replicas.

What a peer says of its policy is checked as the API checks a policy
(``policies.check``: its name, RPO and selector), and a replica policy
belongs to the peer that made it: another peer naming its id is
refused, and its replicas are catalogued without a policy.
"""

from oslo_log import log as logging

from dtn_migrate.engine.protection import validation as policies_mod
from dtn_migrate import exception

LOG = logging.getLogger(__name__)

ROLE = "replica"
#: The role of a replica policy whose cloud failed over (failover.py).
FAILED_OVER = "failed-over"


def _checked(served, peer):
    """The columns ``served`` asks for (as ``policies.check`` makes them
    of an API request), or None, logged, when they are not valid.
    """
    try:
        out = policies_mod.check({
            "name": served.get("name"), "peer": peer, "mode": "manual",
            "rpo_minutes": served.get("rpo_minutes") or 60,
            "selector": served.get("selector")})
    except exception.InvalidInput as exc:
        LOG.warning("policy %s from %s: %s; its replicas are catalogued "
                    "without it", served.get("policy_id"), peer, exc)
        return None
    return {key: out[key] for key in ("rpo_minutes", "selector", "peer")}


def learn(db, served, peer, owner):
    """The id of the replica policy for ``served`` (the descriptor's
    ``protection``, or None) from source DTN ``peer``; made or updated
    as needed.  None when the migration serves no policy, or none this
    cloud takes from ``peer``.
    """
    if not served:
        return None
    policy_id = served["policy_id"]
    values = _checked(served, peer)
    if values is None:
        return None
    try:
        current = db.policy_get(policy_id)
    except exception.ProtectionPolicyNotFound:
        current = None
    if current is not None:
        if current.get("role") not in (ROLE, FAILED_OVER):
            # A policy of this cloud with that id: never taken over.
            LOG.warning("policy %s from %s has the id of a policy of this "
                        "cloud: its replicas are catalogued without it",
                        policy_id, peer)
            return None
        if current.get("peer") != peer:
            # Another peer's: never taken over either.
            LOG.warning("policy %s from %s is the replica policy of peer "
                        "%s here: its replicas are catalogued without it",
                        policy_id, peer, current.get("peer"))
            return None
        changes = {k: v for k, v in values.items() if current.get(k) != v}
        if changes:
            db.policy_update(policy_id, changes)
        return policy_id
    row = dict(values, id=policy_id, project_id=owner, mode="manual",
               enabled=False, role=ROLE, options={},
               description="replicas of %s's policy %s" % (peer,
                                                           served["name"]))
    made = create_named(db, row, served["name"], peer)
    if made is not None:
        LOG.info("replica policy %s (%s) of %s learnt", policy_id,
                 made["name"], peer)
        return policy_id
    try:
        again = db.policy_get(policy_id)
    except exception.ProtectionPolicyNotFound:
        again = None
    if again is not None and again.get("role") in (ROLE, FAILED_OVER) \
            and again.get("peer") == peer:
        return policy_id            # another import learnt it meanwhile
    LOG.warning("replica policy %s of %s: its names are taken in project "
                "%s; its replicas are catalogued without it", policy_id,
                peer, owner)
    return None


def create_named(db, row, name, peer):
    """Create policy ``row`` named ``name``, or ``name@peer`` when
    ``name`` is taken in its project; None when both are.
    """
    for candidate in (name[:255], _qualified(name, peer)):
        try:
            return db.policy_create(dict(row, name=candidate))
        except exception.ProtectionPolicyExists:
            continue
    return None


def _qualified(name, peer, limit=255):
    """``name@peer`` within ``limit`` characters: the name is shortened,
    never the suffix (which makes it differ from ``name``).
    """
    suffix = "@" + peer
    return (name[:max(1, limit - len(suffix))] + suffix)[:limit]
