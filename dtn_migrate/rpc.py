"""oslo.messaging transport, servers and clients."""

import oslo_messaging as messaging

from dtn_migrate import conf as dtn_conf

CONF = dtn_conf.CONF
ALLOWED_EXMODS = ['dtn_migrate.exception']
CONTROL_EXCHANGE = 'dtn_migrate'
TRANSPORT = None
NOTIFICATION_TRANSPORT = None


def init(conf=CONF):
    global TRANSPORT, NOTIFICATION_TRANSPORT
    TRANSPORT = messaging.get_rpc_transport(
        conf, allowed_remote_exmods=ALLOWED_EXMODS)
    NOTIFICATION_TRANSPORT = messaging.get_notification_transport(
        conf, allowed_remote_exmods=ALLOWED_EXMODS)


def cleanup():
    global TRANSPORT, NOTIFICATION_TRANSPORT
    for transport in (TRANSPORT, NOTIFICATION_TRANSPORT):
        if transport is not None:
            transport.cleanup()
    TRANSPORT = NOTIFICATION_TRANSPORT = None


def get_server(target, endpoints, transport=None):
    """An RPC server on ``transport`` (default: the service's)."""
    access_policy = messaging.DefaultRPCAccessPolicy
    return messaging.get_rpc_server(transport or TRANSPORT, target,
                                    endpoints, executor='threading',
                                    access_policy=access_policy)


def get_client(target, version_cap=None, timeout=None, retry=None,
               transport=None):
    """An RPC client on ``transport`` (default: the service's)."""
    return messaging.get_rpc_client(transport or TRANSPORT, target,
                                    version_cap=version_cap,
                                    timeout=timeout, retry=retry)


def get_notifier(publisher_id):
    """Notifier of ``publisher_id``; its driver and topics come from
    ``[oslo_messaging_notifications]`` (no driver: notifications off).
    """
    return messaging.Notifier(NOTIFICATION_TRANSPORT,
                              publisher_id=publisher_id)
