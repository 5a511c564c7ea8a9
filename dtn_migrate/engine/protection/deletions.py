"""Mirror deletions: a source image deleted under a policy whose option
``deletion`` is ``mirror`` has its replica deleted on the peer, once the
policy's grace period has passed.

On the source, the policy image goes ``deleting`` when the engine learns
of the deletion (Glance's ``image.delete``, or a scan that no longer
finds the image), and remembers when (its ``changed_at``).  Every
``[protection] rpo_interval``, the ones whose grace period is over are
sent: the image must still be gone from Glance, and the policy must
still mirror; the request travels over the DTN link (this cloud's agent
to the peer's, which asks the peer's engine: :meth:`Deletions.handle`).
A peer that cannot be reached is asked again at the next check.

The peer deletes only a replica that its own catalog says it holds for
that source image, from that peer, for that policy, and whose data did
not change since it was verified; never one of a policy it failed over
(it is primary for those images now), nor a protected image, nor
anything when its ``[peer:<name>] accept_deletions`` is false.  Its
answer is ``deleted`` (also when it was already), ``absent`` (no
replica) or ``refused`` with the reason: each ends the deletion on the
source, logged, and both catalogs mark the replica ``deleted``.
"""

import datetime

from oslo_log import log as logging
from oslo_utils import timeutils

from dtn_migrate.conf import peer as peer_conf
from dtn_migrate.engine.protection import catalog
from dtn_migrate.engine.protection import peer_requests
from dtn_migrate.engine.protection import replicas
from dtn_migrate.engine.tasks import base
from dtn_migrate import exception

LOG = logging.getLogger(__name__)

DELETING = "deleting"
REMOVED = "removed"
ACTION = "delete_replica"
DELETED, ABSENT, REFUSED = "deleted", "absent", "refused"
ANSWERS = (DELETED, ABSENT, REFUSED)
#: Glance statuses of an image that is gone (a v2 GET answers 404 for
#: most; these are the ones it may still show).
GONE = ("deleted", "pending_delete", "killed")


def mirrors(policy):
    return (policy.get("options") or {}).get("deletion") == "mirror"


def grace(policy):
    minutes = (policy.get("options") or {}).get("deletion_grace_minutes")
    return datetime.timedelta(minutes=60 if minutes is None else minutes)


def mark(db, policy, image_id, now):
    """The source image is gone: its policy image waits for the grace
    period (``deleting``) when the policy mirrors deletions and the peer
    holds a replica; returns whether it does.  A deletion already
    waiting keeps its time.
    """
    if not mirrors(policy):
        return False
    replica = db.replica_get(catalog.OUTGOING, policy["peer"], image_id,
                             policy_id=policy["id"])
    if replica is None or replica.get("state") != catalog.CURRENT:
        return False
    row = db.policy_image_get(policy["id"], image_id)
    if row is not None and row["state"] == DELETING:
        return True
    db.policy_image_upsert(policy["id"], image_id, {
        "state": DELETING, "changed_at": now,
        "error": "deleted from the source; its replica on %s is deleted "
                 "after the grace period" % policy["peer"]})
    LOG.info("protection policy %s: image %s deleted from the source; "
             "replica %s on %s is deleted after %s", policy["id"],
             image_id, replica.get("replica_image_id"), policy["peer"],
             grace(policy))
    return True


