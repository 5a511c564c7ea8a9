"""Schema migrations of dtn-migrate's database (alembic).

There is no alembic.ini: :func:`alembic_config` points alembic at this
package.  dtn-migrate keeps its own version table,
``dtn_migrate_alembic_version``, because TaskFlow's persistence, which
lives in the same database, uses alembic's default one.
"""

import os

from alembic import command
from alembic import config as alembic_config_mod
from alembic import migration as alembic_migration
from oslo_db import exception as db_exc
from oslo_log import log as logging
import sqlalchemy as sa

from dtn_migrate.db import api as db_api
from dtn_migrate import exception

LOG = logging.getLogger(__name__)

VERSION_TABLE = 'dtn_migrate_alembic_version'
_HERE = os.path.dirname(os.path.abspath(__file__))


def alembic_config(connection=None):
    """An alembic Config for this package; ``connection``: an open
    SQLAlchemy connection the migrations run on.
    """
    config = alembic_config_mod.Config()
    config.set_main_option('script_location', _HERE)
    config.attributes['connection'] = connection
    config.attributes['version_table'] = VERSION_TABLE
    return config


def _engine(conf):
    url = db_api.utf8mb4(conf) if isinstance(conf, str) else \
        db_api.connection_url(conf)
    db_api.ensure_sqlite_dir(url)
    return sa.create_engine(url, poolclass=sa.pool.NullPool)


def db_sync(conf, revision='head'):
    """Upgrade the database of ``conf`` ([database] connection; or an
    SQLAlchemy URL) to ``revision`` (the latest by default).
    """
    engine = _engine(conf)
    try:
        with engine.begin() as connection:
            command.upgrade(alembic_config(connection), revision)
    except (sa.exc.OperationalError, db_exc.DBConnectionError) as exc:
        raise exception.DatabaseUnavailable(reason=str(exc))
    finally:
        engine.dispose()
    LOG.info("database %s at revision %s", db_api.safe_url(conf),
             db_version(conf))


def db_version(conf):
    """The database's current revision, or None (never synced)."""
    engine = _engine(conf)
    try:
        with engine.connect() as connection:
            context = alembic_migration.MigrationContext.configure(
                connection, opts={'version_table': VERSION_TABLE})
            return context.get_current_revision()
    except (sa.exc.OperationalError, db_exc.DBConnectionError) as exc:
        raise exception.DatabaseUnavailable(reason=str(exc))
    finally:
        engine.dispose()
