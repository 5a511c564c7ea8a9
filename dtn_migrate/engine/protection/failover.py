"""Failover and failback, on the cloud that holds a policy's replicas.

``failover`` makes this cloud primary for the images of a policy it
learnt from its peer (role ``replica``): each replica in the catalog
becomes a first-class image (it loses the import marker and seal), and
a reverse policy (role ``failback``, manual, towards the peer) is prepared.
``failback`` sends back, through that reverse policy, only what was
created or changed here since: an image whose bytes the peer already
holds (the catalog's incoming row, same hash) is not sent, only its
metadata (name, tags, properties, min_disk, min_ram: see
``metadata_sync``), which the peer applies where it changed.  When
nothing of the reverse policy waits any more and the peer answered
every metadata update, the failback is complete: the policy is a
``replica`` again and the reverse policy is disabled, and the peer is
told so.

On the protected cloud (the peer, where the policy is ``primary``),
``failback`` opens it to the failback of that policy: for ``[protection]
failback_window`` seconds, or until the other cloud's failback is
complete, it applies the metadata sent back (see ``metadata_sync``).

Both are idempotent: an interrupted run is simply run again.
"""

from oslo_log import log as logging
from oslo_utils import timeutils

from dtn_migrate.common import states
from dtn_migrate.engine.protection import catalog
from dtn_migrate.engine.protection import metadata_sync
from dtn_migrate.engine.protection import replicas
from dtn_migrate.engine import records
from dtn_migrate import exception
from dtn_migrate.image import marker

LOG = logging.getLogger(__name__)

FAILED_OVER = replicas.FAILED_OVER
FAILBACK = "failback"


