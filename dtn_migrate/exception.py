"""Exceptions of the dtn-migrate services, safe to send over RPC.

oslo.messaging re-raises these on the RPC client (their module is in
``rpc.ALLOWED_EXMODS``), so an operator's CLI shows the agent's own
message rather than a generic remote error.
"""

from dtn_migrate.i18n import _


class DtnMigrateException(Exception):
    msg_fmt = _("An unknown exception occurred.")
    code = 500

    def __init__(self, message=None, **kwargs):
        self.kwargs = kwargs
        if not message:
            try:
                message = self.msg_fmt % kwargs
            except (KeyError, TypeError):
                message = self.msg_fmt
        self.message = message
        super().__init__(message)


class Invalid(DtnMigrateException):
    msg_fmt = _("Unacceptable parameters.")
    code = 400


class ServiceUnavailable(DtnMigrateException):
    """A service this one needs (the image service, the database, the
    engine, a peer DTN) cannot be reached now: try again (503).
    """

    msg_fmt = _("A service is unavailable: %(reason)s")
    code = 503


class DatabaseUnavailable(ServiceUnavailable):
    msg_fmt = _("The database is unavailable: %(reason)s")


class InvalidInput(Invalid):
    msg_fmt = _("Invalid input: %(reason)s")


class NotFound(DtnMigrateException):
    msg_fmt = _("Resource could not be found.")
    code = 404


class TransferNotFound(NotFound):
    msg_fmt = _("Transfer %(transfer_id)s could not be found.")


class PeerNotFound(NotFound):
    msg_fmt = _("Unknown peer DTN %(peer)s (configured peers: %(known)s).")


class Conflict(DtnMigrateException):
    msg_fmt = _("Conflicting request.")
    code = 409


class TransferConflict(Conflict):
    msg_fmt = _("Transfer %(transfer_id)s exists with different "
                "parameters.")


class ConfigError(DtnMigrateException):
    msg_fmt = _("Configuration error: %(reason)s")


class ImageNotFound(NotFound):
    msg_fmt = _("Image %(image_id)s could not be found in %(cloud)s.")


class ImageNotActive(Invalid):
    msg_fmt = _("Image %(image_id)s is %(status)s, not active; only active "
                "images can be migrated.")
    code = 409


class ImageUnsupported(Invalid):
    msg_fmt = _("Image %(image_id)s cannot be migrated: %(reason)s")


class ImageServiceUnavailable(ServiceUnavailable):
    msg_fmt = _("The image service of %(cloud)s is unavailable: "
                "%(reason)s")
    code = 503


class ImageServiceAuthFailed(DtnMigrateException):
    msg_fmt = _("Authentication to the image service of %(cloud)s "
                "failed: %(reason)s")
    code = 401


class ImageHashMismatch(DtnMigrateException):
    msg_fmt = _("Image %(image_id)s: %(where)s has os_hash_value "
                "%(actual)s, expected %(expected)s.")
    code = 500


class MigrationNotFound(NotFound):
    msg_fmt = _("Migration %(migration_id)s could not be found.")


class MigrationFailed(DtnMigrateException):
    msg_fmt = _("Migration %(migration_id)s failed: %(reason)s")


# What a migration's stages raise inside the engine.

class MigrationCancelled(DtnMigrateException):
    msg_fmt = _("Migration %(migration_id)s was cancelled.")


class StageStalled(DtnMigrateException):
    msg_fmt = _("Migration %(migration_id)s: %(stage)s made no progress "
                "for %(seconds)d s.")


class StageFailed(DtnMigrateException):
    """A stage gave up because another stage of the migration failed
    (the other stage's failure is the one to report).
    """

    msg_fmt = _("Migration %(migration_id)s: %(stage)s stopped: "
                "%(reason)s.")


class MetadataMismatch(DtnMigrateException):
    msg_fmt = _("Image %(image_id)s: its metadata at the peer differs: "
                "%(differences)s.")


