"""alembic environment: runs on the connection dtn-migrate passes."""

from alembic import context

from dtn_migrate.db import models

config = context.config


def run_migrations_online():
    connection = config.attributes['connection']
    context.configure(
        connection=connection, target_metadata=models.Base.metadata,
        version_table=config.attributes['version_table'],
        render_as_batch=connection.dialect.name == 'sqlite')
    with context.begin_transaction():
        context.run_migrations()


run_migrations_online()
