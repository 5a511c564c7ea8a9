"""Failback of metadata changes: a replica whose data did not change on
the DR cloud, but whose name, tags, properties, min_disk or min_ram did,
sends those back without its bytes.

During a failback, the DR cloud (B) sends, for each replica of the
policy that it promoted, the replica's metadata in an
``update_metadata`` request over the DTN link (like a mirror deletion;
see ``deletions``).  The source cloud (A) trusts none of it by default
(``[peer:<name>] accept_metadata_updates`` is false: every update is
``refused``).  Where it is true, A applies an update only while a
failback of that policy is open on A: an administrator of A opened it
(``openstack dtn failback <policy>`` on A, where the policy is
``primary``) for ``[protection] failback_window`` seconds, or until B
says its failback is complete (``close_failback``).  Outside that, A
answers ``closed`` (B's failback waits for it).  And only when A's
catalog says that image was replicated to B as that very replica, for
that policy, with the same verified hash, and A's image still has that
hash: then B's metadata wins, field by field, for the name, tags,
min_disk, min_ram and the properties ``[protection]
failback_properties`` allows, never for one of ``NEVER`` (signatures,
Glance's own, the import marker, what changes how a server boots).
A answers ``updated`` (with the fields it changed) or ``unchanged``,
and names under ``kept`` what it left as it was.  Visibility, owner,
``protected`` and ``os_hidden`` stay each cloud's own.
"""

import datetime
import fnmatch

from oslo_log import log as logging
from oslo_utils import timeutils

from dtn_migrate.conf import peer as peer_conf
from dtn_migrate.engine.protection import catalog
from dtn_migrate.engine.protection import peer_requests
from dtn_migrate.engine import records
from dtn_migrate.engine.tasks import base
from dtn_migrate import exception
from dtn_migrate.image import marker
from dtn_migrate.image import metadata

LOG = logging.getLogger(__name__)

ACTION = "update_metadata"
#: B tells A its failback of a policy is complete: A's window closes.
CLOSE = "close_failback"
UPDATED, UNCHANGED, REFUSED = "updated", "unchanged", "refused"
#: No failback of the policy is open on A (yet, or any more).
CLOSED = "closed"
ANSWERS = (UPDATED, UNCHANGED, REFUSED, CLOSED)
FIELDS = ("name", "min_disk", "min_ram")
#: Properties a peer never sets nor removes, whatever [protection]
#: failback_properties says: image signatures, Glance's own and the
#: engine's markers, and what decides how a server boots or where
#: (hardware, guest OS, kernel and ramdisk, block devices, traits).
NEVER = ("img_*", "os_*", "hw_*", "dtn_migrate_*", "owner*", "visibility",
         "protected", "os_hidden", "trait:*", "traits*", "kernel_id",
         "ramdisk_id", "root_device_name", "block_device_mapping",
         "bdm_v2", "mappings", "architecture", "hypervisor_type",
         "vm_mode", "auto_disk_config", "instance_uuid", "image_type",
         "image_location", "image_state", "base_image_ref", "cinder_*",
         "boot_roles")
MAX_TAGS = 128
MAX_PROPERTIES = 256
MAX_TEXT = 255
MAX_VALUE = 65535
#: Where A keeps the failback window of a policy, in its options.
WINDOW = "failback"
#: The role of a policy of this cloud's own images.
PRIMARY = "primary"


def _invalid(reason):
    return exception.InvalidInput(reason="a metadata update: %s" % reason)


def of(image):
    """What travels back of ``image`` (a Glance dict)."""
    desc = metadata.describe(image)
    return {"name": desc.get("name"), "min_disk": desc.get("min_disk"),
            "min_ram": desc.get("min_ram"), "tags": desc["tags"],
            "properties": {k: v for k, v in desc["properties"].items()
                           if k not in marker.PROPERTIES}}


