"""dtn_migrate.db.protection on SQLite: policies, their images, replicas."""

import datetime
import functools
from unittest import mock

from dtn_migrate.db import api
from dtn_migrate.db import protection
from dtn_migrate import exception
from tests.unit.db import test_api
from tests.unit import testcase

T0 = datetime.datetime(2026, 1, 1)


def minutes(n):
    return T0 + datetime.timedelta(minutes=n)


class ProtectionTestCase(test_api.DatabaseTestCase):
    def policy(self, **values):
        values.setdefault('name', 'gold')
        values.setdefault('peer', 'dtn-b')
        values.setdefault('mode', 'continuous')
        values.setdefault('rpo_minutes', 60)
        values.setdefault('project_id', 'p1')
        return self.db.policy_create(values)


class TestPolicies(ProtectionTestCase):
    def test_create_and_get(self):
        row = self.policy(selector={'tags': ['gold']}, user_id='u1',
                          description='the gold images')
        self.assertEqual(32, len(row['id']))
        int(row['id'], 16)
        self.assertEqual(row, self.db.policy_get(row['id']))
        self.assertEqual({'tags': ['gold']}, row['selector'])
        self.assertEqual({}, row['options'])
        self.assertIs(True, row['enabled'])
        self.assertEqual('primary', row['role'])
        self.assertIsNone(row['rpo_state'])
        self.assertIsNone(row['created_at'].tzinfo)
        self.assertEqual(row['created_at'], row['updated_at'])
        self.assertEqual(
            {'id', 'name', 'description', 'project_id', 'user_id', 'peer',
             'mode', 'schedule', 'rpo_minutes', 'selector', 'options',
             'enabled', 'role', 'rpo_state', 'rpo_seconds',
             'rpo_checked_at', 'last_sync_at', 'last_error', 'created_at',
             'updated_at'}, set(row))

    def test_given_id_and_options(self):
        row = self.policy(id='a' * 32, enabled=False,
                          options={'keep_id': True, 'deletion': 'keep'})
        self.assertEqual('a' * 32, row['id'])
        self.assertIs(False, self.db.policy_get('a' * 32)['enabled'])
        self.assertEqual({'keep_id': True, 'deletion': 'keep'},
                         self.db.policy_get('a' * 32)['options'])

    def test_duplicate_name_in_project(self):
        self.policy()
        exc = self.assertRaises(exception.ProtectionPolicyExists,
                                self.policy, peer='dtn-c')
        self.assertEqual(409, exc.code)
        # Another project may use the name.
        self.policy(project_id='p2')
        # A null project too is a project.
        self.policy(project_id=None)
        self.assertRaises(exception.ProtectionPolicyExists, self.policy,
                          project_id=None)

    def test_duplicate_name_race(self):
        # Both writers saw the name free: the constraint refuses one.
        self.policy()
        with mock.patch.object(protection, '_name_taken',
                               return_value=False):
            self.assertRaises(exception.ProtectionPolicyExists,
                              self.policy)
        self.assertEqual(1, len(self.db.policy_get_all()))

    def test_duplicate_id(self):
        self.policy(id='b' * 32)
        self.assertRaises(exception.ProtectionPolicyExists, self.policy,
                          id='b' * 32, name='other')

    def test_unknown_column(self):
        self.assertRaises(exception.InvalidInput, self.policy, colour='red')

    def test_get_unknown(self):
        exc = self.assertRaises(exception.ProtectionPolicyNotFound,
                                self.db.policy_get, 'e' * 32)
        self.assertEqual(404, exc.code)

    def test_get_other_project_is_not_found(self):
        row = self.policy()
        self.assertEqual(row, self.db.policy_get(row['id'], 'p1'))
        self.assertRaises(exception.ProtectionPolicyNotFound,
                          self.db.policy_get, row['id'], 'p2')

    def test_update(self):
        row = self.policy(created_at=T0, updated_at=T0)
        new = self.db.policy_update(row['id'], {
            'rpo_state': 'at-risk', 'rpo_seconds': 3000.5,
            'rpo_checked_at': minutes(5), 'selector': {'tags': ['x']},
            'enabled': False})
        self.assertEqual('at-risk', new['rpo_state'])
        self.assertEqual(3000.5, new['rpo_seconds'])
        self.assertEqual(minutes(5), new['rpo_checked_at'])
        self.assertEqual({'tags': ['x']}, new['selector'])
        self.assertIs(False, new['enabled'])
        self.assertEqual(T0, new['created_at'])
        self.assertGreater(new['updated_at'], T0)
        self.assertEqual(new, self.db.policy_get(row['id']))

    def test_update_errors(self):
        row = self.policy()
        self.assertRaises(exception.InvalidInput, self.db.policy_update,
                          row['id'], {'colour': 'red'})
        self.assertRaises(exception.InvalidInput, self.db.policy_update,
                          row['id'], {'id': 'c' * 32})
        self.assertRaises(exception.ProtectionPolicyNotFound,
                          self.db.policy_update, 'e' * 32, {'name': 'x'})

    def test_rename(self):
        gold = self.policy()
        silver = self.policy(name='silver')
        self.assertRaises(exception.ProtectionPolicyExists,
                          self.db.policy_update, silver['id'],
                          {'name': 'gold'})
        self.assertEqual('silver', self.db.policy_get(silver['id'])['name'])
        # Its own name, a free name, the name in another project.
        self.db.policy_update(gold['id'], {'name': 'gold'})
        self.assertEqual('bronze', self.db.policy_update(
            silver['id'], {'name': 'bronze'})['name'])
        self.db.policy_update(self.policy(project_id='p2')['id'],
                              {'name': 'gold'})

    def test_rename_race(self):
        self.policy()
        silver = self.policy(name='silver')
        with mock.patch.object(protection, '_name_taken',
                               return_value=False):
            self.assertRaises(exception.ProtectionPolicyExists,
                              self.db.policy_update, silver['id'],
                              {'name': 'gold'})

    def test_delete_takes_its_images(self):
        gold, silver = self.policy(), self.policy(name='silver')
        for image in ('i1', 'i2'):
            self.db.policy_image_upsert(gold['id'], image, {})
        self.db.policy_image_upsert(silver['id'], 'i1', {})
        self.db.replica_upsert('outgoing', 'dtn-b', 'i1',
                               {'policy_id': gold['id']})
        self.assertIsNone(self.db.policy_delete(gold['id']))
        self.assertRaises(exception.ProtectionPolicyNotFound,
                          self.db.policy_get, gold['id'])
        self.assertEqual([], self.db.policy_images_get(gold['id']))
        self.assertEqual(['i1'], [r['image_id'] for r in
                                  self.db.policy_images_get(silver['id'])])
        # The replica catalog outlives the policy.
        self.assertIsNotNone(self.db.replica_get('outgoing', 'dtn-b', 'i1',
                                                 policy_id=gold['id']))
        self.assertRaises(exception.ProtectionPolicyNotFound,
                          self.db.policy_delete, gold['id'])


