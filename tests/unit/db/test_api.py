"""dtn_migrate.db.api on SQLite: rows, filters, pages, events, errors."""

import datetime
import shutil
import tempfile
import threading
import time
from unittest import mock

from alembic import autogenerate
from alembic import migration as alembic_migration
from alembic import script as alembic_script
from oslo_config import cfg
import sqlalchemy as sa

from dtn_migrate.conf import database as database_conf
from dtn_migrate.conf import engine as engine_conf
from dtn_migrate.db import api
from dtn_migrate.db import migration
from dtn_migrate.db import models
from dtn_migrate import exception

from tests.unit import testcase

HEAD = alembic_script.ScriptDirectory.from_config(
    migration.alembic_config()).get_current_head()


def make_conf(url=None):
    conf = cfg.ConfigOpts()
    database_conf.register_opts(conf)
    engine_conf.register_opts(conf)
    conf([], project='dtn-migrate-test')
    if url:
        conf.set_override('connection', url, 'database')
    return conf


class DatabaseTestCase(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix='dtnm-db-')
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.url = 'sqlite:///%s/db.sqlite' % self.tmp
        self.conf = make_conf(self.url)
        migration.db_sync(self.conf)
        self.db = api.Database(self.conf)
        self.addCleanup(self.db.dispose)

    def add(self, **values):
        values.setdefault('direction', 'outgoing')
        values.setdefault('state', 'queued')
        return self.db.migration_create(values)


class TestSchema(DatabaseTestCase):
    def test_version_is_head(self):
        self.assertEqual(HEAD, migration.db_version(self.conf))

    def test_version_of_empty_database_is_none(self):
        conf = make_conf('sqlite:///%s/empty.sqlite' % self.tmp)
        self.assertIsNone(migration.db_version(conf))

    def test_sync_twice_is_harmless(self):
        migration.db_sync(self.conf)
        self.assertEqual(HEAD, migration.db_version(self.conf))

    def test_upgrade_from_first_revision(self):
        conf = make_conf('sqlite:///%s/old.sqlite' % self.tmp)
        migration.db_sync(conf, '0001')
        self.assertEqual('0001', migration.db_version(conf))
        migration.db_sync(conf)
        self.assertEqual(HEAD, migration.db_version(conf))

    def test_upgrade_keys_replicas_by_owner(self):
        # Rows of revision 0003 (keyed by direction, peer and source
        # image) get the owner their columns name.
        conf = make_conf('sqlite:///%s/old.sqlite' % self.tmp)
        migration.db_sync(conf, '0003')
        engine = sa.create_engine('sqlite:///%s/old.sqlite' % self.tmp,
                                  poolclass=sa.pool.NullPool)
        self.addCleanup(engine.dispose)
        rows = [('outgoing', 's1', 'p1', 'a' * 32),
                ('outgoing', 's2', 'p1', None),
                ('incoming', 's1', None, None),
                ('incoming', 's3', 'p7', '')]
        with engine.begin() as connection:
            for direction, source, project, policy in rows:
                connection.execute(sa.text(
                    "INSERT INTO replicas (direction, peer, "
                    "source_image_id, project_id, policy_id, state) VALUES "
                    "(:d, 'dtn-b', :s, :p, :pol, 'current')"),
                    {'d': direction, 's': source, 'p': project,
                     'pol': policy})
        migration.db_sync(conf)
        db = api.Database(conf)
        self.addCleanup(db.dispose)
        self.assertEqual(
            {('outgoing', 's1'): 'policy:' + 'a' * 32,
             ('outgoing', 's2'): 'project:p1',
             ('incoming', 's1'): 'project:',
             ('incoming', 's3'): 'project:p7'},
            {(r['direction'], r['source_image_id']): r['owner_key']
             for r in db.replica_get_all()})
        # Another project's replica of s1 is a row of its own now.
        db.replica_upsert('outgoing', 'dtn-b', 's1', {'project_id': 'p2'})
        self.assertEqual(5, len(db.replica_get_all()))

    def test_upgrade_gives_existing_migrations_epoch_0(self):
        conf = make_conf('sqlite:///%s/old.sqlite' % self.tmp)
        migration.db_sync(conf, '0005')
        engine = sa.create_engine('sqlite:///%s/old.sqlite' % self.tmp,
                                  poolclass=sa.pool.NullPool)
        self.addCleanup(engine.dispose)
        with engine.begin() as connection:
            connection.execute(sa.text(
                "INSERT INTO migrations (id, direction, state) VALUES "
                "('m1', 'outgoing', 'running')"))
        migration.db_sync(conf)
        db = api.Database(conf)
        self.addCleanup(db.dispose)
        row = db.migration_get('m1')
        self.assertEqual((None, 0, 'running'),
                         (row['owner'], row['epoch'], row['state']))
        self.assertEqual(1, db.migration_claim('m1', 'engine-1', 0))

    def test_migrations_make_the_models(self):
        # Every table, column, type, index and constraint of the models,
        # and nothing else, once the migrations ran.
        engine = sa.create_engine(self.url, poolclass=sa.pool.NullPool)
        self.addCleanup(engine.dispose)
        with engine.connect() as connection:
            context = alembic_migration.MigrationContext.configure(
                connection, opts={'version_table': migration.VERSION_TABLE,
                                  'compare_type': True})
            diff = autogenerate.compare_metadata(context,
                                                 models.Base.metadata)
        self.assertEqual([], diff)
        self.assertEqual(
            {'migrations', 'migration_events', 'protection_policies',
             'policy_images', 'replicas', 'drills', 'service_keys',
             migration.VERSION_TABLE},
            set(sa.inspect(engine).get_table_names()))

    def test_unreachable_database(self):
        conf = make_conf('mysql+pymysql://root@127.0.0.1:1/none')
        self.assertRaises(exception.DatabaseUnavailable,
                          migration.db_version, conf)


