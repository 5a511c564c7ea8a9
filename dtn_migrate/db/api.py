"""Reading and writing dtn-migrate's tables.

The module functions use a module-level :class:`Database`, set by
:func:`configure`; a process that serves several clouds (the demo, some
tests) builds one :class:`Database` per cloud instead.  Each function
runs in its own oslo.db enginefacade transaction (writer or reader) and
returns plain dicts: every column by name, datetimes as naive UTC
datetimes, ``options`` decoded.  A database that cannot be reached
raises :class:`~dtn_migrate.exception.DatabaseUnavailable`.
"""

import os
import secrets
import threading
import uuid

from oslo_db import exception as db_exc
from oslo_db.sqlalchemy import enginefacade
from oslo_log import log as logging
from oslo_utils import timeutils
import sqlalchemy as sa

from dtn_migrate.conf import database as database_conf
from dtn_migrate.db import common
from dtn_migrate.db import drills
from dtn_migrate.db import models
from dtn_migrate.db import protection
from dtn_migrate import exception

LOG = logging.getLogger(__name__)

#: Keys a listing may sort on.
SORT_KEYS = ('created_at', 'updated_at', 'state', 'image_name', 'peer',
             'progress', 'id')
SORT_DIRS = common.SORT_DIRS
DEFAULT_SORT = (['created_at', 'id'], ['desc', 'desc'])
#: Filters of a listing: column filters (a value or a list of values).
FILTER_KEYS = ('state', 'image_id', 'peer', 'direction', 'request_id',
               'transfer_id', 'project_id', 'cleanup')
#: Columns holding JSON, decoded to dicts in rows.
_JSON_COLUMNS = ('options', 'details')
#: Sort keys that are never null in a row the engine wrote.
_NOT_NULL = frozenset(('id', 'state', 'created_at', 'updated_at'))


def utf8mb4(url):
    """URL, talking utf8mb4 when it is MySQL's or MariaDB's.

    The tables are utf8mb4, but oslo.db (and devstack's URLs) ask for
    ``charset=utf8``, MySQL's 3-byte utf8: a filter holding a 4-byte
    character (an emoji) then fails with "Illegal mix of collations".
    """
    if not url.startswith('mysql'):
        return url
    parsed = sa.engine.make_url(url)
    if parsed.query.get('charset') in (None, 'utf8', 'utf8mb3'):
        parsed = parsed.update_query_dict({'charset': 'utf8mb4'})
    return parsed.render_as_string(hide_password=False)


def connection_url(conf):
    """[database] connection, MySQL's in utf8mb4 (see :func:`utf8mb4`).
    """
    return utf8mb4(_connection_url(conf))


def _connection_url(conf):
    try:
        url = conf.database.connection
    except AttributeError:          # no [database] group (some tests)
        url = None
    return url or database_conf.DEFAULT_CONNECTION


def safe_url(conf_or_url):
    url = conf_or_url if isinstance(conf_or_url, str) else \
        connection_url(conf_or_url)
    if url.startswith('sqlite'):
        return url
    return sa.engine.make_url(url).render_as_string(hide_password=True)


def sqlite_path(url):
    """The file of an SQLite URL, or None."""
    prefix = 'sqlite:///'
    if url.startswith(prefix) and url != prefix and \
            ':memory:' not in url:
        return url[len(prefix):]
    return None


def ensure_sqlite_dir(url):
    directory = os.path.dirname(sqlite_path(url) or '')
    if directory:
        os.makedirs(directory, exist_ok=True)


def serialize_sqlite(engine):
    """Make every transaction on an SQLite ``engine`` take the write lock
    when it begins (BEGIN IMMEDIATE), waiting up to 30 s for it.

    SQLite refuses at once (``database is locked``, without waiting) a
    transaction that read and then wants to write while another one
    holds a read lock: with the engine's threads and TaskFlow writing
    the same file, transactions must queue from their start instead.
    """
    if engine.dialect.name != 'sqlite':
        return engine

    @sa.event.listens_for(engine, 'connect', insert=True)
    def _connect(dbapi_connection, record):
        dbapi_connection.isolation_level = None     # we say BEGIN
        cursor = dbapi_connection.cursor()
        cursor.execute('PRAGMA busy_timeout = 30000')
        cursor.close()

    # Instead of oslo.db's own (plain) BEGIN.
    for listener in list(engine.dispatch.begin):
        sa.event.remove(engine, 'begin', listener)

    @sa.event.listens_for(engine, 'begin')
    def _begin(connection):
        if 'in_transaction' not in connection.info:
            connection.exec_driver_sql('BEGIN IMMEDIATE')
            connection.info['in_transaction'] = True

    @sa.event.listens_for(engine, 'commit')
    @sa.event.listens_for(engine, 'rollback')
    def _end(connection):
        connection.info.pop('in_transaction', None)
    return engine


