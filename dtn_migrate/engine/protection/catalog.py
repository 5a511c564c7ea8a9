"""The replica catalog: per peer, which image holds the copy of which.

Both sides keep it.  The source records an ``outgoing`` replica when a
migration completes with the peer's verified hash; the peer records an
``incoming`` one when its import completes, so that it knows what it
holds for whom (drills and failback start from it).  A replica whose
hash already matches the source's is not sent again.

A row belongs to what owns the replica: the policy it serves, or the
project whose migration made it (no policy).  A project that migrates
an image another project's policy protects (a public image, say) gets
a row of its own: the policy's row, its replica and its peer image,
stay as they are.
"""

from oslo_log import log as logging
from oslo_utils import timeutils

LOG = logging.getLogger(__name__)

OUTGOING = "outgoing"
INCOMING = "incoming"
CURRENT = "current"
DELETED = "deleted"
HASH_ALGO = "sha512"


def current(db, policy, image):
    """The catalog row saying that ``policy``'s peer holds the bytes of
    ``image`` (Glance's dict) for it, verified: nothing to send.  None
    otherwise.

    Either ``image`` was replicated to the peer for ``policy`` (its
    outgoing row, with the image's hash), or ``image`` is itself the
    replica of an image of the peer with the same hash (an incoming
    row): sending it would only bounce it back to where it came from.
    """
    digest = image.get("os_hash_value")
    if not digest:
        return None
    peer = policy["peer"]
    found = [db.replica_get(OUTGOING, peer, image["id"],
                            policy_id=policy["id"])]
    found += db.replica_get_all(filters={
        "direction": INCOMING, "peer": peer,
        "replica_image_id": image["id"], "state": CURRENT})
    for replica in found:
        if replica is not None and replica.get("state") == CURRENT and \
                replica.get("hash_value") == digest:
            return replica
    return None


def record(db, migration, policy_id=None, owner=None):
    """Record the replica a complete ``migration`` (an engine record)
    made, as ``policy_id``'s (None: the migration's project's, or
    ``owner``'s on the receiving side); returns the catalog row, or None
    when the migration says nothing verified.
    """
    if migration.get("state") != "complete":
        return None
    now = timeutils.utcnow()
    if migration.get("direction") == OUTGOING:
        peer_image = migration.get("peer_image") or {}
        if not peer_image.get("image_id") or \
                peer_image.get("os_hash_value") != \
                migration.get("os_hash_value"):
            LOG.warning("migration %s completed without a verified peer "
                        "image: not in the replica catalog",
                        migration.get("migration_id"))
            return None
        values = {"replica_image_id": peer_image["image_id"],
                  "hash_value": peer_image["os_hash_value"],
                  "project_id": migration.get("project_id")}
        source = migration["image_id"]
    else:
        source = migration.get("source_image_id")
        if not source or not migration.get("image_id"):
            return None
        values = {"replica_image_id": migration["image_id"],
                  "hash_value": migration.get("os_hash_value"),
                  "project_id": owner}
    # The row of its owner: the policy it served, else its project's.
    values.update(policy_id=policy_id, hash_algo=HASH_ALGO, state=CURRENT,
                  verified_at=now,
                  image_name=migration.get("image_name"),
                  size=migration.get("size"),
                  migration_id=migration.get("migration_id"))
    row = db.replica_upsert(migration["direction"], migration["peer"],
                            source, values)
    LOG.info("replica catalog: %s image %s %s %s is image %s",
             migration["direction"], source,
             "on" if migration["direction"] == OUTGOING else "from",
             migration["peer"], values["replica_image_id"])
    return row
