"""What a request for an image gets when its project already migrated
the image to the same peer: that migration (reused), a 409, or a new
migration.

Looked at in this order, among the outgoing migrations of the image to
the peer by the caller's project (never another project's):

1. One running (queued or running): reused when the request asks for
   nothing else of it; a request with ``force``, or with options other
   than the running migration's (a request that need not be checked
   takes a checked one, one that serves no policy a policy's), is
   refused (MigrationInProgress, 409, naming it and what differs).
2. Unless ``force``: the newest complete one that left a verified copy
   of the same bytes on the peer (its peer image's hash is the image's
   ``os_hash_value``, and the replica catalog does not say that copy was
   deleted there) and whose copy is the one asked for (:func:`copy_is`):
   reused, whatever failed or was cancelled since.
3. Otherwise a new migration.  It resumes the transfer of the newest
   attempt when that one failed or was cancelled with the same data and
   options (what it staged, sent and the peer received is kept); with
   other data or options it has a transfer of its own.
"""

from dtn_migrate.common import states
from dtn_migrate.common import text
from dtn_migrate.engine.protection import catalog
from dtn_migrate.engine import requests
from dtn_migrate import exception

#: Options that make the peer's copy what it is: a complete migration
#: with others made another copy than the one asked for.
COPY_OPTIONS = ("keep_id", "visibility", "target_project")
#: Options a running migration is compared on besides those: how the
#: bytes move.
HOW_OPTIONS = ("mode", "transfer_options")
#: Options where a request takes more than the same value: a migration
#: checked (``verify``) for one that need not be, a policy's copy
#: (``protection``) for one that serves no policy.
LENIENT_OPTIONS = ("verify", "protection")
#: Complete migrations looked at for a copy to reuse, newest first.
LOOK_BACK = 50


def _value(opts, key, image):
    """Option ``key`` of ``opts`` as it acts on ``image``: a visibility
    not given is the source image's, a policy is its id.
    """
    value = (opts or {}).get(key, requests.OPTIONS[key][1])
    if key == "visibility" and value is None:
        return image.get("visibility")
    if key == "protection":
        return (value or {}).get("policy_id")
    return value


def differences(made, asked, image, keys):
    """What options ``asked`` (a request's) ask otherwise than ``made``
    (a migration's), in words: ``["visibility 'public' (it has
    'private')"]``.
    """
    out = []
    for key in keys:
        was, now = _value(made, key, image), _value(asked, key, image)
        if was != now:
            out.append("%s %s (it has %s)" % (key, _say(now), _say(was)))
    return out


def _takes(made, asked, image, key):
    """A request with ``asked`` takes what a migration with ``made`` does
    or did, for lenient option ``key``: checked when the request wants
    it checked; made for the request's policy when it serves one.
    """
    want = _value(asked, key, image)
    if key == "verify":
        return not want or bool(_value(made, key, image))
    return want is None or want == _value(made, key, image)


def _say(value):
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    return text.quote(value) if isinstance(value, str) else \
        text.shorten(repr(value))


def check_running(run, image, opts):
    """Raise MigrationInProgress when the request asks of ``run`` (a
    queued or running migration of ``image``) something it does not do:
    another copy (``force``), other data, or other options.
    """
    if opts.get("force"):
        reason = "force asks for another copy while it runs"
    elif run.get("os_hash_value") != image.get("os_hash_value"):
        reason = "it migrates other data (os_hash_value %s)" % \
            text.shorten(str(run.get("os_hash_value")), 16)
    else:
        made = run.get("options")
        differ = differences(made, opts, image, COPY_OPTIONS + HOW_OPTIONS)
        differ += differences(made, opts, image, [
            key for key in LENIENT_OPTIONS
            if not _takes(made, opts, image, key)])
        if not differ:
            return
        reason = "this request asks for %s" % ", ".join(differ)
    raise exception.MigrationInProgress(
        image_id=image["id"], peer=run["peer"],
        migration_id=run["migration_id"], state=run["state"],
        created_at=_time(run.get("created_at")), reason=reason)


def _time(value):
    return value.isoformat(timespec="seconds") + "Z" \
        if hasattr(value, "isoformat") else str(value)


def verified(done, image):
    """Complete migration ``done`` left on its peer a verified copy of
    the bytes ``image`` has now.
    """
    digest = image.get("os_hash_value")
    peer_image = done.get("peer_image") or {}
    return done.get("state") == states.COMPLETE and bool(digest) and \
        done.get("os_hash_value") == digest and \
        bool(peer_image.get("image_id")) and \
        peer_image.get("os_hash_value") == digest


def copy_is(done, image, opts):
    """The copy complete migration ``done`` made is the one ``opts``
    asks for: the same id choice, visibility and project on the peer;
    checked (metadata) when the request wants it checked; made for the
    request's policy, when it serves one (a request that serves none
    takes a policy's copy).  How the bytes moved (mode, transfer
    options) does not matter.
    """
    made = done.get("options") or {}
    return not differences(made, opts, image, COPY_OPTIONS) and \
        all(_takes(made, opts, image, key) for key in LENIENT_OPTIONS)


def deleted_on_peer(db, done):
    """The replica catalog says the copy ``done`` made is gone from the
    peer (a mirrored deletion).  A copy deleted there by other means is
    not known here: ``force`` sends the image again.
    """
    policy_id = _value(done.get("options"), "protection", {})
    row = db.replica_get(catalog.OUTGOING, done["peer"], done["image_id"],
                         policy_id=policy_id,
                         project_id=done.get("project_id"))
    return row is not None and row.get("state") == catalog.DELETED and \
        row.get("replica_image_id") == (done.get("peer_image") or {}).get(
            "image_id")


def copy_to_reuse(complete, image, opts, db):
    """The newest of ``complete`` (complete migrations, newest first)
    whose verified copy on the peer is the one asked for, or None.
    """
    for done in complete:
        if verified(done, image) and copy_is(done, image, opts) and \
                not deleted_on_peer(db, done):
            return done
    return None