_Context = common.Context
_wrap = common.wrap
_as_list = common.as_list


def _row(obj):
    return common.row(obj, models.MIGRATION_COLUMNS, _JSON_COLUMNS)


def _event(obj):
    return {name: getattr(obj, name) for name in models.EVENT_COLUMNS}


def _new_event(migration_id, stage, event, message=None, bytes=None):
    return models.MigrationEvent(
        migration_id=migration_id, stage=stage, event=event,
        message=message, bytes=bytes, created_at=timeutils.utcnow())


def _with_events(session, obj, events):
    """The row of ``obj``, with the events that ``events(row)`` gives
    added to ``session``.
    """
    row = _row(obj)
    if events is not None:
        for stage, event, message, nbytes in events(row):
            session.add(_new_event(obj.id, stage, event, message, nbytes))
        session.flush()
    return row


def _locked(session, migration_id):
    """The row, read as it is now (a locking read: a REPEATABLE READ
    snapshot older than a claim just committed would not show it), or
    MigrationNotFound.
    """
    obj = session.get(models.Migration, migration_id,
                      with_for_update=True, populate_existing=True)
    if obj is None:
        raise exception.MigrationNotFound(migration_id=migration_id)
    return obj


def _claim_lost(migration_id, held, obj):
    return exception.MigrationClaimLost(
        migration_id=migration_id, held=held, found=obj.epoch,
        owner=obj.owner)


def _values(values):
    return common.values(values, models.MIGRATION_COLUMNS, _JSON_COLUMNS,
                         'migrations')


def _sort(sort_keys, sort_dirs):
    return common.sort(sort_keys, sort_dirs, SORT_KEYS, DEFAULT_SORT)


