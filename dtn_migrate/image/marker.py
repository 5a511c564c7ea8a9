"""The import marker: which images of this cloud's Glance an import made.

An import sets two properties on the image it creates:

* ``dtn_migrate_transfer_id`` (:data:`MARKER`), the transfer's id, which
  the import looks for to find its image again (after a restart, to
  remove a half-imported one or a duplicate);
* ``dtn_migrate_import_seal`` (:data:`SEAL`), an HMAC-SHA256, under a
  key only this service holds (in its database), of the image's id,
  the transfer id, the peer it came from and the image's owner.

Any Glance user may set the marker on an image, or copy both properties
from an image they can see: an image counts as the import's only when
it is in the import's project and its seal is that of its own id (which
Glance gives no other image, deleted ones included) for this transfer
from this peer.  Other images carrying the marker are never reused,
deleted nor unprotected; each is logged.
"""

import hashlib
import hmac

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

#: Image property naming the transfer an import came from.
MARKER = "dtn_migrate_transfer_id"
#: Image property binding the marker to the image and to this service.
SEAL = "dtn_migrate_import_seal"
#: Both: what an import adds of its own, which failover removes and a
#: metadata comparison or a failback never takes as the image's.
PROPERTIES = (MARKER, SEAL)
#: Name of the seal's key among the service's keys (db.api.service_key).
KEY_NAME = "import-seal"


def seal(key, image_id, transfer_id, peer, owner):
    """The seal (hex) of image ``image_id`` imported from ``peer``'s
    ``transfer_id`` into project ``owner`` (None: the service's own),
    under ``key`` (bytes).
    """
    text = "\n".join(str(v or "") for v in (image_id, transfer_id, peer,
                                            owner))
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest()


def properties(key, image_id, transfer_id, peer, owner):
    """The properties an import sets on the image it creates."""
    return {MARKER: transfer_id,
            SEAL: seal(key, image_id, transfer_id, peer, owner)}


def genuine(key, image, transfer_id, peer, owner, project=None):
    """Whether ``image`` (a Glance dict) is one that this service
    imported from ``peer``'s ``transfer_id`` into ``owner`` (None: the
    service's own project, ``project`` when known).
    """
    project = owner or project
    if image.get(MARKER) != transfer_id or \
            (project is not None and image.get("owner") != project):
        return False
    expected = seal(key, image.get("id"), transfer_id, peer, owner)
    return hmac.compare_digest(expected, str(image.get(SEAL) or ""))


def find(images, key, transfer_id, peer, owner):
    """The images this service imported from ``peer``'s
    ``transfer_id`` into project ``owner`` (None: the service's own), of
    any status.  ``images`` is an ImageService; Glance is asked only for
    that project's images (any, when the service does not know its
    own).  Others that carry the marker are left out, each logged.
    """
    project = owner or images.own_project()
    found = []
    for image in images.find(MARKER, transfer_id, owner=project):
        if genuine(key, image, transfer_id, peer, owner, project):
            found.append(image)
        else:
            LOG.warning("image %s carries the marker of transfer %s but "
                        "is not this service's import of it from %s into "
                        "project %s: left alone", image.get("id"),
                        transfer_id, peer, project or "(its own)")
    return found