class TestPolicyList(ProtectionTestCase):
    def setUp(self):
        super().setUp()
        for i in range(7):
            self.policy(
                id='%032x' % i, name='pol%d' % (6 - i),
                peer='dtn-b' if i < 5 else 'dtn-c',
                mode=('continuous', 'scheduled', 'manual')[i % 3],
                enabled=i % 2 == 0,
                rpo_state=(None, 'ok', 'breached')[i % 3],
                rpo_seconds=None if i % 3 == 0 else float(i % 2),
                role='secondary' if i == 6 else 'primary',
                project_id='p1' if i < 4 else 'p2',
                created_at=minutes(i), updated_at=minutes(60 - i))

    def ids(self, rows):
        return [int(r['id'], 16) for r in rows]

    def test_default_order_newest_first(self):
        self.assertEqual([6, 5, 4, 3, 2, 1, 0],
                         self.ids(self.db.policy_get_all()))

    def test_filters(self):
        get = self.db.policy_get_all
        self.assertEqual([2], self.ids(get({'name': 'pol4'})))
        self.assertEqual([2, 1], self.ids(get({'name': ['pol4', 'pol5']})))
        self.assertEqual([6, 5], self.ids(get({'peer': 'dtn-c'})))
        self.assertEqual([5, 2], self.ids(get({'mode': 'manual'})))
        self.assertEqual([6, 4, 2, 0], self.ids(get({'enabled': True})))
        self.assertEqual([5, 3, 1], self.ids(get({'enabled': 'false'})))
        self.assertEqual([4, 1], self.ids(get({'rpo_state': 'ok'})))
        self.assertEqual([6], self.ids(get({'role': 'secondary'})))
        self.assertEqual([4], self.ids(get({'rpo_state': 'ok',
                                            'enabled': True})))
        self.assertEqual([6, 5, 4, 3, 2, 1, 0],
                         self.ids(get({'name': None})))

    def test_bad_filters(self):
        get = self.db.policy_get_all
        self.assertRaises(exception.InvalidInput, get, {'colour': 'red'})
        self.assertRaises(exception.InvalidInput, get, {'enabled': 'maybe'})
        # Columns that are no filters.
        self.assertRaises(exception.InvalidInput, get, {'selector': 'x'})
        self.assertRaises(exception.InvalidInput, get, {'project_id': 'p1'})

    def test_project_scoping(self):
        self.assertEqual([3, 2, 1, 0], self.ids(
            self.db.policy_get_all(project_id='p1')))
        self.assertEqual([], self.db.policy_get_all({'peer': 'dtn-c'},
                                                    project_id='p1'))

    def test_sort(self):
        get = self.db.policy_get_all
        self.assertEqual([6, 5, 4, 3, 2, 1, 0],
                         self.ids(get(sort_keys=['name'],
                                      sort_dirs=['asc'])))
        self.assertEqual([0, 1, 2, 3, 4, 5, 6],
                         self.ids(get(sort_keys=['updated_at'])))
        # Nulls first going up; id breaks ties.
        self.assertEqual([0, 3, 6, 2, 4, 1, 5],
                         self.ids(get(sort_keys=['rpo_seconds'],
                                      sort_dirs=['asc'])))

    def test_bad_sort(self):
        get = self.db.policy_get_all
        self.assertRaises(exception.InvalidInput, get, sort_keys=['peer'])
        self.assertRaises(exception.InvalidInput, get, sort_keys=['name'],
                          sort_dirs=['up'])
        self.assertRaises(exception.InvalidInput, get, sort_dirs=['asc'])
        self.assertRaises(exception.InvalidInput, get, limit=-1)
        self.assertRaises(exception.InvalidInput, get, limit='2')

    def _pages(self, limit, **kwargs):
        out, marker = [], None
        while True:
            page = self.db.policy_get_all(marker=marker, limit=limit,
                                          **kwargs)
            out.extend(page)
            if len(page) < limit:
                return out
            marker = page[-1]['id']

    def test_pages_cover_the_listing(self):
        for keys, dirs in ((None, None), (['name'], ['asc']),
                           (['rpo_seconds'], ['asc']),
                           (['rpo_seconds'], ['desc']),
                           (['updated_at', 'name'], ['desc', 'asc'])):
            whole = self.db.policy_get_all(sort_keys=keys, sort_dirs=dirs)
            self.assertEqual(7, len(whole))
            for limit in (1, 2, 3):
                self.assertEqual(
                    self.ids(whole),
                    self.ids(self._pages(limit, sort_keys=keys,
                                         sort_dirs=dirs)),
                    '%s %s limit %d' % (keys, dirs, limit))

    def test_pages_with_filter_and_project(self):
        self.assertEqual([3, 2, 1, 0], self.ids(
            self._pages(1, project_id='p1')))
        self.assertEqual([2, 0], self.ids(
            self._pages(1, filters={'enabled': True}, project_id='p1')))

    def test_bad_markers(self):
        self.assertRaises(exception.MarkerNotFound,
                          self.db.policy_get_all, marker='e' * 32)
        self.assertRaises(exception.MarkerNotFound,
                          self.db.policy_get_all, marker='%032x' % 6,
                          project_id='p1')