class Failover:
    """Failover and failback of one engine's policies."""

    def __init__(self, protection):
        self.protection = protection
        self.db = protection.db
        self.res = protection.res

    def _conflict(self, policy, action, why):
        return exception.ProtectionPolicyConflict(
            policy_id=policy["id"], state=why, action=action)

    def failover(self, ctx, policy_id):
        policy = self.protection.get(ctx, policy_id)
        role = policy.get("role")
        if role not in (replicas.ROLE, FAILED_OVER):
            raise self._conflict(
                policy, "fail over",
                "a %s policy (fail over on the cloud that holds its "
                "replicas)" % role)
        reverse = self._reverse(policy)
        options = dict(policy.get("options") or {})
        failover = dict(options.get("failover") or {})
        if failover.get("done"):
            failover = {}               # a new failover after a failback
        failover.setdefault("at", timeutils.utcnow().isoformat())
        failover.update(reverse_policy_id=reverse["id"], done=False)
        options["failover"] = failover
        # Saved before the promotions: a run that stops half-way finds
        # its reverse policy again.
        row = self.db.policy_update(policy["id"], {
            "role": FAILED_OVER, "options": options})
        promoted = 0
        for replica in self.db.replica_get_all(filters={
                "direction": catalog.INCOMING, "peer": policy["peer"],
                "policy_id": policy["id"], "state": catalog.CURRENT}):
            if self._promote(replica):
                promoted += 1
        LOG.warning("protection policy %s (%s) failed over: this cloud is "
                    "primary for its images (%d promoted); reverse policy "
                    "%s towards %s", row["id"], row["name"], promoted,
                    reverse["id"], row["peer"])
        self.protection._notify("failover", row, promoted=promoted,
                                reverse_policy_id=reverse["id"])
        return {"policy": self.protection.record(row),
                "reverse_policy": self.protection.record(reverse),
                "promoted": promoted}

    def _reverse(self, policy):
        """The reverse policy of ``policy``, made when missing."""
        reverse = self._existing(
            (policy.get("options") or {}).get("failover") or {})
        if reverse is None:
            for row in self.db.policy_get_all(filters={"role": FAILBACK}):
                if (row.get("options") or {}).get("reverse_of") == \
                        policy["id"]:
                    reverse = row
                    break
        if reverse is not None:
            if not reverse["enabled"]:
                reverse = self.db.policy_update(reverse["id"],
                                                {"enabled": True})
            return reverse
        selector = dict(policy.get("selector") or {})
        selector["projects"] = [policy["project_id"]]
        row = {"project_id": policy["project_id"],
               "user_id": policy.get("user_id"), "peer": policy["peer"],
               "mode": "manual", "enabled": True, "role": FAILBACK,
               "rpo_minutes": policy["rpo_minutes"], "selector": selector,
               "options": {"keep_id": True, "target_project": None,
                           "deletion": "keep", "deletion_grace_minutes": 60,
                           "reverse_of": policy["id"]},
               "description": "failback of %s to %s" % (policy["name"],
                                                        policy["peer"])}
        made = replicas.create_named(self.db, row,
                                     "%s-failback" % policy["name"],
                                     policy["peer"])
        if made is not None:
            return made
        raise self._conflict(policy, "fail over",
                             "without a free name for its reverse policy")

    def _promote(self, replica):
        """Make a replica a first-class image (no import marker nor
        seal).
        """
        try:
            image = self.res.images.get(replica["replica_image_id"])
        except exception.ImageNotFound:
            LOG.warning("failover: replica %s of %s is not in Glance",
                        replica["replica_image_id"],
                        replica["source_image_id"])
            return False
        if any(key in image for key in marker.PROPERTIES):
            self.res.images.remove_properties(image["id"],
                                              list(marker.PROPERTIES))
        return True

    def failback(self, ctx, policy_id):
        policy = self.protection.get(ctx, policy_id)
        if policy.get("role") == metadata_sync.PRIMARY:
            # The protected cloud: it opens to its peer's failback of the
            # policy (the metadata it sends back); nothing waits here.
            row = self.protection.metadata.open(policy)
            return {"policy": self.protection.record(row),
                    "reverse_policy": None, "migrations": [],
                    "complete": True}
        failover = (policy.get("options") or {}).get("failover") or {}
        if policy.get("role") == replicas.ROLE and failover.get("done"):
            reverse = self._existing(failover)
            return {"policy": self.protection.record(policy),
                    "reverse_policy": reverse and
                    self.protection.record(reverse),
                    "migrations": [], "complete": True}
        if policy.get("role") != FAILED_OVER:
            raise self._conflict(policy, "fail back",
                                 "a %s policy, not failed over"
                                 % policy.get("role"))
        reverse = self._existing(failover)
        if reverse is None:
            raise self._conflict(policy, "fail back",
                                 "failed over without its reverse policy "
                                 "(run failover again)")
        # Only what was created here since the failover (and what the
        # peer lacks): images of the project from before are not sent.
        started = self.protection.scan_policy(
            reverse, since=records.parse_iso(failover.get("at")))
        waiting = self.db.policy_images_get(
            policy_id=reverse["id"], states=list(states.UNREPLICATED_STATES))
        # The peer's images that only changed metadata here.
        errors = self.protection.metadata.send(policy)
        if errors:
            self.db.policy_update(policy["id"], {
                "last_error": ("metadata not sent back: %s"
                               % "; ".join(errors))[:2000]})
        complete = not waiting and not errors
        if complete:
            options = dict(policy.get("options") or {})
            options["failover"] = dict(failover, done=True,
                                       back_at=timeutils.utcnow().isoformat())
            policy = self.db.policy_update(policy["id"], {
                "role": replicas.ROLE, "options": options,
                "last_error": None})
            reverse = self.db.policy_update(reverse["id"],
                                            {"enabled": False})
            LOG.warning("protection policy %s (%s) failed back to %s",
                        policy["id"], policy["name"], policy["peer"])
            self.protection.metadata.close(policy)
            self.protection._notify("failback", policy)
        else:
            policy = self.db.policy_get(policy["id"])
        return {"policy": self.protection.record(policy),
                "reverse_policy": self.protection.record(reverse),
                "migrations": started, "complete": complete}

    def _existing(self, failover):
        """The reverse policy a failover record names, or None."""
        reverse_id = failover.get("reverse_policy_id")
        if not reverse_id:
            return None
        try:
            return self.db.policy_get(reverse_id)
        except exception.ProtectionPolicyNotFound:
            return None
