"""[database] options (oslo.db) of the engine and the API."""

from oslo_db import options as db_options

#: The embedded default; production uses MariaDB or PostgreSQL.
DEFAULT_CONNECTION = 'sqlite:////var/lib/dtn-migrate/engine.sqlite'


def register_opts(conf):
    db_options.set_defaults(conf, connection=DEFAULT_CONNECTION)


def list_opts():
    return {'database': db_options.database_opts}