class TestPolicyImages(ProtectionTestCase):
    def setUp(self):
        super().setUp()
        self.pid = self.policy()['id']
        self.other = self.policy(name='silver')['id']

    def test_get_none(self):
        self.assertIsNone(self.db.policy_image_get(self.pid, 'i1'))

    def test_insert_then_update(self):
        row = self.db.policy_image_upsert(self.pid, 'i1', {
            'image_name': 'cirros', 'size': 5 << 30,
            'changed_at': minutes(1), 'project_id': 'p1'})
        self.assertEqual('pending', row['state'])
        self.assertEqual(5 << 30, row['size'])
        self.assertEqual((self.pid, 'i1'), (row['policy_id'],
                                            row['image_id']))
        self.assertEqual(row, self.db.policy_image_get(self.pid, 'i1'))
        new = self.db.policy_image_upsert(self.pid, 'i1', {
            'state': 'replicated', 'changed_at': None,
            'replicated_at': minutes(2), 'migration_id': 'm' * 32})
        self.assertEqual(row['id'], new['id'])
        self.assertEqual('replicated', new['state'])
        self.assertIsNone(new['changed_at'])
        self.assertEqual('cirros', new['image_name'])
        self.assertEqual(row['created_at'], new['created_at'])
        self.assertGreaterEqual(new['updated_at'], row['updated_at'])
        # The same image in another policy is another row.
        self.assertNotEqual(row['id'], self.db.policy_image_upsert(
            self.other, 'i1', {'state': 'syncing'})['id'])

    def test_upsert_errors(self):
        self.assertRaises(exception.InvalidInput,
                          self.db.policy_image_upsert, self.pid, 'i1',
                          {'colour': 'red'})
        self.assertRaises(exception.ProtectionPolicyNotFound,
                          self.db.policy_image_upsert, 'e' * 32, 'i1', {})
        self.assertEqual([], self.db.policy_images_get())

    def test_upsert_race(self):
        # Another writer inserts the row between our look and our
        # insert: the unique constraint refuses ours (DBDuplicateEntry)
        # and the upsert updates theirs.
        self.db.policy_image_upsert(self.pid, 'i1', {'state': 'pending'})
        real = protection._policy_image
        looks = []

        def racing(session, policy_id, image_id):
            looks.append(image_id)
            return None if len(looks) == 1 else real(session, policy_id,
                                                     image_id)

        with mock.patch.object(protection, '_policy_image', racing):
            row = self.db.policy_image_upsert(self.pid, 'i1',
                                              {'state': 'syncing'})
        self.assertEqual(2, len(looks))
        self.assertEqual('syncing', row['state'])
        self.assertEqual(1, len(self.db.policy_images_get(self.pid)))

    def _add(self, policy_id, image_id, minute, **values):
        values.setdefault('created_at', minutes(minute))
        return self.db.policy_image_upsert(policy_id, image_id, values)

    def test_list(self):
        self._add(self.pid, 'i3', 3, state='failed', migration_id='m1')
        self._add(self.pid, 'i1', 1, state='replicated')
        self._add(self.other, 'i1', 2, state='pending', migration_id='m1')
        self._add(self.pid, 'i2', 2, state='pending')

        def keys(rows):
            return [(r['policy_id'] == self.pid, r['image_id'])
                    for r in rows]

        get = self.db.policy_images_get
        self.assertEqual([(True, 'i1'), (False, 'i1'), (True, 'i2'),
                          (True, 'i3')], keys(get()))
        self.assertEqual([(True, 'i1'), (True, 'i2'), (True, 'i3')],
                         keys(get(self.pid)))
        self.assertEqual([(True, 'i1'), (False, 'i1')],
                         keys(get(image_id='i1')))
        self.assertEqual([(False, 'i1'), (True, 'i2')],
                         keys(get(states='pending')))
        self.assertEqual([(True, 'i1'), (True, 'i3')],
                         keys(get(self.pid, states=['replicated',
                                                    'failed'])))
        self.assertEqual([(False, 'i1'), (True, 'i3')],
                         keys(get(migration_id='m1')))
        self.assertEqual([(True, 'i1'), (False, 'i1')],
                         keys(get(limit=2)))
        self.assertRaises(exception.InvalidInput, get, limit=-1)

    def test_list_pages(self):
        for i in range(5):
            self._add(self.pid, 'i%d' % i, i // 2)   # equal times too
        out, marker = [], None
        while True:
            page = self.db.policy_images_get(self.pid, limit=2,
                                             marker=marker)
            out.extend(r['image_id'] for r in page)
            if len(page) < 2:
                break
            marker = page[-1]['image_id']
        self.assertEqual(['i0', 'i1', 'i2', 'i3', 'i4'], out)
        self.assertRaises(exception.MarkerNotFound,
                          self.db.policy_images_get, self.pid, marker='i9')
        self.assertRaises(exception.MarkerNotFound,
                          self.db.policy_images_get, marker='i1')

    def test_delete(self):
        self._add(self.pid, 'i1', 1)
        self._add(self.other, 'i1', 1)
        self.assertIsNone(self.db.policy_image_delete(self.pid, 'i1'))
        self.assertIsNone(self.db.policy_image_get(self.pid, 'i1'))
        self.assertIsNotNone(self.db.policy_image_get(self.other, 'i1'))
        # Nothing to delete: no error.
        self.db.policy_image_delete(self.pid, 'i1')
        self.db.policy_image_delete('e' * 32, 'i9')

    def test_counts(self):
        for image, state in (('i1', 'pending'), ('i2', 'pending'),
                             ('i3', 'replicated'), ('i4', 'failed')):
            self._add(self.pid, image, 1, state=state)
        self._add(self.other, 'i1', 1, state='syncing')
        third = self.policy(name='bronze')['id']
        self.assertEqual(
            {self.pid: {'pending': 2, 'replicated': 1, 'failed': 1},
             self.other: {'syncing': 1}, third: {}, 'e' * 32: {}},
            self.db.policy_image_counts([self.pid, self.other, third,
                                         'e' * 32]))
        self.assertEqual({self.other: {'syncing': 1}},
                         self.db.policy_image_counts(self.other))
        self.assertEqual({}, self.db.policy_image_counts([]))


class TestReplicas(ProtectionTestCase):
    def add(self, direction, peer, source, minute, **values):
        values.setdefault('created_at', minutes(minute))
        values.setdefault('project_id', None)
        return self.db.replica_upsert(direction, peer, source, values)

    def test_insert_then_update(self):
        self.assertIsNone(self.db.replica_get('outgoing', 'dtn-b', 's1',
                                              policy_id='f' * 32))
        row = self.db.replica_upsert('outgoing', 'dtn-b', 's1', {
            'replica_image_id': 'r1', 'project_id': 'p1', 'size': 1 << 40,
            'hash_algo': 'sha512', 'hash_value': 'ab' * 64,
            'policy_id': 'f' * 32, 'migration_id': 'm' * 32})
        self.assertEqual('current', row['state'])
        self.assertEqual(1 << 40, row['size'])
        self.assertEqual('policy:' + 'f' * 32, row['owner_key'])
        self.assertIsInstance(row['id'], int)
        self.assertEqual(row, self.db.replica_get('outgoing', 'dtn-b',
                                                  's1', policy_id='f' * 32))
        new = self.db.replica_upsert('outgoing', 'dtn-b', 's1', {
            'policy_id': 'f' * 32, 'state': 'deleted',
            'verified_at': minutes(3)})
        self.assertEqual(row['id'], new['id'])
        self.assertEqual('deleted', new['state'])
        self.assertEqual('r1', new['replica_image_id'])
        self.assertEqual(row['created_at'], new['created_at'])
        # Another direction, another peer: other rows.
        self.assertNotEqual(row['id'], self.db.replica_upsert(
            'incoming', 'dtn-b', 's1', {'policy_id': 'f' * 32})['id'])
        self.assertNotEqual(row['id'], self.db.replica_upsert(
            'outgoing', 'dtn-c', 's1', {'policy_id': 'f' * 32})['id'])
        self.assertRaises(exception.InvalidInput, self.db.replica_upsert,
                          'outgoing', 'dtn-b', 's1', {'colour': 'red',
                                                      'project_id': 'p1'})

    def test_one_row_per_owner(self):
        # A policy's replica, another policy's, a project's migration of
        # the same image, a migration without a project: four rows.
        rows = [self.db.replica_upsert('outgoing', 'dtn-b', 's1', values)
                for values in ({'policy_id': 'a' * 32, 'project_id': 'p1',
                                'replica_image_id': 'r1'},
                               {'policy_id': 'b' * 32, 'project_id': 'p1',
                                'replica_image_id': 'r2'},
                               {'policy_id': None, 'project_id': 'p2',
                                'replica_image_id': 'r3'},
                               {'project_id': None,
                                'replica_image_id': 'r4'})]
        self.assertEqual(4, len({r['id'] for r in rows}))
        self.assertEqual(
            ['policy:' + 'a' * 32, 'policy:' + 'b' * 32, 'project:p2',
             'project:'], [r['owner_key'] for r in rows])
        get = functools.partial(self.db.replica_get, 'outgoing', 'dtn-b',
                                's1')
        self.assertEqual('r1', get(policy_id='a' * 32)['replica_image_id'])
        self.assertEqual('r3', get(project_id='p2')['replica_image_id'])
        self.assertEqual('r4', get()['replica_image_id'])
        self.assertIsNone(get(project_id='p1'))
        # Project p2 again: its own row is updated, no other.
        again = self.db.replica_upsert('outgoing', 'dtn-b', 's1', {
            'project_id': 'p2', 'replica_image_id': 'r5'})
        self.assertEqual(rows[2]['id'], again['id'])
        self.assertEqual(['r1', 'r2', 'r4', 'r5'], sorted(
            r['replica_image_id'] for r in self.db.replica_get_all()))

    def test_upsert_needs_its_owner(self):
        for values in ({}, {'state': 'deleted'}, {'owner_key': 'policy:x'}):
            self.assertRaises(exception.InvalidInput, self.db.replica_upsert,
                              'outgoing', 'dtn-b', 's1', values)
        self.assertEqual([], self.db.replica_get_all())
        # The owner is what the values say, never a key given.
        row = self.db.replica_upsert('outgoing', 'dtn-b', 's1', {
            'project_id': 'p1', 'owner_key': 'policy:x'})
        self.assertEqual('project:p1', row['owner_key'])

    def test_update(self):
        row = self.db.replica_upsert('incoming', 'dtn-a', 's1', {
            'policy_id': 'a' * 32, 'project_id': 'p7'})
        new = self.db.replica_update(row['id'], {'state': 'deleted'})
        self.assertEqual(('deleted', row['id'], 'policy:' + 'a' * 32),
                         (new['state'], new['id'], new['owner_key']))
        for fixed in ('policy_id', 'project_id', 'owner_key', 'peer',
                      'source_image_id', 'direction', 'id'):
            self.assertRaises(exception.InvalidInput,
                              self.db.replica_update, row['id'],
                              {fixed: 'x'})
        self.assertIsNone(self.db.replica_update(row['id'] + 1,
                                                 {'state': 'deleted'}))
        self.assertEqual(new, self.db.replica_get(
            'incoming', 'dtn-a', 's1', policy_id='a' * 32))

    def test_upsert_race(self):
        self.db.replica_upsert('incoming', 'dtn-a', 's1',
                               {'project_id': 'p1'})
        real = protection._replica_obj
        looks = []

        def racing(session, *args):
            looks.append(args)
            return None if len(looks) == 1 else real(session, *args)

        with mock.patch.object(protection, '_replica_obj', racing):
            row = self.db.replica_upsert('incoming', 'dtn-a', 's1',
                                         {'project_id': 'p1',
                                          'replica_image_id': 'r1'})
        self.assertEqual(2, len(looks))
        self.assertEqual('r1', row['replica_image_id'])
        self.assertEqual(1, len(self.db.replica_get_all()))

    def _fill(self):
        for i in range(6):
            self.add('outgoing' if i < 4 else 'incoming',
                     'dtn-b' if i % 2 else 'dtn-c', 's%d' % i, i // 2,
                     replica_image_id='r%d' % i,
                     project_id='p1' if i < 3 else 'p2',
                     policy_id='pol-a' if i < 2 else None,
                     state='deleted' if i == 1 else 'current')

    def ids(self, rows):
        return [int(r['source_image_id'][1:]) for r in rows]

    def test_list(self):
        self._fill()
        get = self.db.replica_get_all
        # Newest first; the id breaks ties.
        self.assertEqual([5, 4, 3, 2, 1, 0], self.ids(get()))
        self.assertEqual([5, 4], self.ids(get({'direction': 'incoming'})))
        self.assertEqual([5, 3, 1], self.ids(get({'peer': 'dtn-b'})))
        self.assertEqual([1, 0], self.ids(get({'policy_id': 'pol-a'})))
        self.assertEqual([1], self.ids(get({'state': 'deleted'})))
        self.assertEqual([2], self.ids(get({'source_image_id': 's2'})))
        self.assertEqual([3, 2], self.ids(
            get({'replica_image_id': ['r2', 'r3']})))
        self.assertEqual([3, 1], self.ids(get({'peer': 'dtn-b',
                                               'direction': 'outgoing'})))
        self.assertEqual([2, 1, 0], self.ids(get(project_id='p1')))
        self.assertEqual([5, 4], self.ids(get(limit=2)))

    def test_bad_input(self):
        get = self.db.replica_get_all
        self.assertRaises(exception.InvalidInput, get, {'colour': 'red'})
        self.assertRaises(exception.InvalidInput, get, {'project_id': 'p'})
        self.assertRaises(exception.InvalidInput, get, limit=-1)

    def test_pages(self):
        self._fill()
        for kwargs, expected in (({}, [5, 4, 3, 2, 1, 0]),
                                 ({'project_id': 'p1'}, [2, 1, 0]),
                                 ({'filters': {'state': 'current'}},
                                  [5, 4, 3, 2, 0])):
            for limit in (1, 2, 4):
                out, marker = [], None
                while True:
                    page = self.db.replica_get_all(marker=marker,
                                                   limit=limit, **kwargs)
                    out.extend(page)
                    if len(page) < limit:
                        break
                    # The API passes the marker on as a string.
                    marker = str(page[-1]['id']) if limit == 2 else \
                        page[-1]['id']
                self.assertEqual(expected, self.ids(out),
                                 '%s limit %d' % (kwargs, limit))

    def test_bad_markers(self):
        self._fill()
        get = self.db.replica_get_all
        self.assertRaises(exception.MarkerNotFound, get, marker=999)
        self.assertRaises(exception.MarkerNotFound, get, marker='abc')
        other = self.db.replica_get('incoming', 'dtn-b', 's5',
                                    project_id='p2')['id']
        self.assertRaises(exception.MarkerNotFound, get, marker=other,
                          project_id='p1')


class TestUnavailable(testcase.TestCase):
    def test_outage_raises_database_unavailable(self):
        # Nothing listens on port 1.
        db = api.Database(connection='mysql+pymysql://root@127.0.0.1:1/x')
        self.assertRaises(exception.DatabaseUnavailable,
                          db.policy_get, 'a' * 32)
        self.assertRaises(exception.DatabaseUnavailable,
                          db.policy_image_upsert, 'a' * 32, 'i1', {})
        self.assertRaises(exception.DatabaseUnavailable,
                          db.replica_get_all)