class TestConnection(testcase.TestCase):
    def test_database_connection(self):
        conf = make_conf('sqlite:////a.sqlite')
        self.assertEqual('sqlite:////a.sqlite', api.connection_url(conf))

    def test_default(self):
        self.assertEqual(database_conf.DEFAULT_CONNECTION,
                         api.connection_url(make_conf()))

    def test_password_hidden(self):
        self.assertNotIn('secret', api.safe_url(
            'mysql+pymysql://u:secret@h/db'))

    def test_mysql_talks_utf8mb4(self):
        # The tables are utf8mb4: a connection in MySQL's 3-byte utf8
        # (oslo.db's default, devstack's URLs) failed a filter holding
        # an emoji with "Illegal mix of collations" (a 503 of the API).
        for url in ('mysql+pymysql://u:p%40w@h/db',
                    'mysql+pymysql://u@h/db?charset=utf8',
                    'mysql+pymysql://u@h/db?charset=utf8mb3'):
            conf = make_conf(url)
            got = api.connection_url(conf)
            self.assertIn('charset=utf8mb4', got)
            self.assertIn('p%40w@h' if 'p%40w' in url else 'u@h', got)
        self.assertIn('charset=latin1', api.connection_url(
            make_conf('mysql+pymysql://u@h/db?charset=latin1')))
        self.assertEqual('postgresql://u@h/db', api.connection_url(
            make_conf('postgresql://u@h/db')))


