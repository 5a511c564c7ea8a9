"""RPC endpoints of the migration engine (topic dtn_migrate_engine).

The engine trusts its cloud's bus: whoever may publish on the engine's
topic may call it with any context, an administrator's included (there
is no token the engine could check).  The bus must therefore be the
cloud's own, authenticated (its own RabbitMQ vhost and credentials,
TLS), open to this cloud's dtn-migrate services only.  What the engine
does check: a user-facing call must carry a context that names its
caller (:func:`dtn_migrate.context.from_rpc` refuses an empty one), and
each is logged with its caller (user, project, request id).  The calls
of this cloud's DTN agent (incoming_transfer, transfer_event,
peer_request) and ping take no context.
"""

import functools

import oslo_messaging as messaging
from oslo_log import log as logging

from dtn_migrate import context as context_mod
from dtn_migrate.engine import events as events_mod
from dtn_migrate.engine import preflight
from dtn_migrate.engine import records
from dtn_migrate.engine.tasks import base
from dtn_migrate import exception

LOG = logging.getLogger(__name__)


def _scope(ctx):
    """The project whose migrations ``ctx`` may see: None for an admin
    (or a service context of this cloud's own components).
    """
    return None if ctx.is_admin else ctx.project_id


def user_facing(method):
    """An endpoint of the operators' requests: its context, which must
    name the caller (else Forbidden), is a RequestContext by the time
    ``method`` runs, and the call is logged with its caller.
    """
    @functools.wraps(method)
    def endpoint(self, ctxt, *args, **kwargs):
        ctx = context_mod.from_rpc(ctxt)
        LOG.info("%s by %s", method.__name__, context_mod.caller(ctx))
        return method(self, ctx, *args, **kwargs)
    return endpoint