class Database(protection.ProtectionQueries, drills.DrillQueries):
    """dtn-migrate's tables on one database (an oslo.db enginefacade).

    The queries of the protection tables come from
    :class:`~dtn_migrate.db.protection.ProtectionQueries`, those of the
    drills from :class:`~dtn_migrate.db.drills.DrillQueries`.
    """

    def __init__(self, conf=None, connection=None):
        options = {}
        group = getattr(conf, 'database', None) if conf is not None \
            else None
        if group is not None:
            options = {k: v for k, v in group.items()
                       if v is not None and k not in (
                           'backend', 'use_db_reconnect',
                           'db_retry_interval', 'db_inc_retry_interval',
                           'db_max_retry_interval', 'db_max_retries',
                           'use_tpool', 'mysql_wsrep_sync_wait')}
        if conf is not None:
            connection = connection or connection_url(conf)
        self.url = utf8mb4(connection or database_conf.DEFAULT_CONNECTION)
        ensure_sqlite_dir(self.url)
        options['connection'] = self.url
        options.pop('slave_connection', None)
        # Fail fast when the database is away (the engine strands its
        # work and tries again; the API answers 503) rather than block
        # for minutes: one connection attempt, then wrap_db_retry's.
        options['max_retries'] = 1
        options['retry_interval'] = 1
        self._facade = enginefacade.transaction_context()
        self._facade.configure(**options)
        self._engine = None
        self._engine_lock = threading.Lock()

    def _started(self):
        """Start the facade (at the first call: the database may be
        away when the service starts) and tune an SQLite engine.
        """
        if self._engine is None:
            with self._engine_lock:
                if self._engine is None:
                    self._engine = serialize_sqlite(
                        self._facade.writer.get_engine())
        return self._facade

    def writer(self):
        return self._started().writer.using(_Context())

    def reader(self):
        return self._started().reader.using(_Context())

    def get_engine(self):
        self._started()
        return self._engine

    def dispose(self):
        try:
            self._facade.dispose_pool()
        except Exception:  # noqa: B902 - never started
            pass

    # Migrations.
    @_wrap
    def migration_create(self, values, events=None):
        """A new row; ``events``, as in :meth:`migration_update`."""
        values = _values(values)
        values.setdefault('id', uuid.uuid4().hex)
        now = timeutils.utcnow()
        values.setdefault('created_at', now)
        values.setdefault('updated_at', values['created_at'])
        with self.writer() as session:
            obj = models.Migration(**values)
            session.add(obj)
            session.flush()
            return _with_events(session, obj, events)

    @_wrap
    def migration_update(self, migration_id, values, expected_state=None,
                         events=None, expected_epoch=None):
        """Update a row; ``expected_state`` (a state or a list): only if
        the row is in one of them, else MigrationStateConflict.

        ``events(row)``, if given, returns the (stage, event, message,
        bytes) that the updated ``row`` means; they are added in the same
        transaction, so that a database lost in between keeps neither
        (the next update, seeing the same change, writes them).

        ``expected_epoch`` (the epoch of the caller's claim, see
        :meth:`migration_claim`): only if the row is still at that
        epoch, checked by the UPDATE itself, else MigrationClaimLost and
        nothing written, neither the row nor its events.  None: no
        check (a single engine).
        """
        values = _values(values)
        values.setdefault('updated_at', timeutils.utcnow())
        if expected_epoch is not None:
            return self._fenced_update(migration_id, values, expected_state,
                                       events, expected_epoch)
        with self.writer() as session:
            obj = session.get(models.Migration, migration_id)
            if obj is None:
                raise exception.MigrationNotFound(migration_id=migration_id)
            if expected_state is not None and \
                    obj.state not in _as_list(expected_state):
                raise exception.MigrationStateConflict(
                    migration_id=migration_id, state=obj.state,
                    action='change')
            for key, value in values.items():
                setattr(obj, key, value)
            session.flush()
            return _with_events(session, obj, events)

    def _fenced_update(self, migration_id, values, expected_state, events,
                       epoch):
        # One conditional UPDATE, not a read and then a write: a claim
        # committed between the two would not be seen.
        Migration = models.Migration
        where = [Migration.id == migration_id, Migration.epoch == epoch]
        if expected_state is not None:
            where.append(Migration.state.in_(_as_list(expected_state)))
        with self.writer() as session:
            result = session.execute(
                sa.update(Migration).where(*where).values(**values)
                .execution_options(synchronize_session=False))
            if result.rowcount != 1:
                obj = _locked(session, migration_id)
                if obj.epoch != epoch:
                    raise _claim_lost(migration_id, epoch, obj)
                raise exception.MigrationStateConflict(
                    migration_id=migration_id, state=obj.state,
                    action='change')
            obj = session.get(Migration, migration_id,
                              populate_existing=True)
            return _with_events(session, obj, events)

    @_wrap
    def migration_claim(self, migration_id, owner, epoch):
        """Claim a migration for the engine ``owner`` (its host name),
        taking it over from whichever engine held ``epoch``, the epoch
        the caller last saw in the row: returns the new epoch (``epoch``
        + 1), which the claimant's writes then carry (``expected_epoch``
        of :meth:`migration_update`).

        One conditional UPDATE: of engines claiming the same row at the
        same epoch, exactly one wins; the others get MigrationClaimLost.
        MigrationNotFound when there is no such row.
        """
        Migration = models.Migration
        with self.writer() as session:
            result = session.execute(
                sa.update(Migration)
                .where(Migration.id == migration_id,
                       Migration.epoch == epoch)
                # Engine-internal: updated_at, which the API shows and
                # lists by, is the migration's own.
                .values(owner=owner, epoch=Migration.epoch + 1,
                        updated_at=Migration.updated_at)
                .execution_options(synchronize_session=False))
            if result.rowcount != 1:
                raise _claim_lost(migration_id, epoch,
                                  _locked(session, migration_id))
            return epoch + 1

    @_wrap
    def migration_get(self, migration_id, project_id=None):
        with self.reader() as session:
            obj = session.get(models.Migration, migration_id)
            if obj is None or (project_id is not None and
                               obj.project_id != project_id):
                raise exception.MigrationNotFound(migration_id=migration_id)
            return _row(obj)

    @_wrap
    def migration_get_all(self, filters=None, marker=None, limit=None,
                          sort_keys=None, sort_dirs=None, project_id=None):
        keys, dirs = _sort(sort_keys, sort_dirs)
        if limit is not None and (not isinstance(limit, int) or limit < 0):
            raise exception.InvalidInput(
                reason='limit must be a non-negative integer')
        Migration = models.Migration
        with self.reader() as session:
            query = session.query(Migration)
            if project_id is not None:
                query = query.filter(Migration.project_id == project_id)
            for key, value in (filters or {}).items():
                if value is None:
                    continue
                if key == 'changes_since':
                    query = query.filter(Migration.updated_at >= value)
                elif key in FILTER_KEYS:
                    values = _as_list(value)
                    col = getattr(Migration, key)
                    query = query.filter(col.in_(values)) \
                        if len(values) != 1 else query.filter(
                            col == values[0])
                else:
                    raise exception.InvalidInput(
                        reason='unknown filter %r; filters: %s'
                               % (key, ', '.join(FILTER_KEYS +
                                                 ('changes_since',))))
            marker_obj = None if marker is None else common.marker_row(
                session, Migration, marker, project_id)
            query = common.paged(query, models.Migration, keys, dirs,
                                 marker_obj, _NOT_NULL, limit)
            return [_row(obj) for obj in query.all()]

    # Events.
    @_wrap
    def migration_event_add(self, migration_id, stage, event, message=None,
                            bytes=None):
        with self.writer() as session:
            obj = _new_event(migration_id, stage, event, message, bytes)
            session.add(obj)
            session.flush()
            return _event(obj)

    @_wrap
    def migration_events_get(self, migration_id):
        Event = models.MigrationEvent
        with self.reader() as session:
            query = session.query(Event).filter(
                Event.migration_id == migration_id).order_by(
                    Event.created_at, Event.id)
            return [_event(obj) for obj in query.all()]

    # The service's own secrets.
    def service_key(self, name):
        """The secret ``name`` of the service (hex, 64 digits), made at
        its first use; two components making it at once agree on the
        first one written.
        """
        for _ in range(2):
            found = self._service_key(name)
            if found is not None:
                return found
            try:
                return self._new_service_key(name)
            except db_exc.DBDuplicateEntry:
                continue
        raise exception.DatabaseUnavailable(
            reason='service key %s neither read nor written' % name)

    @_wrap
    def _service_key(self, name):
        with self.reader() as session:
            obj = session.get(models.ServiceKey, name)
            return obj.value if obj is not None else None

    @_wrap
    def _new_service_key(self, name):
        with self.writer() as session:
            obj = models.ServiceKey(name=name, value=secrets.token_hex(32))
            session.add(obj)
            session.flush()
            return obj.value

    @_wrap
    def ping(self):
        """Raise DatabaseUnavailable unless the database answers."""
        with self.reader() as session:
            session.execute(sa.text('SELECT 1'))


