"""dtn_migrate.db.drills on SQLite: the drills of policies."""

import datetime

from dtn_migrate.db import api
from dtn_migrate import exception
from tests.unit.db import test_api
from tests.unit import testcase

T0 = datetime.datetime(2026, 1, 1)
POLICY = 'a' * 32


def minutes(n):
    return T0 + datetime.timedelta(minutes=n)


class DrillTestCase(test_api.DatabaseTestCase):
    def drill(self, **values):
        values.setdefault('policy_id', POLICY)
        values.setdefault('policy_name', 'gold')
        values.setdefault('project_id', 'p1')
        values.setdefault('state', 'running')
        return self.db.drill_create(values)


class TestDrills(DrillTestCase):
    def test_create_and_get(self):
        row = self.drill(started_at=T0)
        self.assertEqual(32, len(row['id']))
        int(row['id'], 16)
        self.assertEqual(row, self.db.drill_get(row['id']))
        self.assertEqual({}, row['report'])
        self.assertIs(False, row['clone'])
        self.assertEqual('running', row['state'])
        self.assertEqual(T0, row['started_at'])
        self.assertIsNone(row['finished_at'])
        self.assertIsNone(row['created_at'].tzinfo)
        self.assertEqual(row['created_at'], row['updated_at'])
        self.assertEqual(
            {'id', 'policy_id', 'policy_name', 'project_id', 'state',
             'clone', 'images_total', 'images_intact', 'images_bad',
             'rto_seconds', 'report', 'error', 'started_at', 'finished_at',
             'created_at', 'updated_at'}, set(row))

    def test_given_id_and_clone(self):
        row = self.drill(id='b' * 32, clone=True)
        self.assertEqual('b' * 32, row['id'])
        self.assertIs(True, self.db.drill_get('b' * 32)['clone'])

    def test_unknown_column(self):
        self.assertRaises(exception.InvalidInput, self.drill, colour='red')

    def test_get_unknown(self):
        exc = self.assertRaises(exception.DrillNotFound, self.db.drill_get,
                                'c' * 32)
        self.assertEqual(404, exc.code)

    def test_get_other_project_is_not_found(self):
        row = self.drill()
        self.assertEqual(row, self.db.drill_get(row['id'], 'p1'))
        self.assertRaises(exception.DrillNotFound, self.db.drill_get,
                          row['id'], 'p2')

    def test_update_with_report(self):
        row = self.drill()
        report = {'images': [{
            'source_image_id': 's1', 'replica_image_id': 'r1',
            'image_name': 'cirros', 'status': 'intact',
            'checks': {'present': True, 'size': True, 'hash': True,
                       'qemu_img': None, 'clone': None},
            'error': None, 'seconds': 1.5}]}
        got = self.db.drill_update(row['id'], {
            'state': 'passed', 'images_total': 1, 'images_intact': 1,
            'images_bad': 0, 'rto_seconds': 1.5, 'report': report,
            'finished_at': minutes(1)})
        self.assertEqual(report, got['report'])
        self.assertEqual(got, self.db.drill_get(row['id']))
        self.assertEqual('passed', got['state'])
        self.assertEqual(1.5, got['rto_seconds'])
        self.assertGreaterEqual(got['updated_at'], row['updated_at'])

    def test_update_errors(self):
        row = self.drill()
        self.assertRaises(exception.DrillNotFound, self.db.drill_update,
                          'c' * 32, {'state': 'error'})
        self.assertRaises(exception.InvalidInput, self.db.drill_update,
                          row['id'], {'colour': 'red'})
        self.assertRaises(exception.InvalidInput, self.db.drill_update,
                          row['id'], {'id': 'c' * 32})


class TestDrillList(DrillTestCase):
    def _fill(self):
        # d0 oldest .. d5 newest; d4 and d5 of p2 and another policy.
        for i in range(6):
            self.drill(id=str(i) * 32, created_at=minutes(i),
                       state='passed' if i % 2 else 'failed',
                       policy_id=POLICY if i < 4 else 'b' * 32,
                       project_id='p1' if i < 4 else 'p2')

    def ids(self, rows):
        return [r['id'][0] for r in rows]

    def test_newest_first(self):
        self._fill()
        self.assertEqual(list('543210'), self.ids(self.db.drill_get_all()))

    def test_same_time_by_id(self):
        for c in 'abc':
            self.drill(id=c * 32, created_at=T0)
        self.assertEqual(list('cba'), self.ids(self.db.drill_get_all()))

    def test_filters(self):
        self._fill()
        get = self.db.drill_get_all
        self.assertEqual(list('3210'),
                         self.ids(get(filters={'policy_id': POLICY})))
        self.assertEqual(list('531'),
                         self.ids(get(filters={'state': 'passed'})))
        self.assertEqual(list('31'), self.ids(get(filters={
            'state': ['passed', 'error'], 'policy_id': POLICY})))
        self.assertEqual(list('543210'),
                         self.ids(get(filters={'state': None})))

    def test_bad_input(self):
        get = self.db.drill_get_all
        self.assertRaises(exception.InvalidInput, get,
                          filters={'colour': 'red'})
        self.assertRaises(exception.InvalidInput, get, limit=-1)
        self.assertRaises(exception.InvalidInput, get, limit='2')

    def test_project_scoping(self):
        self._fill()
        self.assertEqual(list('3210'),
                         self.ids(self.db.drill_get_all(project_id='p1')))
        self.assertEqual(list('54'),
                         self.ids(self.db.drill_get_all(project_id='p2')))

    def test_pages(self):
        self._fill()
        for kwargs in ({}, {'project_id': 'p1'},
                       {'filters': {'state': 'passed'}}):
            expected = self.ids(self.db.drill_get_all(**kwargs))
            for limit in (1, 2, 4):
                out, marker = [], None
                while True:
                    page = self.db.drill_get_all(marker=marker, limit=limit,
                                                 **kwargs)
                    out.extend(page)
                    if len(page) < limit:
                        break
                    marker = page[-1]['id']
                self.assertEqual(expected, self.ids(out),
                                 '%s limit %d' % (kwargs, limit))

    def test_bad_markers(self):
        self._fill()
        get = self.db.drill_get_all
        self.assertRaises(exception.MarkerNotFound, get, marker='z' * 32)
        self.assertRaises(exception.MarkerNotFound, get, marker='5' * 32,
                          project_id='p1')


class TestUnavailable(testcase.TestCase):
    def test_outage_raises_database_unavailable(self):
        # Nothing listens on port 1.
        db = api.Database(connection='mysql+pymysql://root@127.0.0.1:1/x')
        self.assertRaises(exception.DatabaseUnavailable,
                          db.drill_get, 'a' * 32)
        self.assertRaises(exception.DatabaseUnavailable, db.drill_get_all)