class TestMigrations(DatabaseTestCase):
    def test_create_and_get(self):
        row = self.add(image_id='i1', options={'keep_id': True},
                       project_id='p1', size=5 << 30)
        self.assertEqual(32, len(row['id']))
        got = self.db.migration_get(row['id'])
        self.assertEqual(row, got)
        self.assertEqual({'keep_id': True}, got['options'])
        self.assertEqual(5 << 30, got['size'])
        self.assertIsInstance(got['created_at'], datetime.datetime)
        self.assertIsNone(got['created_at'].tzinfo)

    def test_get_unknown(self):
        self.assertRaises(exception.MigrationNotFound,
                          self.db.migration_get, 'f' * 32)

    def test_get_other_project_is_not_found(self):
        row = self.add(project_id='p1')
        self.assertEqual(row['id'], self.db.migration_get(
            row['id'], project_id='p1')['id'])
        self.assertRaises(exception.MigrationNotFound,
                          self.db.migration_get, row['id'], project_id='p2')

    def test_update(self):
        row = self.add()
        time.sleep(0.01)
        new = self.db.migration_update(row['id'], {
            'state': 'running', 'stage': 'export', 'bytes_export': 10,
            'progress': 0.25})
        self.assertEqual(('running', 'export', 10, 0.25),
                         (new['state'], new['stage'], new['bytes_export'],
                          new['progress']))
        self.assertGreater(new['updated_at'], row['updated_at'])
        self.assertEqual(new, self.db.migration_get(row['id']))

    def test_update_unknown(self):
        self.assertRaises(exception.MigrationNotFound,
                          self.db.migration_update, 'a' * 32,
                          {'state': 'failed'})

    def test_update_expected_state(self):
        row = self.add(state='complete')
        self.assertRaises(exception.MigrationStateConflict,
                          self.db.migration_update, row['id'],
                          {'state': 'queued'},
                          expected_state=['failed', 'cancelled'])
        self.assertEqual('complete',
                         self.db.migration_get(row['id'])['state'])

    def test_unknown_column(self):
        self.assertRaises(exception.InvalidInput, self.add, colour='red')


