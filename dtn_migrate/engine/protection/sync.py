"""Keeping what protection policies select replicated on their peers.

Three things start a replication, all through :meth:`Protection.protect`:
Glance's notifications (continuous policies, see ``listener``), scans of
Glance (at start-up and every ``[protection] scan_interval`` for
continuous policies, when a scheduled policy's cron expression fires,
and on request: the ``sync`` action), and nothing else.

``protect`` decides per policy and image, under one lock:

* an image whose change is already syncing or replicated with the same
  hash is left alone: a burst of events causes one migration;
* an image whose replica in the catalog has the same verified hash is
  marked replicated without sending anything (sync level "checksum");
* anything else is asked of the migrations (as the policy's project),
  which reuse a running or complete migration of the same data.

Each policy image (``policy_images``) remembers the oldest change the
peer does not hold verified: the policy's recovery point.
"""

import datetime
import queue
import threading

from oslo_log import log as logging
from oslo_utils import timeutils

from dtn_migrate import context as context_mod
from dtn_migrate.common import states
from dtn_migrate.engine.protection import catalog
from dtn_migrate.engine.protection import deletions as deletions_mod
from dtn_migrate.engine.protection import metadata_sync
from dtn_migrate.engine.protection import peer_requests
from dtn_migrate.engine.protection import validation as policies_mod
from dtn_migrate.engine.protection import replicas
from dtn_migrate.engine.protection import rpo
from dtn_migrate.engine.protection import selectors
from dtn_migrate.engine import preflight
from dtn_migrate.engine import records
from dtn_migrate.engine.tasks import base
from dtn_migrate import exception

LOG = logging.getLogger(__name__)

PENDING = "pending"
SYNCING = "syncing"
REPLICATED = "replicated"
FAILED = "failed"
REMOVED = "removed"
DELETING = deletions_mod.DELETING
#: Policy image states whose change needs no new migration.
_SETTLED = (SYNCING, REPLICATED)
_TIMES = ("created_at", "updated_at", "rpo_checked_at", "last_sync_at")


def _created_at(image):
    """When ``image`` was created (naive UTC); long ago when unknown."""
    try:
        return timeutils.normalize_time(
            timeutils.parse_isotime(image["created_at"]))
    except (KeyError, TypeError, ValueError):
        return datetime.datetime.min


def _changed_at(image, now):
    """When ``image`` last changed (its updated_at), never later than
    ``now``.
    """
    try:
        when = timeutils.normalize_time(
            timeutils.parse_isotime(image["updated_at"]))
    except (KeyError, TypeError, ValueError):
        return now
    return min(when, now)