class EngineManager:
    """Requests from operators (the API, dtn-migrate-manage) and notices
    from this cloud's DTN agent.

    API version history:

    * 1.0 - Initial version.

    User-facing calls (``user_facing``) refuse an empty context (it
    was taken for an administrator's): callers on the bus alone send
    ``context.get_service_context(<component>)``.
    """

    target = messaging.Target(version='1.0')

    def __init__(self, host, migrations, protection=None, drills=None,
                 failovers=None):
        self.host = host
        self.migrations = migrations
        self.protection = protection
        self.drills = drills
        self.failovers = failovers

    @messaging.expected_exceptions(exception.DtnMigrateException)
    @user_facing
    def migrate(self, ctx, peer=None, images=None, selector=None,
                options=None, request_id=None, **unknown):
        """Migrate images (ids, or those a selector matches) to ``peer``.

        Every image is checked before any migration starts; a request
        for an image already migrating (or migrated, unchanged) to the
        same peer returns that migration instead of a new one.
        """
        try:
            if unknown:
                raise exception.InvalidInput(
                    reason="unknown arguments: %s"
                           % ", ".join(sorted(map(str, unknown))))
            return self.migrations.request(peer, images, selector, options,
                                           request_id, context=ctx)
        except exception.DtnMigrateException as exc:
            LOG.warning("migration request to %s refused: %s", peer, exc)
            self.migrations.notify("error", {
                "request_id": request_id, "peer": peer, "images": images,
                "selector": selector, "state": "refused",
                "project_id": ctx.project_id, "error": str(exc)})
            raise

    @messaging.expected_exceptions(exception.DtnMigrateException)
    @user_facing
    def get_migration(self, ctx, migration_id):
        record = self.migrations.get(migration_id, _scope(ctx))
        return records.to_rpc(
            record, self.migrations.events(record["migration_id"]))

    @messaging.expected_exceptions(exception.DtnMigrateException)
    @user_facing
    def list_migrations(self, ctx, request_id=None, direction=None,
                        filters=None, marker=None, limit=None,
                        sort_keys=None, sort_dirs=None):
        if filters is not None and not isinstance(filters, dict):
            raise exception.InvalidInput(reason="filters must be a mapping")
        return [records.to_rpc(r) for r in self.migrations.list(
            request_id, direction, filters, marker, limit, sort_keys,
            sort_dirs, project_id=_scope(ctx))]

    @messaging.expected_exceptions(exception.DtnMigrateException)
    @user_facing
    def cancel_migration(self, ctx, migration_id):
        return records.to_rpc(
            self.migrations.cancel(migration_id, _scope(ctx)))

    @messaging.expected_exceptions(exception.DtnMigrateException)
    @user_facing
    def retry_migration(self, ctx, migration_id):
        return records.to_rpc(
            self.migrations.retry(migration_id, _scope(ctx)))

    @messaging.expected_exceptions(exception.DtnMigrateException)
    @user_facing
    def list_peers(self, ctx):
        """Health of every peer DTN, as this cloud's DTN agent sees it."""
        res = self.migrations.res
        return res.agent.peer_health(base.CTXT, res.agent_host)

    @messaging.expected_exceptions(exception.DtnMigrateException)
    @user_facing
    def get_peer(self, ctx, name):
        res = self.migrations.res
        found = res.agent.peer_health(base.CTXT, res.agent_host, peer=name)
        for item in found or ():
            if item.get("name") == name:
                return item
        raise exception.PeerNotFound(peer=name, known=", ".join(
            str(i.get("name")) for i in found or ()) or "none")

    @messaging.expected_exceptions(exception.DtnMigrateException)
    def incoming_transfer(self, ctxt, transfer_id, peer, attempt=None):
        """Cast by this cloud's DTN agent when a peer starts sending, and
        when the source asks for the report of a later import attempt.
        """
        return records.to_rpc(
            self.migrations.incoming(transfer_id, peer, attempt))

    def transfer_event(self, ctxt, kind, transfer_id, name=None,
                       info=None, origin=None):
        """Cast by this cloud's DTN agent: the latest ``info`` of
        ``kind`` (watermark: of incoming file ``name``; transfer: the
        status of an outgoing transfer; report: the peer's import
        report, or None) of ``transfer_id``; ``origin``: [agent run,
        event number], so that an event handled after a later one of the
        same key is dropped.  Stages waiting for it wake up; nothing is
        answered.
        """
        try:
            events_mod.check_event(kind, transfer_id, name, info)
            origin = events_mod.check_origin(origin)
        except ValueError as exc:
            LOG.warning("ignored a transfer event: %s", exc)
            return
        self.migrations.res.events.post(
            events_mod.key(kind, transfer_id, name), info, origin=origin)

    # Protection policies; reads go to the database (the API).
    def _protection(self):
        if self.protection is None:
            raise exception.ConfigError(
                reason="this engine runs no protection policies")
        return self.protection

    @messaging.expected_exceptions(exception.DtnMigrateException)
    @user_facing
    def create_policy(self, ctx, values=None):
        return self._protection().create(ctx, values)

    @messaging.expected_exceptions(exception.DtnMigrateException)
    @user_facing
    def update_policy(self, ctx, policy_id=None, values=None):
        return self._protection().update(ctx, policy_id, values)

    @messaging.expected_exceptions(exception.DtnMigrateException)
    @user_facing
    def delete_policy(self, ctx, policy_id=None):
        self._protection().delete(ctx, policy_id)

    @messaging.expected_exceptions(exception.DtnMigrateException)
    @user_facing
    def sync_policy(self, ctx, policy_id=None):
        return self._protection().sync(ctx, policy_id)

    @messaging.expected_exceptions(exception.DtnMigrateException)
    @user_facing
    def failover_policy(self, ctx, policy_id=None):
        return self._failover().failover(ctx, policy_id)

    @messaging.expected_exceptions(exception.DtnMigrateException)
    @user_facing
    def failback_policy(self, ctx, policy_id=None):
        return self._failover().failback(ctx, policy_id)

    def _failover(self):
        if self.failovers is None:
            raise exception.ConfigError(
                reason="this engine runs no protection policies")
        return self.failovers

    @messaging.expected_exceptions(exception.DtnMigrateException)
    @user_facing
    def start_drill(self, ctx, policy_id=None, clone=False):
        if self.drills is None:
            raise exception.ConfigError(
                reason="this engine runs no drills")
        return self.drills.start(ctx, policy_id, clone)

    # Requests of peer clouds.
    @messaging.expected_exceptions(exception.DtnMigrateException)
    def peer_request(self, ctxt, peer=None, request=None):
        """The answer to ``request`` (a mapping), which peer DTN
        ``peer`` sent this cloud's agent, authenticated: a migration's
        preflight (see ``preflight``), the deletion of a replica, the
        metadata of a failback (see ``protection.peer_requests``).
        """
        if not isinstance(peer, str) or not peer:
            raise exception.InvalidInput(reason="peer must be a peer DTN "
                                                "name")
        if preflight.is_preflight(request):
            # Asked before a migration's first byte, protection or not.
            return preflight.answer(self.migrations.conf,
                                    self.migrations.res, peer, request)
        return self._protection().peer_request(peer, request)

    def ping(self, ctxt):
        return {"host": self.host}
