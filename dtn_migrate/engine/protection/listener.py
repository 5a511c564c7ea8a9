"""Glance's image notifications on this cloud's bus, for continuous
protection policies.

The engine listens in a pool of its own (``[protection] listener_pool``)
on Glance's exchange, so that other consumers still get every
notification.  A notification only says which image to look at: the
image is read again from Glance, so a late or repeated notification
cannot replicate stale metadata.  A notification that cannot be handled
(Glance or the database away) is logged and dropped: the next scan
catches up with it.
"""

import oslo_messaging as messaging
from oslo_log import log as logging

LOG = logging.getLogger(__name__)

EVENTS = ("image.activate", "image.update", "image.delete")


class ImageEndpoint:
    """Notifications of Glance's images (priority info)."""

    filter_rule = messaging.NotificationFilter(
        event_type=r"^image\.(activate|update|delete)$")

    def __init__(self, protection):
        self.protection = protection

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        image_id = payload.get("id") if isinstance(payload, dict) else None
        if not isinstance(image_id, str) or not image_id or \
                len(image_id) > 64:
            LOG.debug("ignored %s without an image id", event_type)
            return messaging.NotificationResult.HANDLED
        LOG.debug("%s of image %s from %s (message %s)", event_type,
                  image_id, publisher_id, (metadata or {}).get("message_id"))
        try:
            if event_type == "image.delete":
                self.protection.image_deleted(image_id)
            else:
                self.protection.image_changed(image_id)
        except Exception as exc:  # noqa: B902 - the next scan catches up
            LOG.warning("%s of image %s not handled (the next scan "
                        "catches up): %s", event_type, image_id, exc)
        return messaging.NotificationResult.HANDLED


def get_listener(conf, transport, protection):
    """A notification listener (not started) of ``protection``."""
    group = conf.protection
    targets = [messaging.Target(topic=topic, exchange=group.glance_exchange)
               for topic in group.notification_topics]
    return messaging.get_notification_listener(
        transport, targets, [ImageEndpoint(protection)],
        executor="threading", pool=group.listener_pool)