class TestClaims(DatabaseTestCase):
    """The fencing of active/active engines (issue 39): a claim moves a
    migration's epoch on, and a write carrying an older one is refused.
    """

    def test_new_row_is_unclaimed(self):
        row = self.add()
        self.assertEqual((None, 0), (row['owner'], row['epoch']))

    def test_claim_and_takeover(self):
        row = self.add()
        self.assertEqual(1, self.db.migration_claim(row['id'], 'e1', 0))
        self.assertEqual(2, self.db.migration_claim(row['id'], 'e2', 1))
        got = self.db.migration_get(row['id'])
        self.assertEqual(('e2', 2), (got['owner'], got['epoch']))

    def test_claim_with_a_stale_epoch_is_lost(self):
        row = self.add()
        self.db.migration_claim(row['id'], 'e1', 0)
        exc = self.assertRaises(exception.MigrationClaimLost,
                                self.db.migration_claim, row['id'], 'e2', 0)
        self.assertEqual(409, exc.code)
        for word in (row['id'], 'epoch 0', 'epoch 1', 'e1'):
            self.assertIn(word, str(exc))
        got = self.db.migration_get(row['id'])
        self.assertEqual(('e1', 1), (got['owner'], got['epoch']))

    def test_claim_unknown(self):
        self.assertRaises(exception.MigrationNotFound,
                          self.db.migration_claim, 'a' * 32, 'e1', 0)

    def test_racing_claims_one_wins(self):
        row = self.add()
        other = api.Database(self.conf)
        self.addCleanup(other.dispose)
        barrier = threading.Barrier(2, timeout=10)
        results = {}

        def claim(db, owner):
            barrier.wait()
            try:
                results[owner] = db.migration_claim(row['id'], owner, 0)
            except exception.MigrationClaimLost as exc:
                results[owner] = exc
        threads = [threading.Thread(target=claim, args=(db, owner))
                   for db, owner in ((self.db, 'e1'), (other, 'e2'))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        won = [o for o, r in results.items() if r == 1]
        lost = [o for o, r in results.items()
                if isinstance(r, exception.MigrationClaimLost)]
        self.assertEqual((1, 1), (len(won), len(lost)), results)
        got = self.db.migration_get(row['id'])
        self.assertEqual((won[0], 1), (got['owner'], got['epoch']))

    def test_update_with_the_current_epoch(self):
        row = self.add()
        epoch = self.db.migration_claim(row['id'], 'e1', 0)
        new = self.db.migration_update(
            row['id'], {'state': 'running', 'options': {'a': 1}},
            expected_epoch=epoch,
            events=lambda r: [(None, 'started', r['state'], None)])
        self.assertEqual(('running', {'a': 1}, 'e1', 1),
                         (new['state'], new['options'], new['owner'],
                          new['epoch']))
        self.assertEqual(new, self.db.migration_get(row['id']))
        self.assertEqual([('started', 'running')],
                         [(e['event'], e['message']) for e in
                          self.db.migration_events_get(row['id'])])

    def test_update_with_a_stale_epoch_writes_nothing(self):
        row = self.add()
        epoch = self.db.migration_claim(row['id'], 'e1', 0)
        self.db.migration_claim(row['id'], 'e2', epoch)
        exc = self.assertRaises(
            exception.MigrationClaimLost, self.db.migration_update,
            row['id'], {'state': 'failed'}, expected_epoch=epoch,
            events=lambda r: [(None, 'failed', None, None)])
        self.assertEqual({'migration_id': row['id'], 'held': 1, 'found': 2,
                          'owner': 'e2'}, exc.kwargs)
        got = self.db.migration_get(row['id'])
        self.assertEqual(('queued', row['updated_at']),
                         (got['state'], got['updated_at']))
        self.assertEqual([], self.db.migration_events_get(row['id']))

    def test_update_with_an_epoch_and_expected_state(self):
        row = self.add(state='complete')
        self.assertRaises(exception.MigrationStateConflict,
                          self.db.migration_update, row['id'],
                          {'state': 'queued'}, expected_state='failed',
                          expected_epoch=0)
        self.assertEqual('complete',
                         self.db.migration_get(row['id'])['state'])
        # A stale epoch says so first: its engine must stop.
        self.assertRaises(exception.MigrationClaimLost,
                          self.db.migration_update, row['id'],
                          {'state': 'queued'}, expected_state='failed',
                          expected_epoch=5)

    def test_update_unknown_with_an_epoch(self):
        self.assertRaises(exception.MigrationNotFound,
                          self.db.migration_update, 'a' * 32,
                          {'state': 'failed'}, expected_epoch=0)

    def test_update_without_an_epoch_is_not_checked(self):
        # A single engine (no epoch given) writes as it always did.
        row = self.add()
        self.db.migration_claim(row['id'], 'e1', 0)
        new = self.db.migration_update(row['id'], {'state': 'running'})
        self.assertEqual(('running', 'e1', 1),
                         (new['state'], new['owner'], new['epoch']))


class TestServiceKeys(DatabaseTestCase):
    def test_made_once_and_kept(self):
        key = self.db.service_key('import-seal')
        self.assertEqual(64, len(bytes.fromhex(key)) * 2)
        self.assertEqual(key, self.db.service_key('import-seal'))
        other = api.Database(self.conf)
        self.addCleanup(other.dispose)
        self.assertEqual(key, other.service_key('import-seal'))
        self.assertNotEqual(key, self.db.service_key('another'))

    def test_two_writers_agree(self):
        first = self.db.service_key('k')
        with mock.patch.object(api.Database, '_service_key',
                               side_effect=[None, first]):
            self.assertEqual(first, self.db.service_key('k'))


class TestList(DatabaseTestCase):
    def setUp(self):
        super().setUp()
        base = datetime.datetime(2026, 1, 1)
        self.rows = []
        for i in range(7):
            self.rows.append(self.add(
                id='%032x' % i, image_id='img%d' % (i % 3),
                image_name=None if i % 2 else 'name%d' % (6 - i),
                peer='dtn-b' if i < 5 else 'dtn-c',
                state=('queued', 'running', 'complete')[i % 3],
                direction='incoming' if i == 6 else 'outgoing',
                project_id='p1' if i < 4 else 'p2',
                request_id='r%d' % (i // 2),
                created_at=base + datetime.timedelta(minutes=i),
                updated_at=base + datetime.timedelta(hours=i)))

    def ids(self, rows):
        return [int(r['id'], 16) for r in rows]

    def test_default_order_newest_first(self):
        self.assertEqual([6, 5, 4, 3, 2, 1, 0],
                         self.ids(self.db.migration_get_all()))

    def test_filters(self):
        get = self.db.migration_get_all
        self.assertEqual([6, 3, 0], self.ids(get({'state': 'queued'})))
        self.assertEqual([6, 4, 3, 1, 0], self.ids(
            get({'state': ['queued', 'running']})))
        self.assertEqual([5, 2], self.ids(get({'image_id': 'img2'})))
        self.assertEqual([6, 5], self.ids(get({'peer': 'dtn-c'})))
        self.assertEqual([6], self.ids(get({'direction': 'incoming'})))
        self.assertEqual([3, 2], self.ids(get({'request_id': 'r1'})))
        since = datetime.datetime(2026, 1, 1, 4)
        self.assertEqual([6, 5, 4], self.ids(get({'changes_since': since})))
        self.assertEqual([5], self.ids(get({'peer': 'dtn-c',
                                            'direction': 'outgoing'})))

    def test_unknown_filter(self):
        self.assertRaises(exception.InvalidInput,
                          self.db.migration_get_all, {'colour': 'red'})

    def test_project_scoping(self):
        self.assertEqual([3, 2, 1, 0], self.ids(
            self.db.migration_get_all(project_id='p1')))
        self.assertEqual([], self.ids(self.db.migration_get_all(
            {'peer': 'dtn-c'}, project_id='p1')))

    def test_sort(self):
        get = self.db.migration_get_all
        self.assertEqual([0, 1, 2, 3, 4, 5, 6],
                         self.ids(get(sort_keys=['created_at'],
                                      sort_dirs=['asc'])))
        # Nulls first going up; then names; id breaks ties.
        self.assertEqual([1, 3, 5, 6, 4, 2, 0],
                         self.ids(get(sort_keys=['image_name'],
                                      sort_dirs=['asc'])))
        self.assertEqual([4, 1, 6, 3, 0, 5, 2],
                         self.ids(get(sort_keys=['state', 'created_at'],
                                      sort_dirs=['desc'])))

    def test_bad_sort(self):
        get = self.db.migration_get_all
        self.assertRaises(exception.InvalidInput, get,
                          sort_keys=['error'])
        self.assertRaises(exception.InvalidInput, get,
                          sort_keys=['state'], sort_dirs=['sideways'])
        self.assertRaises(exception.InvalidInput, get,
                          sort_keys=['state', 'peer'],
                          sort_dirs=['asc', 'asc', 'asc'])
        self.assertRaises(exception.InvalidInput, get, limit=-1)

    def _pages(self, limit, **kwargs):
        out, marker = [], None
        while True:
            page = self.db.migration_get_all(marker=marker, limit=limit,
                                             **kwargs)
            out.extend(page)
            if len(page) < limit:
                return out
            marker = page[-1]['id']

    def test_pages_cover_the_listing(self):
        for keys, dirs in ((None, None), (['image_name'], ['asc']),
                           (['image_name'], ['desc']),
                           (['state', 'peer'], ['asc', 'desc']),
                           (['progress'], ['asc'])):
            whole = self.db.migration_get_all(sort_keys=keys,
                                              sort_dirs=dirs)
            for limit in (1, 2, 3):
                self.assertEqual(
                    self.ids(whole),
                    self.ids(self._pages(limit, sort_keys=keys,
                                         sort_dirs=dirs)),
                    '%s %s limit %d' % (keys, dirs, limit))

    def test_pages_with_filter_and_project(self):
        self.assertEqual([3, 2, 1, 0], self.ids(
            self._pages(1, project_id='p1')))
        self.assertEqual([3, 0], self.ids(
            self._pages(1, filters={'state': 'queued'}, project_id='p1')))

    def test_unknown_marker(self):
        self.assertRaises(exception.MarkerNotFound,
                          self.db.migration_get_all, marker='e' * 32)

    def test_marker_of_other_project(self):
        self.assertRaises(exception.MarkerNotFound,
                          self.db.migration_get_all, marker='%032x' % 6,
                          project_id='p1')


class TestEvents(DatabaseTestCase):
    def test_events_oldest_first(self):
        row = self.add()
        other = self.add()
        self.db.migration_event_add(row['id'], None, 'queued')
        self.db.migration_event_add(row['id'], 'export', 'started')
        self.db.migration_event_add(other['id'], 'export', 'started')
        self.db.migration_event_add(row['id'], 'export', 'finished',
                                    message='done', bytes=42)
        events = self.db.migration_events_get(row['id'])
        self.assertEqual([(None, 'queued'), ('export', 'started'),
                          ('export', 'finished')],
                         [(e['stage'], e['event']) for e in events])
        self.assertEqual(('done', 42), (events[-1]['message'],
                                        events[-1]['bytes']))
        self.assertEqual(sorted(events[-1]), sorted(
            ['stage', 'event', 'message', 'bytes', 'created_at']))

    def test_no_events(self):
        self.assertEqual([], self.db.migration_events_get('0' * 32))


class TestModuleFunctions(DatabaseTestCase):
    def test_configure(self):
        api.configure(self.conf)
        self.addCleanup(setattr, api, '_DB', None)
        row = api.migration_create({'direction': 'incoming',
                                    'state': 'queued'})
        api.migration_update(row['id'], {'state': 'running'})
        self.assertEqual(1, api.migration_claim(row['id'], 'e1', 0))
        api.migration_update(row['id'], {'stage': 'import'},
                             expected_epoch=1)
        self.assertRaises(exception.MigrationClaimLost,
                          api.migration_update, row['id'],
                          {'stage': 'export'}, expected_epoch=0)
        api.migration_event_add(row['id'], 'import', 'started')
        self.assertEqual('running', api.migration_get(row['id'])['state'])
        self.assertEqual([row['id']], [r['id'] for r in
                                       api.migration_get_all()])
        self.assertEqual(1, len(api.migration_events_get(row['id'])))

    def test_not_configured(self):
        self.patch(api, '_DB', None)
        self.assertRaises(exception.ConfigError, api.migration_get, 'x')

    def test_protection_queries(self):
        # The API serves reads through these module functions: every
        # query of db.protection is one (it was missing: 500 on
        # GET /v1/policies/{id}).
        api.configure(self.conf)
        self.addCleanup(setattr, api, '_DB', None)
        for name in ('policy_create', 'policy_get', 'policy_get_all',
                     'policy_update', 'policy_delete', 'policy_image_get',
                     'policy_image_upsert', 'policy_images_get',
                     'policy_image_delete', 'policy_image_counts',
                     'replica_upsert', 'replica_get', 'replica_get_all'):
            self.assertTrue(callable(getattr(api, name, None)), name)
        row = api.policy_create({
            'name': 'gold', 'project_id': 'p1', 'peer': 'b',
            'mode': 'manual', 'rpo_minutes': 5,
            'selector': {'tags': ['t']}, 'options': {}})
        self.assertEqual('gold', api.policy_get(row['id'], 'p1')['name'])
        self.assertEqual([row['id']],
                         [p['id'] for p in api.policy_get_all()])
        self.assertRaises(exception.ProtectionPolicyNotFound,
                          api.policy_get, row['id'], 'p2')

    def test_drill_queries(self):
        # The drills' queries too are module functions (the API reads
        # GET /v1/drills through them).
        api.configure(self.conf)
        self.addCleanup(setattr, api, '_DB', None)
        self.assertEqual({'drill_create', 'drill_get', 'drill_get_all',
                          'drill_update'}, set(api.DRILL_QUERIES))
        row = api.drill_create({'policy_id': 'a' * 32, 'state': 'running',
                                'project_id': 'p1'})
        api.drill_update(row['id'], {'state': 'passed'})
        self.assertEqual('passed', api.drill_get(row['id'], 'p1')['state'])
        self.assertEqual([row['id']], [d['id'] for d in api.drill_get_all()])
        self.assertRaises(exception.DrillNotFound, api.drill_get, row['id'],
                          'p2')


class TestUnavailable(testcase.TestCase):
    def test_outage_raises_database_unavailable(self):
        # Nothing listens on port 1.
        db = api.Database(connection='mysql+pymysql://root@127.0.0.1:1/x')
        self.assertRaises(exception.DatabaseUnavailable,
                          db.migration_get_all)
        self.assertRaises(exception.DatabaseUnavailable, db.ping)
