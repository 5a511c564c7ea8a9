"""dtn-migrate's own database: migration records and their events;
protection policies, the images they select and the replica catalog.

:mod:`dtn_migrate.db.api` reads and writes them (oslo.db enginefacade;
the protection tables' queries are in :mod:`dtn_migrate.db.protection`);
:func:`dtn_migrate.db.migration.db_sync` creates and upgrades the tables
(alembic), as ``dtn-migrate-manage db sync`` does.
"""
