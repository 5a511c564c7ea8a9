"""Client side of the migration engine RPC API (topic dtn_migrate_engine).

Every call goes to any engine of the cloud on the topic (no server is
named): a cloud runs one engine, with its own database.
"""

import oslo_messaging as messaging

from dtn_migrate import rpc

TOPIC = 'dtn_migrate_engine'


class EngineAPI:
    """Calls to this cloud's ``dtn-migrate-engine``.

    API version history: see ``engine.manager.EngineManager``.
    """

    VERSION = '1.0'

    def __init__(self, timeout=60, retry=None, transport=None):
        target = messaging.Target(topic=TOPIC, version='1.0')
        self.client = rpc.get_client(target, version_cap=self.VERSION,
                                     timeout=timeout, retry=retry,
                                     transport=transport)

    def migrate(self, ctxt, peer, images=None, selector=None, options=None,
                request_id=None):
        """Start migrations of ``images`` (ids) or of the images matching
        ``selector`` ({"tag": ...} and/or {"properties": {...}}) to peer
        DTN ``peer``.  Returns the request with one migration per image.
        """
        return self.client.call(ctxt, 'migrate', peer=peer, images=images,
                                selector=selector, options=options,
                                request_id=request_id)

    def migrate_cast(self, ctxt, peer, images=None, selector=None,
                     options=None, request_id=None):
        """Like :meth:`migrate`, without waiting (runbooks pass a
        ``request_id`` to follow it).
        """
        self.client.cast(ctxt, 'migrate', peer=peer, images=images,
                         selector=selector, options=options,
                         request_id=request_id)

    def get_migration(self, ctxt, migration_id):
        """The record, with its ``events``."""
        return self.client.call(ctxt, 'get_migration',
                                migration_id=migration_id)

    def list_migrations(self, ctxt, request_id=None, direction=None,
                        filters=None, marker=None, limit=None,
                        sort_keys=None, sort_dirs=None):
        """Records of ``ctxt``'s project (all for an admin); the
        filters, marker and sort of ``dtn_migrate.db.api``
        """
        kwargs = {k: v for k, v in (
            ("filters", filters), ("marker", marker), ("limit", limit),
            ("sort_keys", sort_keys), ("sort_dirs", sort_dirs))
            if v is not None}
        return self.client.call(ctxt, 'list_migrations',
                                request_id=request_id, direction=direction,
                                **kwargs)

    def cancel_migration(self, ctxt, migration_id):
        return self.client.call(ctxt, 'cancel_migration',
                                migration_id=migration_id)

    def retry_migration(self, ctxt, migration_id):
        """Run a failed or cancelled outgoing migration again."""
        return self.client.call(
            ctxt, 'retry_migration', migration_id=migration_id)

    def list_peers(self, ctxt):
        """Health of the peer DTNs, from this cloud's DTN agent."""
        return self.client.call(ctxt, 'list_peers')

    def get_peer(self, ctxt, name):
        return self.client.call(ctxt, 'get_peer', name=name)

    def incoming_transfer(self, ctxt, transfer_id, peer, attempt=None):
        """From this cloud's DTN agent: a peer DTN sends ``transfer_id``,
        and (``attempt``) its source waits for the report of that
        import attempt.  A cast: the agent never waits for the engine.
        """
        self.client.cast(ctxt, 'incoming_transfer', transfer_id=transfer_id,
                         peer=peer, attempt=attempt)

    def transfer_event(self, ctxt, kind, transfer_id, name=None,
                       info=None, origin=None):
        """From this cloud's DTN agent: the latest ``info`` of ``kind``
        (see EngineManager.transfer_event) of ``transfer_id``.  A cast:
        the agent never waits for the engine.  To every engine of the
        cloud (fanout): whichever runs the migration now takes it.
        """
        self.client.prepare(fanout=True).cast(
            ctxt, 'transfer_event', kind=kind, transfer_id=transfer_id,
            name=name, info=info, origin=origin)

    # Protection policies.  ``values``: the fields of a policy
    # (see engine.protection.validation.check); replies are policy
    # records with ISO 8601 times.

    def create_policy(self, ctxt, values):
        """Create a protection policy owned by ``ctxt``'s project (or by
        ``values['project_id']`` for an admin).
        """
        return self.client.call(
            ctxt, 'create_policy', values=values)

    def update_policy(self, ctxt, policy_id, values):
        return self.client.call(
            ctxt, 'update_policy', policy_id=policy_id, values=values)

    def delete_policy(self, ctxt, policy_id):
        return self.client.call(
            ctxt, 'delete_policy', policy_id=policy_id)

    def sync_policy(self, ctxt, policy_id):
        """Replicate now what the policy selects and the peer lacks:
        {"policy": record, "migrations": [records started or reused]}.
        """
        return self.client.call(
            ctxt, 'sync_policy', policy_id=policy_id)

    def start_drill(self, ctxt, policy_id, clone=False):
        """Start a drill of the replicas this cloud holds for policy
        ``policy_id``; answers the drill record (state ``running``).
        """
        return self.client.call(
            ctxt, 'start_drill', policy_id=policy_id, clone=clone)

    def failover_policy(self, ctxt, policy_id):
        """On the cloud holding the replicas of ``policy_id``: become
        primary for its images and prepare the reverse policy.
        """
        return self.client.call(
            ctxt, 'failover_policy', policy_id=policy_id)

    def failback_policy(self, ctxt, policy_id):
        """Send back what changed since the failover; ``complete`` once
        nothing waits (then the policy is a replica again).
        """
        return self.client.call(
            ctxt, 'failback_policy', policy_id=policy_id)

    def peer_request(self, ctxt, peer, request, timeout=None):
        """From this cloud's DTN agent: peer DTN ``peer`` asks this cloud
        ``request`` (a mapping, e.g. a mirror deletion of a replica);
        answers a mapping.  ``timeout``: seconds to wait for the
        answer (default: the client's; None is not "for ever" here).
        """
        kwargs = {} if timeout is None else {"timeout": timeout}
        return self.client.prepare(**kwargs).call(
            ctxt, 'peer_request', peer=peer, request=request)

    def ping(self, ctxt):
        return self.client.call(ctxt, 'ping')