def check(value):
    """``value`` if it is a metadata mapping a peer may send; else
    InvalidInput.
    """
    if not isinstance(value, dict) or set(value) != set(FIELDS) | {
            "tags", "properties"}:
        raise _invalid("metadata has name, min_disk, min_ram, tags and "
                       "properties")
    name = value["name"]
    if name is not None and (not isinstance(name, str) or
                             len(name) > MAX_TEXT):
        raise _invalid("name is text of at most %d characters" % MAX_TEXT)
    for key in ("min_disk", "min_ram"):
        number = value[key]
        if number is not None and (isinstance(number, bool) or
                                   not isinstance(number, int) or
                                   not 0 <= number < 1 << 31):
            raise _invalid("%s is a whole number" % key)
    tags = value["tags"]
    if not isinstance(tags, list) or len(tags) > MAX_TAGS or not all(
            isinstance(t, str) and 0 < len(t) <= MAX_TEXT for t in tags):
        raise _invalid("tags are at most %d texts" % MAX_TAGS)
    props = value["properties"]
    if not isinstance(props, dict) or len(props) > MAX_PROPERTIES:
        raise _invalid("properties are a mapping of at most %d"
                       % MAX_PROPERTIES)
    for key, item in props.items():
        if not 0 < len(key) <= MAX_TEXT or key in marker.PROPERTIES or \
                metadata.is_glance_owned(key):
            raise _invalid("property %r may not be set" % key[:64])
        if not isinstance(item, str) or len(item) > MAX_VALUE:
            raise _invalid("property %r is not text of at most %d "
                           "characters" % (key[:64], MAX_VALUE))
    return value


def writable(key, allowed):
    """Whether a peer's failback may set or remove property ``key``:
    one of the ``allowed`` fnmatch patterns matches it, and none of
    ``NEVER`` (nor Glance's own) does.
    """
    if metadata.is_glance_owned(key) or \
            any(fnmatch.fnmatchcase(key, p) for p in NEVER):
        return False
    return any(fnmatch.fnmatchcase(key, p) for p in allowed)


def changes(wanted, image, allowed=("*",)):
    """(fields to set, properties to remove, properties kept) to make
    ``image`` carry ``wanted`` (checked metadata), where properties are
    only written if ``writable``; the others, where they differ, are
    kept as they are (and named).
    """
    current = of(image)
    out = {k: wanted[k] for k in FIELDS
           if wanted[k] is not None and wanted[k] != current[k]}
    if sorted(wanted["tags"]) != current["tags"]:
        out["tags"] = sorted(wanted["tags"])
    kept = set()
    for key, value in wanted["properties"].items():
        if current["properties"].get(key) != value:
            if writable(key, allowed):
                out[key] = value
            else:
                kept.add(key)
    remove = []
    for key in sorted(set(current["properties"]) -
                      set(wanted["properties"])):
        if writable(key, allowed):
            remove.append(key)
        else:
            kept.add(key)
    return out, remove, sorted(kept)


def window(policy):
    """(opened, closes) of ``policy``'s failback window on this cloud
    (naive UTC datetimes), or None when none was opened; a window closed
    early closes at its ``closed_at``.
    """
    found = (policy.get("options") or {}).get(WINDOW)
    if not isinstance(found, dict):
        return None
    times = [records.parse_iso(found.get(k))
             for k in ("opened_at", "until", "closed_at")]
    if times[0] is None or times[1] is None:
        return None
    return times[0], min(t for t in times[1:] if t is not None)


def is_open(policy, now=None):
    """Whether a failback of ``policy`` is open on this cloud now."""
    found = window(policy)
    now = now or timeutils.utcnow()
    return found is not None and found[0] <= now < found[1]


