"""RPC endpoints of the migration engine (topic dtn_migrate_engine)."""

import oslo_messaging as messaging
from oslo_log import log as logging

from dtn_migrate import exception

LOG = logging.getLogger(__name__)


class EngineManager:
    """Requests from operators (runbooks, the CLI, later the API) and
    notices from this cloud's DTN agent.

    API version history:

    * 1.0 - Initial version.
    * 1.1 - incoming_transfer takes ``attempt``: the import attempt the
      source waits for.
    """

    target = messaging.Target(version='1.1')

    def __init__(self, host, migrations):
        self.host = host
        self.migrations = migrations

    @messaging.expected_exceptions(exception.DtnMigrateException)
    def migrate(self, ctxt, peer=None, images=None, selector=None,
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
                                           request_id)
        except exception.DtnMigrateException as exc:
            LOG.warning("migration request to %s refused: %s", peer, exc)
            self.migrations._notify("error", {
                "request_id": request_id, "peer": peer, "images": images,
                "selector": selector, "state": "refused",
                "error": str(exc)})
            raise

    @messaging.expected_exceptions(exception.DtnMigrateException)
    def get_migration(self, ctxt, migration_id):
        return self.migrations.get(migration_id)

    @messaging.expected_exceptions(exception.DtnMigrateException)
    def list_migrations(self, ctxt, request_id=None, direction=None):
        return self.migrations.list(request_id, direction)

    @messaging.expected_exceptions(exception.DtnMigrateException)
    def cancel_migration(self, ctxt, migration_id):
        return self.migrations.cancel(migration_id)

    @messaging.expected_exceptions(exception.DtnMigrateException)
    def incoming_transfer(self, ctxt, transfer_id, peer, attempt=None):
        """Cast by this cloud's DTN agent when a peer starts sending, and
        when the source asks for the report of a later import attempt.
        """
        return self.migrations.incoming(transfer_id, peer, attempt)

    def ping(self, ctxt):
        return {"host": self.host}
