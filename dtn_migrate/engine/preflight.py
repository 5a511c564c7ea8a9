"""The preflight: before the first byte, the peer's cloud says whether
it would import an image.

A migration asks it first (the outgoing flow's ``preflight`` task), and
so does a protection policy when it is created.  The request travels
over the DTN link's request channel (``protection.peer_requests``): the
peer's agent checks its staging room for the transfer (the peer's
staging quota and free space, ``SinkServer.room_for``), then asks its
engine, which answers with the rules an import meets on arrival
(``import_rules.import_target``: the project map, the projects and
visibilities the peer may ask for) and whether the id that
``--keep-id`` keeps is free in its Glance.

The answer is an early warning, never a permission: the import checks
its rules again on arrival, whatever the peer was told.  A refusal is an
answer (``{"allowed": false, "reason": ...}``), told in words fit for
the asking cloud's users (what was refused, never what is allowed).
"""

from oslo_log import log as logging

from dtn_migrate.agent import requests as agent_requests
from dtn_migrate.common import states
from dtn_migrate.engine import import_rules
from dtn_migrate.engine.protection import peer_requests
from dtn_migrate.engine import requests
from dtn_migrate import exception
from dtn_migrate.image import marker

LOG = logging.getLogger(__name__)

#: The request's action.
ACTION = agent_requests.PREFLIGHT
#: The options of a migration that the peer's rules decide on.
OPTIONS = ("keep_id", "visibility", "target_project")


def request(options, source_project=None, image=None, transfer_id=None):
    """The preflight request of a migration of ``image`` (a descriptor;
    None for a protection policy, whose images are not known yet) as
    transfer ``transfer_id`` with ``options``, from ``source_project``
    (see ``outgoing.descriptor_payload``).
    """
    out = {"action": ACTION,
           "options": {k: options.get(k) for k in OPTIONS},
           "source_project": source_project or None}
    if image is not None:
        out.update(transfer_id=transfer_id, size=image["size"],
                   image={"id": image.get("id"),
                          "visibility": image.get("visibility")})
    return out


def refused(peer, what, answer):
    """PreflightRefused if ``answer`` (the peer's) refuses; PeerUnreachable
    if it is no answer to a preflight.
    """
    allowed = answer.get("allowed")
    if allowed is True:
        return
    reason = answer.get("reason")
    if allowed is not False or not isinstance(reason, str):
        raise exception.PeerUnreachable(
            peer=peer, reason="it answered no preflight (%s)"
                              % ", ".join(sorted(map(str, answer))))
    raise exception.PreflightRefused(peer=peer, what=what,
                                     reason=reason[:500])


def ask(conf, res, peer, req, what):
    """Ask ``peer`` the preflight ``req`` (see :func:`request`) about
    ``what`` (words for the refusal: "the import of image X").  Returns
    when it would import; raises PreflightRefused when it would not,
    PeerUnreachable (or one of ``base.TRANSIENT_RPC``) when it does not
    answer.
    """
    refused(peer, what, peer_requests.ask(conf, res, peer, req))


# The receiving side.
def _checked(req):
    """(options, source project, image, transfer id) of a request from
    a peer (InvalidInput for one that is malformed).
    """
    opts = req.get("options")
    if not isinstance(opts, dict):
        raise exception.InvalidInput(reason="a preflight has options")
    options = {}
    for key in ("visibility", "target_project"):
        if opts.get(key) is not None:
            options[key] = requests.project(opts[key], "preflight " + key)
    options["keep_id"] = opts.get("keep_id") is True
    source = req.get("source_project")
    if source is not None:
        source = requests.project(source, "preflight source_project")
    image = req.get("image")
    transfer_id = None
    if image is not None:
        if not isinstance(image, dict):
            raise exception.InvalidInput(reason="a preflight's image is a "
                                                "mapping")
        image = {k: requests.project(image[k], "preflight image " + k)
                 for k in ("id", "visibility")
                 if image.get(k) is not None}
        if req.get("transfer_id") is not None:
            transfer_id = requests.uuid_hex(req["transfer_id"],
                                            "preflight transfer_id")
    return options, source, image, transfer_id


def _kept_id_taken(res, peer, image_id, transfer_id, owner):
    """Why ``image_id`` cannot be kept in this cloud's Glance, or None:
    an image of that id that is not this transfer's own import (which
    a retried migration resumes).
    """
    try:
        found = res.images.get(image_id)
    except exception.ImageNotFound:
        return None
    if transfer_id is not None and marker.genuine(
            res.seal_key(), found, transfer_id, peer, owner):
        return None
    return ("an image with id %s exists in the peer's Glance: the id "
            "cannot be kept" % image_id)


def answer(conf, res, peer, req):
    """This cloud's answer to ``peer``'s preflight ``req``: whether an
    import would be allowed by the rules it meets on arrival.
    """
    options, source, image, transfer_id = _checked(req)
    try:
        target = import_rules.import_target(
            conf, peer, image or {}, options, transfer_id, source)
    except exception.ImportNotAllowed as exc:
        return {"allowed": False, "reason": str(exc)}
    if image and options["keep_id"] and image.get("id"):
        why = _kept_id_taken(res, peer, image["id"], transfer_id,
                             target["owner"])
        if why is not None:
            LOG.warning("preflight of transfer %s from %s refused: %s",
                        transfer_id, peer, why)
            return {"allowed": False, "reason": why}
    return {"allowed": True}


def is_preflight(req):
    """Whether ``req`` (a peer's request) is a preflight."""
    return isinstance(req, dict) and req.get("action") == ACTION


#: The stage a refused or unanswered preflight fails.
STAGE = states.PREFLIGHT
