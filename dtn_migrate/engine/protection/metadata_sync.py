"""Failback of metadata changes: a replica whose data did not change on
the DR cloud, but whose name, tags, properties, min_disk or min_ram did,
sends those back without its bytes.

During a failback, the DR cloud (B) sends, for each replica of the
policy that it promoted, the replica's metadata in an
``update_metadata`` request over the DTN link (like a mirror deletion;
see ``deletions``).  The source cloud (A) applies it to its own image
only when its catalog says that image was replicated to B as that very
replica, for that policy, with the same verified hash, and A's image
still has that hash: then B's metadata wins, field by field, and A
answers ``updated`` (with the fields it changed) or ``unchanged``.
Anything else is ``refused`` with the reason, and so is every update
when A's ``[peer:<name>] accept_metadata_updates`` is false.
Visibility, owner, ``protected`` and ``os_hidden`` stay each cloud's
own.
"""

from oslo_log import log as logging

from dtn_migrate.conf import peer as peer_conf
from dtn_migrate.engine.protection import catalog
from dtn_migrate.engine.protection import peer_requests
from dtn_migrate.engine.tasks import base
from dtn_migrate import exception
from dtn_migrate.image import metadata

LOG = logging.getLogger(__name__)

ACTION = "update_metadata"
UPDATED, UNCHANGED, REFUSED = "updated", "unchanged", "refused"
ANSWERS = (UPDATED, UNCHANGED, REFUSED)
#: The import marker, never sent back (failover removes it anyway).
MARKER = "dtn_migrate_transfer_id"
FIELDS = ("name", "min_disk", "min_ram")
MAX_TAGS = 128
MAX_PROPERTIES = 256
MAX_TEXT = 255
MAX_VALUE = 65535


def _invalid(reason):
    return exception.InvalidInput(reason="a metadata update: %s" % reason)


def of(image):
    """What travels back of ``image`` (a Glance dict)."""
    desc = metadata.describe(image)
    return {"name": desc.get("name"), "min_disk": desc.get("min_disk"),
            "min_ram": desc.get("min_ram"), "tags": desc["tags"],
            "properties": {k: v for k, v in desc["properties"].items()
                           if k != MARKER}}


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
        if not 0 < len(key) <= MAX_TEXT or key == MARKER or \
                metadata.is_glance_owned(key):
            raise _invalid("property %r may not be set" % key[:64])
        if not isinstance(item, str) or len(item) > MAX_VALUE:
            raise _invalid("property %r is not text of at most %d "
                           "characters" % (key[:64], MAX_VALUE))
    return value


def changes(wanted, image):
    """(fields to set, properties to remove) to make ``image`` carry
    ``wanted`` (checked metadata).
    """
    current = of(image)
    out = {k: wanted[k] for k in FIELDS
           if wanted[k] is not None and wanted[k] != current[k]}
    if sorted(wanted["tags"]) != current["tags"]:
        out["tags"] = sorted(wanted["tags"])
    for key, value in wanted["properties"].items():
        if current["properties"].get(key) != value:
            out[key] = value
    remove = sorted(set(current["properties"]) - set(wanted["properties"]))
    return out, remove


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
        if result == REFUSED:
            LOG.warning("failback of %s: %s kept the metadata of image %s: "
                        "%s", policy["id"], policy["peer"],
                        replica["source_image_id"], answer.get("reason"))
        elif result == UPDATED:
            LOG.info("failback of %s: metadata of image %s sent back to "
                     "%s (%s)", policy["id"], replica["source_image_id"],
                     policy["peer"], ", ".join(answer.get("changed") or ()))
        return result

    # The source cloud.
    def handle(self, peer, request):
        """``peer``'s metadata update of one of this cloud's images: the
        answer mapping.  InvalidInput on a request that makes no sense.
        """
        source = peer_requests.check_id(request, "source_image_id")
        policy_id = peer_requests.check_id(request, "policy_id")
        copy = peer_requests.check_id(request, "replica_image_id")
        digest = request.get("hash_value")
        wanted = check(request.get("metadata"))
        replica = self.db.replica_get(catalog.OUTGOING, peer, source,
                                      policy_id=policy_id)
        reason = None
        if not self._accepts(peer):
            reason = "this cloud does not accept metadata updates from " \
                     "%s ([peer:%s] accept_metadata_updates)" % (peer, peer)
        elif replica is None or replica.get("state") != catalog.CURRENT or \
                replica.get("replica_image_id") != copy:
            reason = "this cloud did not replicate that image to %s for " \
                     "that policy" % peer
        elif not digest or replica.get("hash_value") != digest:
            reason = "the replica's data is not what this cloud sent"
        if reason is None:
            reason, changed = self._apply(source, digest, wanted)
        if reason is not None:
            LOG.warning("peer %s's metadata update of image %s refused: %s",
                        peer, source, reason)
            return {"result": REFUSED, "reason": reason}
        if not changed:
            return {"result": UNCHANGED}
        LOG.info("image %s: metadata from %s's replica %s applied (%s)",
                 source, peer, copy, ", ".join(changed))
        return {"result": UPDATED, "changed": changed}

    def _accepts(self, peer):
        return peer_conf.section(self.conf, peer).accept_metadata_updates

    def _apply(self, image_id, digest, wanted):
        """(None, the fields changed) or (why not, None)."""
        try:
            image = self.res.images.get(image_id)
        except exception.ImageNotFound:
            return "the image is not in this cloud's Glance", None
        if image.get("os_hash_value") != digest:
            return "the image's data changed on this cloud", None
        fields, remove = changes(wanted, image)
        if not fields and not remove:
            return None, []
        try:
            self.res.images.update(image_id, fields, remove)
        except (exception.InvalidInput, exception.Conflict) as exc:
            return "Glance refused it: %s" % exc, None
        return None, sorted(list(fields) + remove)