_DB = None


def configure(conf):
    """Point the module functions at ``conf``'s [database]."""
    global _DB
    if _DB is not None:
        _DB.dispose()
    _DB = Database(conf)
    return _DB


def get_database():
    if _DB is None:
        raise exception.ConfigError(
            reason='dtn_migrate.db.api.configure() was not called')
    return _DB


def migration_create(values):
    return get_database().migration_create(values)


def migration_update(migration_id, values, expected_state=None,
                     expected_epoch=None):
    return get_database().migration_update(
        migration_id, values, expected_state,
        expected_epoch=expected_epoch)


def migration_claim(migration_id, owner, epoch):
    return get_database().migration_claim(migration_id, owner, epoch)


def migration_get(migration_id, project_id=None):
    return get_database().migration_get(migration_id, project_id)


def migration_get_all(filters=None, marker=None, limit=None, sort_keys=None,
                      sort_dirs=None, project_id=None):
    return get_database().migration_get_all(filters, marker, limit,
                                            sort_keys, sort_dirs, project_id)


def migration_event_add(migration_id, stage, event, message=None,
                        bytes=None):
    return get_database().migration_event_add(migration_id, stage, event,
                                              message, bytes)


def migration_events_get(migration_id):
    return get_database().migration_events_get(migration_id)


def _delegated(name, mixin):
    def call(*args, **kwargs):
        return getattr(get_database(), name)(*args, **kwargs)
    call.__name__ = call.__qualname__ = name
    call.__doc__ = getattr(mixin, name).__doc__
    return call


#: The protection queries (see db.protection) and the drill queries (see
#: db.drills), as module functions of the configured database, like the
#: migration ones above.
PROTECTION_QUERIES = tuple(
    name for name in vars(protection.ProtectionQueries)
    if name.startswith(('policy_', 'replica_')))
DRILL_QUERIES = tuple(
    name for name in vars(drills.DrillQueries) if name.startswith('drill_'))
for _name in PROTECTION_QUERIES:
    globals()[_name] = _delegated(_name, protection.ProtectionQueries)
for _name in DRILL_QUERIES:
    globals()[_name] = _delegated(_name, drills.DrillQueries)
del _name