class MetadataSync:
    """Both ends of the failback of metadata changes."""

    def __init__(self, conf, db, res):
        self.conf = conf
        self.db = db
        self.res = res

    # The DR cloud (failback).
    def send(self, policy):
        """Send the metadata of every current replica of ``policy`` (a
        failed-over replica policy) to its peer; returns the errors (an
        empty list when every one was answered).
        """
        errors = []
        for replica in self.db.replica_get_all(filters={
                "direction": catalog.INCOMING, "peer": policy["peer"],
                "policy_id": policy["id"], "state": catalog.CURRENT}):
            try:
                self._send_one(policy, replica)
            except exception.ProtectionPolicyConflict as exc:
                # The peer takes no failback of the policy now: no other
                # image of it either.
                errors.append(str(exc))
                break
            except exception.DtnMigrateException as exc:
                errors.append("image %s: %s" % (
                    replica["replica_image_id"], exc))
            except base.TRANSIENT_RPC as exc:
                errors.append("image %s: the agent did not answer (%s)"
                              % (replica["replica_image_id"],
                                 exc.__class__.__name__))
        for error in errors:
            LOG.warning("failback of %s: metadata not sent back: %s",
                        policy["id"], error)
        return errors

    def _send_one(self, policy, replica):
        try:
            image = self.res.images.get(replica["replica_image_id"])
        except exception.ImageNotFound:
            return None                 # deleted here: nothing to send
        if image.get("status") != "active" or \
                image.get("os_hash_value") != replica.get("hash_value"):
            return None                 # new bytes: sent as an image
        request = {"action": ACTION, "policy_id": policy["id"],
                   "source_image_id": replica["source_image_id"],
                   "replica_image_id": image["id"],
                   "hash_value": replica["hash_value"],
                   "metadata": of(image)}
        answer = peer_requests.ask(self.conf, self.res, policy["peer"],
                                   request)
        result = answer.get("result")
        if result not in ANSWERS:
            raise exception.PeerUnreachable(
                peer=policy["peer"], reason="it answered %r to a metadata "
                                            "update" % (answer,))
        if result == CLOSED:
            # Not an answer yet: asked again at the next failback run.
            raise exception.ProtectionPolicyConflict(
                policy_id=policy["id"], state="failed over, and %s has no "
                "failback of it open (an administrator of %s opens it "
                "there: openstack dtn failback %s)" % (
                    policy["peer"], policy["peer"], policy["id"]),
                action="send back the metadata of")
        if result == REFUSED:
            LOG.warning("failback of %s: %s kept the metadata of image %s: "
                        "%s", policy["id"], policy["peer"],
                        replica["source_image_id"], answer.get("reason"))
        elif result == UPDATED:
            LOG.info("failback of %s: metadata of image %s sent back to "
                     "%s (%s)", policy["id"], replica["source_image_id"],
                     policy["peer"], ", ".join(answer.get("changed") or ()))
        if answer.get("kept"):
            LOG.warning("failback of %s: %s kept %s of image %s as it is",
                        policy["id"], policy["peer"],
                        ", ".join(map(str, answer["kept"]))[:500],
                        replica["source_image_id"])
        return result

    def close(self, policy):
        """Tell the peer that the failback of ``policy`` is complete, so
        that it accepts no more of its metadata; a peer that does not
        answer closes its window in time anyway (logged, never raises).
        """
        try:
            peer_requests.ask(self.conf, self.res, policy["peer"], {
                "action": CLOSE, "policy_id": policy["id"]})
        except (exception.DtnMigrateException,) + base.TRANSIENT_RPC as exc:
            LOG.warning("failback of %s: %s not told it is complete (its "
                        "window closes in time): %s", policy["id"],
                        policy["peer"], exc)

    # The source cloud.
    def open(self, policy):
        """Open this cloud to the failback of ``policy`` (a primary
        policy of this cloud) from its peer, for ``[protection]
        failback_window`` seconds; the policy row.  Conflict when this
        cloud accepts no metadata updates from that peer at all.
        """
        if not self._accepts(policy["peer"]):
            raise exception.ProtectionPolicyConflict(
                policy_id=policy["id"], state="replicated to %s, whose "
                "metadata updates this cloud does not accept ([peer:%s] "
                "accept_metadata_updates)" % (policy["peer"],
                                              policy["peer"]),
                action="open a failback of")
        now = timeutils.utcnow()
        until = now + datetime.timedelta(
            seconds=self.conf.protection.failback_window)
        options = dict(policy.get("options") or {})
        options[WINDOW] = {"opened_at": records.iso(now),
                           "until": records.iso(until)}
        row = self.db.policy_update(policy["id"], {"options": options})
        LOG.warning("protection policy %s (%s): this cloud accepts the "
                    "metadata of %s's failback of it until %s",
                    policy["id"], policy["name"], policy["peer"],
                    options[WINDOW]["until"])
        return row

    def handle(self, peer, request):
        """``peer``'s metadata update of one of this cloud's images: the
        answer mapping.  InvalidInput on a request that makes no sense.
        """
        source = peer_requests.check_id(request, "source_image_id")
        policy_id = peer_requests.check_id(request, "policy_id")
        copy = peer_requests.check_id(request, "replica_image_id")
        digest = request.get("hash_value")
        wanted = check(request.get("metadata"))
        policy = self._policy(peer, policy_id)
        result, reason = REFUSED, None
        if not self._accepts(peer):
            reason = "this cloud does not accept metadata updates from " \
                     "%s ([peer:%s] accept_metadata_updates)" % (peer, peer)
        elif policy is None:
            reason = "this cloud replicates no such policy to %s" % peer
        elif not is_open(policy):
            result = CLOSED
            reason = "no failback of policy %s is open on this cloud (an " \
                     "administrator opens it there: openstack dtn " \
                     "failback %s)" % (policy_id, policy_id)
        if reason is None:
            reason, changed, kept = self._checked_apply(
                peer, policy_id, source, copy, digest, wanted)
        if reason is not None:
            LOG.warning("peer %s's metadata update of image %s %s: %s",
                        peer, source, result, reason)
            return {"result": result, "reason": reason}
        answer = {"result": UPDATED if changed else UNCHANGED}
        if changed:
            answer["changed"] = changed
            LOG.info("image %s: metadata from %s's replica %s applied (%s)",
                     source, peer, copy, ", ".join(changed))
        if kept:
            answer["kept"] = kept
            LOG.warning("image %s: %s's failback may not change %s: kept",
                        source, peer, ", ".join(kept))
        return answer

    def _checked_apply(self, peer, policy_id, source, copy, digest,
                       wanted):
        """(None, changed, kept) or (why not, None, None)."""
        replica = self.db.replica_get(catalog.OUTGOING, peer, source,
                                      policy_id=policy_id)
        if replica is None or replica.get("state") != catalog.CURRENT or \
                replica.get("replica_image_id") != copy:
            return ("this cloud did not replicate that image to %s for "
                    "that policy" % peer), None, None
        if not digest or replica.get("hash_value") != digest:
            return "the replica's data is not what this cloud sent", \
                None, None
        return self._apply(source, digest, wanted)

    def handle_close(self, peer, request):
        """``peer`` says its failback of a policy is complete: this
        cloud's window for it closes.
        """
        policy_id = peer_requests.check_id(request, "policy_id")
        policy = self._policy(peer, policy_id)
        if policy is None:
            return {"result": REFUSED, "reason": "this cloud replicates "
                    "no such policy to %s" % peer}
        if is_open(policy):
            options = dict(policy["options"])
            options[WINDOW] = dict(options[WINDOW],
                                   closed_at=records.iso(
                                       timeutils.utcnow()))
            self.db.policy_update(policy["id"], {"options": options})
            LOG.info("protection policy %s: %s's failback is complete; "
                     "this cloud accepts no more of its metadata",
                     policy_id, peer)
        return {"result": CLOSED}

    def _policy(self, peer, policy_id):
        """This cloud's primary policy ``policy_id`` towards ``peer``, or
        None.
        """
        try:
            policy = self.db.policy_get(policy_id)
        except exception.ProtectionPolicyNotFound:
            return None
        if policy.get("role") != PRIMARY or policy.get("peer") != peer:
            return None
        return policy

    def _accepts(self, peer):
        return peer_conf.section(self.conf, peer).accept_metadata_updates

    def _apply(self, image_id, digest, wanted):
        """(None, the fields changed, the properties kept) or (why not,
        None, None).
        """
        try:
            image = self.res.images.get(image_id)
        except exception.ImageNotFound:
            return "the image is not in this cloud's Glance", None, None
        if image.get("os_hash_value") != digest:
            return "the image's data changed on this cloud", None, None
        fields, remove, kept = changes(
            wanted, image, self.conf.protection.failback_properties)
        if not fields and not remove:
            return None, [], kept
        try:
            self.res.images.update(image_id, fields, remove)
        except (exception.InvalidInput, exception.Conflict) as exc:
            return "Glance refused it: %s" % exc, None, None
        return None, sorted(list(fields) + remove), kept