class PeerUnreachable(ServiceUnavailable):
    msg_fmt = _("Peer DTN %(peer)s cannot be reached: %(reason)s")
    code = 503


class PersistenceUnavailable(DatabaseUnavailable):
    """The database, as the engine's flows and lock meet it."""

    msg_fmt = _("The engine's persistence database is unavailable: "
                "%(reason)s")


class PersistenceInUse(DtnMigrateException):
    msg_fmt = _("Another dtn-migrate-engine uses the persistence database "
                "%(database)s (%(holder)s): run one engine per persistence "
                "database.")
    code = 409


class Forbidden(DtnMigrateException):
    msg_fmt = _("Forbidden: %(reason)s")
    code = 403


class PolicyNotAuthorized(Forbidden):
    msg_fmt = _("Policy does not allow %(action)s to be performed.")


class ImageNotReadable(Forbidden):
    msg_fmt = _("Image %(image_id)s cannot be read by the caller in "
                "%(cloud)s.")


class MarkerNotFound(Invalid):
    msg_fmt = _("Marker %(marker)s could not be found.")


class MigrationStateConflict(Conflict):
    msg_fmt = _("Migration %(migration_id)s is %(state)s: cannot "
                "%(action)s it.")


class MigrationSuspended(Conflict):
    """This engine stopped working on a migration that another engine
    holds now (its claim was lost): nothing more of it is written or
    undone here.
    """

    msg_fmt = _("Migration %(migration_id)s is suspended on this engine: "
                "%(reason)s")


class MigrationClaimLost(Conflict):
    """Another engine claimed the migration since this one did (its
    epoch is the row's no longer): this engine must stop working on it,
    and writes nothing of it (see db.api's migration_claim).
    """

    msg_fmt = _("Migration %(migration_id)s was claimed by another engine: "
                "this one holds epoch %(held)s, the row is at epoch "
                "%(found)s (owner %(owner)s).")


class StaleEpoch(MigrationClaimLost):
    """A DTN agent refused an engine's command about a transfer: a later
    claim of its migration (another engine's) sent one already (see
    dtn_migrate.agent.fences).
    """

    msg_fmt = _("Transfer %(transfer_id)s: %(command)s of claim epoch "
                "%(epoch)s refused, a later claim (epoch %(held)s) holds "
                "it.")


class MigrationInProgress(Conflict):
    """A request for an image that a migration of the caller's project
    is migrating to the same peer, asking for something else of it.
    """

    msg_fmt = _("Image %(image_id)s is being migrated to %(peer)s by "
                "migration %(migration_id)s (%(state)s since "
                "%(created_at)s): %(reason)s; wait for it to end, or "
                "cancel it, and ask again.")


class ImportNotAllowed(Forbidden):
    msg_fmt = _("Peer %(peer)s may not import %(what)s: %(reason)s")


class PreflightRefused(Conflict):
    """The peer's cloud answered a preflight (see
    ``dtn_migrate.engine.preflight``) that it would not take the image:
    nothing was sent.
    """
    msg_fmt = _("Peer %(peer)s refused %(what)s before any byte was sent: "
                "%(reason)s")


class EngineUnavailable(ServiceUnavailable):
    msg_fmt = _("The migration engine did not answer: %(reason)s")


class UnsupportedMediaType(Invalid):
    msg_fmt = _("Content-Type %(content_type)s is not supported: send "
                "application/json.")
    code = 415


class ProtectionPolicyNotFound(NotFound):
    msg_fmt = _("Protection policy %(policy_id)s could not be found.")


class ProtectionPolicyExists(Conflict):
    msg_fmt = _("A protection policy named %(name)s exists in project "
                "%(project_id)s.")


class ProtectionPolicyConflict(Conflict):
    msg_fmt = _("Protection policy %(policy_id)s is %(state)s: cannot "
                "%(action)s it.")


class DrillNotFound(NotFound):
    msg_fmt = _("Drill %(drill_id)s could not be found.")


class DrillConflict(Conflict):
    msg_fmt = _("No drill of policy %(policy_id)s starts now: %(reason)s")