class Deletions:
    """Both ends of mirror deletions, for one engine."""

    def __init__(self, conf, db, res):
        self.conf = conf
        self.db = db
        self.res = res

    # The source.
    def send_due(self, now=None):
        """Ask the peers to delete the replicas whose grace period is
        over; returns {image id: answer} of the requests answered.
        """
        now = now or timeutils.utcnow()
        answered = {}
        for row in self.db.policy_images_get(states=[DELETING]):
            try:
                policy = self.db.policy_get(row["policy_id"])
            except exception.ProtectionPolicyNotFound:
                continue                    # its rows went with it
            if not policy["enabled"]:
                continue
            if not mirrors(policy):
                self._end(policy, row, "deleted from the source; its "
                          "replica is kept (the policy no longer mirrors "
                          "deletions)")
                continue
            if (row.get("changed_at") or now) + grace(policy) > now:
                continue
            answer = self._send(policy, row)
            if answer is not None:
                answered[row["image_id"]] = answer
        return answered

    def _send(self, policy, row):
        image_id, peer = row["image_id"], policy["peer"]
        if not self._gone(image_id):
            self._end(policy, row, "the source image is back; its replica "
                      "is kept")
            return None
        replica = self.db.replica_get(catalog.OUTGOING, peer, image_id,
                                      policy_id=policy["id"])
        if replica is None or replica.get("state") != catalog.CURRENT:
            self._end(policy, row, "deleted from the source; no replica "
                      "on %s to delete" % peer)
            return None
        request = {"action": ACTION, "policy_id": policy["id"],
                   "source_image_id": image_id,
                   "replica_image_id": replica.get("replica_image_id"),
                   "hash_value": replica.get("hash_value")}
        try:
            answer = peer_requests.ask(self.conf, self.res, peer, request)
        except (exception.DtnMigrateException,) + base.TRANSIENT_RPC as exc:
            LOG.warning("protection policy %s: replica of image %s not "
                        "deleted on %s yet: %s", policy["id"], image_id,
                        peer, exc)
            self.db.policy_image_upsert(policy["id"], image_id, {
                "error": "deleting its replica on %s: %s" % (peer, exc)})
            return None
        result = answer.get("result")
        if result not in ANSWERS:
            LOG.warning("protection policy %s: %s answered %r to the "
                        "deletion of image %s's replica", policy["id"],
                        peer, answer, image_id)
            return None
        if result == REFUSED:
            reason = str(answer.get("reason") or "no reason given")[:500]
            LOG.warning("protection policy %s: %s refused to delete the "
                        "replica of image %s: %s", policy["id"], peer,
                        image_id, reason)
            why = "deleted from the source; %s kept its replica: %s" % (
                peer, reason)
        else:
            self.db.replica_update(replica["id"],
                                   {"state": catalog.DELETED})
            why = "deleted from the source; replica %s on %s" % (
                "deleted" if result == DELETED else "already gone", peer)
            LOG.info("protection policy %s: replica %s of image %s on %s "
                     "%s (mirror)", policy["id"],
                     replica.get("replica_image_id"), image_id, peer,
                     "deleted" if result == DELETED else "already gone")
        self._end(policy, row, why)
        return result

    def _gone(self, image_id):
        try:
            image = self.res.images.get(image_id)
        except exception.ImageNotFound:
            return True
        return image.get("status") in GONE

    def _end(self, policy, row, why):
        self.db.policy_image_upsert(policy["id"], row["image_id"], {
            "state": REMOVED, "changed_at": None, "error": why})

    # The peer.
    def handle(self, peer, request):
        """A request from peer DTN ``peer`` (authenticated by this
        cloud's agent): the answer mapping.  Raises InvalidInput on a
        request that makes no sense.
        """
        source = peer_requests.check_id(request, "source_image_id")
        policy_id = peer_requests.check_id(request, "policy_id")
        replica = self.db.replica_get(catalog.INCOMING, peer, source,
                                      policy_id=policy_id)
        if replica is None:
            return {"result": ABSENT}
        image_id = replica.get("replica_image_id")
        if replica.get("state") == catalog.DELETED:
            return {"result": DELETED, "replica_image_id": image_id}
        reason = self._refusal(peer, policy_id, replica)
        if reason is None:
            reason = self._delete(image_id, replica)
        if reason is not None:
            LOG.warning("peer %s asked to delete image %s (the replica of "
                        "its image %s): refused, %s", peer, image_id,
                        source, reason)
            return {"result": REFUSED, "reason": reason,
                    "replica_image_id": image_id}
        self.db.replica_update(replica["id"], {"state": catalog.DELETED})
        LOG.info("image %s, the replica of %s's image %s, deleted: its "
                 "policy %s mirrors deletions", image_id, peer, source,
                 policy_id)
        return {"result": DELETED, "replica_image_id": image_id}

    def _refusal(self, peer, policy_id, replica):
        """Why the replica stays, or None."""
        if not self._accepts(peer):
            return "this cloud does not accept deletions from %s " \
                   "([peer:%s] accept_deletions)" % (peer, peer)
        if replica.get("policy_id") != policy_id:
            return "the replica serves no such policy here"
        try:
            policy = self.db.policy_get(policy_id)
        except exception.ProtectionPolicyNotFound:
            return "the replica serves no such policy here"
        if policy.get("role") == replicas.FAILED_OVER:
            return "this cloud failed over: it is primary for the " \
                   "policy's images"
        if policy.get("role") != replicas.ROLE:
            return "the policy is this cloud's own"
        if policy.get("peer") != peer:
            return "the replica serves no such policy here"
        return None

    def _delete(self, image_id, replica):
        """Delete the replica's image unless it changed here; None, or
        why not.
        """
        try:
            image = self.res.images.get(image_id)
        except exception.ImageNotFound:
            return None
        if image.get("os_hash_value") != replica.get("hash_value"):
            return "its data changed on this cloud since it was verified"
        if image.get("protected"):
            return "the image is protected on this cloud"
        try:
            self.res.images.delete(image_id)
        except exception.Conflict as exc:
            return str(exc)
        return None

    def _accepts(self, peer):
        return peer_conf.section(self.conf, peer).accept_deletions