class Protection:
    """The protection policies of one engine."""

    def __init__(self, conf, db, migrations, notifier=None):
        self.conf = conf
        self.db = db
        self.migrations = migrations
        self.res = migrations.res
        self.notifier = notifier
        self.lock = threading.RLock()
        self._scans = queue.Queue()
        self._queued = set()
        self._stopped = threading.Event()
        self._worker = None
        self.deletions = deletions_mod.Deletions(conf, db, self.res)
        self.metadata = metadata_sync.MetadataSync(conf, db, self.res)
        migrations.finished.append(self.migration_finished)

    # Records.
    def record(self, row):
        out = {k: records.iso(v) if k in _TIMES else v
               for k, v in row.items()}
        counts = self.db.policy_image_counts([row["id"]]).get(row["id"])
        out["images"] = dict(counts or {})
        return out

    def _scope(self, ctx):
        return None if ctx.is_admin else ctx.project_id

    def get(self, ctx, policy_id):
        if not isinstance(policy_id, str) or len(policy_id) > 64:
            raise exception.ProtectionPolicyNotFound(
                policy_id=str(policy_id)[:64])
        return self.db.policy_get(policy_id, self._scope(ctx))

    # Requests (RPC).
    def peer_request(self, peer, request):
        """The answer to peer DTN ``peer``'s request (see
        ``peer_requests``).
        """
        return peer_requests.dispatch(
            {deletions_mod.ACTION: self.deletions.handle,
             metadata_sync.ACTION: self.metadata.handle,
             metadata_sync.CLOSE: self.metadata.handle_close}, peer,
            request)

    def create(self, ctx, values):
        project = self._scope(ctx)
        row = policies_mod.check(
            values, default_rpo=self.conf.protection.default_rpo_minutes)
        owner = row.get("project_id")
        if project is not None:
            if owner not in (None, project) or row["selector"]["projects"]:
                raise exception.PolicyNotAuthorized(
                    action="dtn:policy:create:projects")
            owner = project
        # An admin's policy is the admin's project's, unless it names
        # another; a caller without a project (the bus) must name one.
        owner = owner or ctx.project_id
        if owner is None:
            raise exception.InvalidInput(
                reason="a policy needs a project_id (its owner)")
        self.res.check_peer(row["peer"])
        self._preflight(row["peer"], owner, row["options"])
        row.update(project_id=owner, user_id=ctx.user_id)
        created = self.db.policy_create(row)
        LOG.info("protection policy %s (%s) of project %s created: %s to "
                 "%s", created["id"], created["name"], owner,
                 created["mode"], created["peer"])
        self._notify("create", created)
        if created["enabled"] and created["mode"] == "continuous":
            self.request_scan(created["id"])
        return self.record(created)

    def _preflight(self, peer, owner, options):
        """Ask ``peer`` whether it would import what a policy of project
        ``owner`` with ``options`` sends (its import rules: the project
        map, the target project; see ``engine.preflight``): a refusal is
        PreflightRefused (409) and nothing is saved.  A peer that does
        not answer does not stop the policy: each of its migrations asks
        again before its first byte.
        """
        req = preflight.request(options, owner)
        try:
            preflight.ask(self.conf, self.res, peer, req,
                          "the policy's imports")
        except (exception.PeerUnreachable,) + base.TRANSIENT_RPC as exc:
            LOG.warning("protection policy of project %s: %s did not "
                        "answer the preflight (%s); each migration asks "
                        "again", owner, peer, exc)

    def update(self, ctx, policy_id, values):
        current = self.get(ctx, policy_id)
        if current.get("role") in (replicas.ROLE, replicas.FAILED_OVER):
            raise exception.ProtectionPolicyConflict(
                policy_id=current["id"], state="the replica of %s's policy"
                % current["peer"], action="change")
        changes = policies_mod.check(values, current=current)
        if self._scope(ctx) is not None and \
                (changes.get("selector") or {}).get("projects"):
            raise exception.PolicyNotAuthorized(
                action="dtn:policy:create:projects")
        if "peer" in changes and changes["peer"] != current["peer"]:
            self.res.check_peer(changes["peer"])
        if {"peer", "options"} & set(changes):
            self._preflight(changes.get("peer", current["peer"]),
                            current["project_id"],
                            changes.get("options", current.get("options")
                                        or {}))
        if "options" in changes:
            # Given options replace the operator's; the engine's own
            # (a failback's reverse_of) stay.
            kept = {k: v for k, v in (current.get("options") or {}).items()
                    if k not in policies_mod.DEFAULT_OPTIONS}
            changes["options"] = dict(kept, **changes["options"])
        row = self.db.policy_update(current["id"], changes)
        if "peer" in changes and changes["peer"] != current["peer"]:
            # Nothing of it is on the new peer yet.
            self._forget_images(row, every=True)
        elif "selector" in changes:
            # What it selected before is judged again by the next scan.
            self._forget_images(row)
        if changes.get("enabled") is False:
            row = self.db.policy_update(row["id"], {
                "rpo_state": None, "rpo_seconds": None})
        LOG.info("protection policy %s updated: %s", row["id"],
                 ", ".join(sorted(changes)))
        self._notify("update", row)
        if row["enabled"] and row["mode"] == "continuous":
            self.request_scan(row["id"])
        return self.record(row)

    def delete(self, ctx, policy_id):
        current = self.get(ctx, policy_id)
        self.db.policy_delete(current["id"])
        LOG.info("protection policy %s (%s) deleted; its replicas stay on "
                 "%s", current["id"], current["name"], current["peer"])
        self._notify("delete", current)

    def sync(self, ctx, policy_id):
        """Scan the policy now, whatever its mode: returns the policy and
        the migrations it started or found running.
        """
        current = self.get(ctx, policy_id)
        if not current["enabled"]:
            raise exception.ProtectionPolicyConflict(
                policy_id=current["id"], state="disabled", action="sync")
        started = self.scan_policy(current)
        return {"policy": self.record(self.db.policy_get(current["id"])),
                "migrations": started}

    # Scans.
    def request_scan(self, policy_id=None):
        """Scan ``policy_id`` (None: every continuous policy) soon, in the
        scan thread: requests and events never wait for Glance's
        listings.
        """
        with self.lock:
            if policy_id in self._queued:
                return
            self._queued.add(policy_id)
        self._scans.put(policy_id)

    def start(self):
        self._worker = threading.Thread(target=self._scan_loop,
                                        name="protection-scan", daemon=True)
        self._worker.start()

    def stop(self):
        self._stopped.set()
        self._scans.put(False)

    def _scan_loop(self):
        while not self._stopped.is_set():
            item = self._scans.get()
            if item is False:
                return
            with self.lock:
                self._queued.discard(item)
            try:
                if item is None:
                    self.scan()
                else:
                    self.scan_policy(self.db.policy_get(item))
            except exception.ProtectionPolicyNotFound:
                pass
            except Exception as exc:  # noqa: B902 - the next scan retries
                LOG.warning("protection scan failed: %s", exc)

    def scan(self):
        """Every enabled continuous policy (the reconciliation of events
        lost while the engine, the broker or Glance was away).
        """
        for policy in self.db.policy_get_all(
                filters={"enabled": True, "mode": "continuous"}):
            try:
                self.scan_policy(policy)
            except exception.DtnMigrateException as exc:
                LOG.warning("protection policy %s: scan failed: %s",
                            policy["id"], exc)

    def scan_policy(self, policy, since=None):
        """Protect every image ``policy`` selects in Glance now; mark
        those it no longer selects.  Returns the migrations started or
        found running.  ``since`` (a failback): only the images created
        since then count, and the replicas of the peer's images (sent
        back if their bytes changed).
        """
        if since is not None:
            # Glance's created_at has whole seconds: an image made within
            # the second of ``since``, after it, reads as made before.
            since = since.replace(microsecond=0)
        selector = policy["selector"]
        tags, properties = selectors.glance_query(selector)
        try:
            found = self.res.images.select(tag=tags or None,
                                           properties=properties or None)
        except exception.DtnMigrateException as exc:
            self.db.policy_update(policy["id"], {"last_error": str(exc)})
            raise
        selected = [image for image in found if selectors.matches(
            selector, policy["project_id"], image) and
            (since is None or _created_at(image) >= since or
             self._replica_of(policy["peer"], image))]
        started = []
        for image in selected:
            record = self.protect(policy, image)
            if record is not None:
                started.append(record)
        ids = {image["id"] for image in selected}
        for row in self.db.policy_images_get(policy_id=policy["id"]):
            if row["image_id"] not in ids and \
                    row["state"] not in (REMOVED, DELETING):
                self._recheck(policy, row)
        self.db.policy_update(policy["id"], {
            "last_sync_at": timeutils.utcnow(), "last_error": None})
        return started

    def _replica_of(self, peer, image):
        """Whether ``image`` is the replica of an image of ``peer``."""
        return bool(self.db.replica_get_all(filters={
            "direction": catalog.INCOMING, "peer": peer,
            "replica_image_id": image["id"]}, limit=1))

    def _recheck(self, policy, row):
        """An image the scan did not list: gone, out of the policy, or
        listed late (protected after all).
        """
        try:
            image = self.res.images.get(row["image_id"])
        except exception.ImageNotFound:
            return self._source_deleted(policy, row["image_id"])
        if image.get("status") in deletions_mod.GONE:
            return self._source_deleted(policy, row["image_id"])
        if image.get("status") == "active" and selectors.matches(
                policy["selector"], policy["project_id"], image):
            self.protect(policy, image)
        else:
            self._removed(policy, row["image_id"],
                          "no longer selected by the policy")

    # Events.
    def image_changed(self, image_id):
        """Glance says ``image_id`` was activated or updated."""
        policies = self.db.policy_get_all(
            filters={"enabled": True, "mode": "continuous"})
        if not policies:
            return
        try:
            image = self.res.images.get(image_id)
        except exception.ImageNotFound:
            return self.image_deleted(image_id)
        for policy in policies:
            row = self.db.policy_image_get(policy["id"], image_id)
            if selectors.matches(policy["selector"], policy["project_id"],
                                 image):
                if image.get("status") == "active":
                    self.protect(policy, image)
            elif row is not None and row["state"] != REMOVED:
                self._removed(policy, image_id,
                              "no longer selected by the policy")

    def image_deleted(self, image_id):
        """The source image is gone: its policy images stop counting
        against the recovery point.  The replicas stay on the peer
        (deletion ``keep``), or are deleted there after the grace period
        (``mirror``, see ``deletions``).
        """
        for row in self.db.policy_images_get(image_id=image_id):
            if row["state"] in (REMOVED, DELETING):
                continue
            try:
                policy = self.db.policy_get(row["policy_id"])
            except exception.ProtectionPolicyNotFound:
                continue
            self._source_deleted(policy, image_id)

    def _source_deleted(self, policy, image_id):
        with self.lock:
            if deletions_mod.mark(self.db, policy, image_id,
                                  timeutils.utcnow()):
                return
        self._removed(policy, image_id, "deleted from the source")

    def _removed(self, policy, image_id, why):
        with self.lock:
            self.db.policy_image_upsert(policy["id"], image_id, {
                "state": REMOVED, "changed_at": None, "error": why})
        LOG.info("protection policy %s: image %s %s", policy["id"],
                 image_id, why)

    def _forget_images(self, policy, every=False):
        for row in self.db.policy_images_get(policy_id=policy["id"]):
            if every or row["state"] in (PENDING, FAILED):
                self.db.policy_image_delete(policy["id"], row["image_id"])

    # The decision.
    def protect(self, policy, image):
        """Make sure the peer holds ``image`` for ``policy``; returns the
        migration record asked for, or None when nothing had to move.
        """
        now = timeutils.utcnow()
        image_id, digest = image["id"], image.get("os_hash_value")
        with self.lock:
            row = self.db.policy_image_get(policy["id"], image_id)
            if row is not None and row["state"] == SYNCING:
                row = self._settle_syncing(row)
            if row is not None and row["state"] in _SETTLED and \
                    row.get("os_hash_value") == digest:
                return None
            values = {"image_name": image.get("name"),
                      "project_id": image.get("owner"),
                      "os_hash_value": digest, "size": image.get("size"),
                      "error": None}
            replica = catalog.current(self.db, policy, image)
            if replica is not None:
                values.update(state=REPLICATED, changed_at=None,
                              replicated_at=replica.get("verified_at"),
                              migration_id=replica.get("migration_id"))
                self.db.policy_image_upsert(policy["id"], image_id, values)
                LOG.info("protection policy %s: image %s already on %s "
                         "(verified hash): nothing sent", policy["id"],
                         image_id, policy["peer"])
                return None
            changed = _changed_at(image, now)
            if row is not None and row["state"] in (PENDING, FAILED,
                                                    SYNCING) and \
                    row.get("changed_at"):
                changed = min(changed, row["changed_at"])
            values.update(state=PENDING, changed_at=changed)
            self.db.policy_image_upsert(policy["id"], image_id, values)
            try:
                record = self._migrate(policy, image_id)
            except exception.DtnMigrateException as exc:
                LOG.warning("protection policy %s: image %s not "
                            "replicated: %s", policy["id"], image_id, exc)
                self.db.policy_image_upsert(policy["id"], image_id, {
                    "state": FAILED, "error": str(exc)})
                return None
            self.db.policy_image_upsert(policy["id"], image_id, {
                "state": SYNCING, "migration_id": record["migration_id"]})
        LOG.info("protection policy %s: image %s to %s by migration %s "
                 "(%s)", policy["id"], image_id, policy["peer"],
                 record["migration_id"], record["state"])
        if record["state"] in states.FINAL_STATES:
            # A finished migration of the same data was reused.
            self.migration_finished(record)
        return record

    def _settle_syncing(self, row):
        """A syncing policy image whose migration ended without its
        outcome reaching us (an engine killed between the two, a
        bookkeeping error): the outcome is applied now.  Returns the row
        as it is then.
        """
        try:
            record = self.migrations.get(row["migration_id"])
        except exception.MigrationNotFound:
            record = None
        if record is not None and record["state"] not in states.FINAL_STATES:
            return row              # still running
        if record is None:
            self.db.policy_image_upsert(row["policy_id"], row["image_id"],
                                        {"state": PENDING})
        else:
            self._finished(record)
        return self.db.policy_image_get(row["policy_id"], row["image_id"])

    def _migrate(self, policy, image_id):
        ctx = context_mod.RequestContext(
            project_id=policy["project_id"], user_id=policy.get("user_id"),
            is_admin=False, overwrite=False)
        opts = policy.get("options") or {}
        options = {"keep_id": bool(opts.get("keep_id")),
                   "protection": {"policy_id": policy["id"],
                                  "name": policy["name"],
                                  "rpo_minutes": policy["rpo_minutes"],
                                  "selector": policy["selector"]}}
        if opts.get("target_project"):
            options["target_project"] = opts["target_project"]
        req = self.migrations.request(policy["peer"], images=[image_id],
                                      options=options, context=ctx)
        return req["migrations"][0]

    def migration_finished(self, record):
        """A migration ended (Migrations calls this): the catalog and the
        policy images it served learn the outcome.
        """
        try:
            self._finished(record)
        except Exception as exc:  # noqa: B902 - the next scan repairs
            LOG.warning("migration %s: protection bookkeeping failed: %s",
                        record.get("migration_id"), exc)

    def _finished(self, record):
        migration_id, state = record.get("migration_id"), record["state"]
        if record.get("direction") == catalog.INCOMING:
            if state == "complete":
                owner = None
                try:
                    owner = self.res.images.get(
                        record["image_id"]).get("owner")
                except exception.DtnMigrateException:
                    pass
                served = record.get("protection") or None
                policy_id = replicas.learn(self.db, served, record["peer"],
                                           owner)
                catalog.record(self.db, record, owner=owner,
                               policy_id=policy_id)
            return
        now = timeutils.utcnow()
        with self.lock:
            # Under the lock: protect() names the migration of a policy
            # image while holding it.
            rows = self.db.policy_images_get(migration_id=migration_id)
            policy_id = rows[0]["policy_id"] if rows else None
            if state == "complete":
                catalog.record(self.db, record, policy_id=policy_id)
            for row in rows:
                if row["state"] != SYNCING:
                    continue
                if state == "complete" and \
                        row.get("os_hash_value") == record.get(
                            "os_hash_value"):
                    values = {"state": REPLICATED, "changed_at": None,
                              "replicated_at": now, "error": None}
                elif state == "complete":
                    values = {"state": PENDING}     # changed meanwhile
                else:
                    values = {"state": FAILED, "error": record.get("error")}
                self.db.policy_image_upsert(row["policy_id"],
                                            row["image_id"], values)

    # Recovery point.
    def check_rpo(self):
        """Grade every enabled policy's recovery point, notify changes,
        and scan the scheduled policies that are due.
        """
        now = timeutils.utcnow()
        reachable = self._reachable()
        fraction = self.conf.protection.at_risk_fraction
        for policy in self.db.policy_get_all(filters={"enabled": True}):
            rows = self.db.policy_images_get(
                policy_id=policy["id"],
                states=list(states.UNREPLICATED_STATES))
            seconds = rpo.age(rows, now)
            state = rpo.grade(seconds, policy["rpo_minutes"], fraction,
                              reachable.get(policy["peer"], True))
            if state != policy.get("rpo_state") or seconds or \
                    policy.get("rpo_seconds"):
                # A policy that stays at ok with nothing waiting is not
                # written again (its updated_at keeps its meaning).
                row = self.db.policy_update(policy["id"], {
                    "rpo_state": state, "rpo_seconds": round(seconds, 3),
                    "rpo_checked_at": now})
                if state != policy.get("rpo_state"):
                    self._rpo_changed(row, policy.get("rpo_state"), rows)
            if policy["mode"] == "scheduled" and self._due(policy, now):
                self.request_scan(policy["id"])
            elif self._retry_due(rows, now):
                self.request_scan(policy["id"])

    def send_deletions(self):
        """Ask the peers to delete the replicas of deleted images whose
        grace period is over (policies that mirror deletions).
        """
        try:
            self.deletions.send_due()
        except Exception as exc:  # noqa: B902 - the next run retries
            LOG.warning("mirror deletions: %s", exc)

    def _retry_due(self, rows, now):
        """A failed replication waited ``retry_interval``: a scan asks
        for it again (which resumes what its transfer sent).
        """
        wait = self.conf.protection.retry_interval
        return any(r["state"] == FAILED and r.get("updated_at") and
                   (now - r["updated_at"]).total_seconds() >= wait
                   for r in rows)

    def _due(self, policy, now):
        last = policy.get("last_sync_at") or policy["created_at"]
        try:
            return policies_mod.next_run(policy["schedule"], last) <= now
        except (TypeError, ValueError) as exc:
            LOG.warning("protection policy %s: bad schedule %r: %s",
                        policy["id"], policy.get("schedule"), exc)
            return False

    def _reachable(self):
        """{peer: reachable} from this cloud's DTN agent; {} when the
        agent does not answer (nothing is graded at risk for it).
        """
        try:
            health = self.res.agent.peer_health(base.CTXT,
                                                self.res.agent_host)
        except Exception as exc:  # noqa: B902 - graded on age alone
            LOG.debug("peer health unknown: %s", exc)
            return {}
        return {h.get("name"): bool(h.get("reachable"))
                for h in health or ()}

    def _rpo_changed(self, policy, previous, rows):
        log = LOG.warning if policy["rpo_state"] == states.RPO_BREACHED \
            else LOG.info
        log("protection policy %s (%s): RPO %s -> %s (%.0f s, target "
            "%d min)", policy["id"], policy["name"], previous,
            policy["rpo_state"], policy["rpo_seconds"] or 0,
            policy["rpo_minutes"])
        payload = {"previous_state": previous,
                   "pending_images": sorted(r["image_id"] for r in rows)}
        self._notify("rpo_changed", policy, **payload)
        if policy["rpo_state"] == states.RPO_BREACHED:
            self._notify("rpo_breached", policy, priority="warn", **payload)
        elif previous == states.RPO_BREACHED:
            self._notify("rpo_recovered", policy, **payload)

    def _notify(self, event, policy, priority="info", **extra):
        if self.notifier is None:
            return
        payload = {"policy_id": policy["id"], "name": policy.get("name"),
                   "project_id": policy.get("project_id"),
                   "peer": policy.get("peer"), "mode": policy.get("mode"),
                   "rpo_state": policy.get("rpo_state"),
                   "rpo_seconds": policy.get("rpo_seconds"),
                   "rpo_minutes": policy.get("rpo_minutes")}
        payload.update(extra)
        try:
            getattr(self.notifier, priority)(
                {}, "dtn_migrate.policy.%s" % event, payload)
        except Exception as exc:  # noqa: B902 - never fail the caller
            LOG.warning("notification %s failed: %s", event, exc)
