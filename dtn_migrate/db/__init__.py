"""dtn-migrate's own database: migration records and their events.

:mod:`dtn_migrate.db.api` reads and writes them (oslo.db enginefacade);
:func:`dtn_migrate.db.migration.db_sync` creates and upgrades the tables
(alembic), as ``dtn-migrate-manage db sync`` does.
"""
