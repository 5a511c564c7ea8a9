"""/v1/migrations on a real database: create, list (filters, pages,
sorting), show with events, cancel and retry.
"""

import datetime
import urllib.parse
import uuid

from oslo_utils import timeutils

from dtn_migrate.api.schemas import migrations as schemas
from dtn_migrate.api import validation
from dtn_migrate import exception
from tests.unit.api import base


class TestCreate(base.ApiTestCase):

    def test_create_by_ids_202(self):
        resp = self.request('POST', '/v1/migrations', {
            'peer': 'b', 'images': [base.IMAGE, base.IMAGE2, base.IMAGE],
            'options': {'mode': 'serial', 'visibility': 'private',
                        'keep_id': False}})
        self.assertEqual(202, resp.status_int, resp.body)
        body = resp.json
        validation.validate(schemas.CREATE_RESPONSE, body, 'response')
        self.assertEqual(32, len(body['request_id']))
        self.assertEqual([base.IMAGE, base.IMAGE2],
                         [m['image_id'] for m in body['migrations']])
        for m in body['migrations']:
            self.assertEqual('queued', m['state'])
            self.assertEqual(base.PROJECT, m['project_id'])
            self.assertEqual('user-member', m['user_id'])
            self.assertEqual({'export': 0, 'transfer': 0, 'import': 0},
                             m['bytes'])
            self.assertTrue(m['created_at'].endswith('Z'))
        # What the engine was asked, with the caller's context.
        [(name, ctxt, kwargs)] = self.engine.calls
        self.assertEqual('migrate', name)
        self.assertEqual(base.PROJECT, ctxt['project_id'])
        self.assertEqual('user-member', ctxt['user'])
        self.assertEqual(['member', 'reader'], sorted(ctxt['roles']))
        self.assertEqual([base.IMAGE, base.IMAGE2], kwargs['images'])
        self.assertIsNone(kwargs['selector'])
        self.assertEqual({'mode': 'serial', 'visibility': 'private',
                          'keep_id': False}, kwargs['options'])

    def test_request_id_makes_a_retry_safe(self):
        request_id = str(uuid.uuid4())
        body = {'peer': 'b', 'images': [base.IMAGE],
                'request_id': request_id}
        first = self.request('POST', '/v1/migrations', body).json
        again = self.request('POST', '/v1/migrations', body).json
        self.assertEqual(uuid.UUID(request_id).hex, first['request_id'])
        self.assertEqual(first, again)
        self.assertEqual(1, len(self.db.migration_get_all()))

    def test_reused_is_carried(self):
        # Before: views.migration left the engine's ``reused`` out, so a
        # reused migration looked like a new one.
        first = self.request('POST', '/v1/migrations', {
            'peer': 'b', 'images': [base.IMAGE]}).json['migrations'][0]
        self.assertIs(False, first['reused'])
        real = self.engine.migrate

        def reusing(*args, **kwargs):
            result = real(*args, **kwargs)
            for row in result['migrations']:
                row['reused'] = True
            return result
        self.engine.migrate = reusing
        body = self.request('POST', '/v1/migrations', {
            'peer': 'b', 'images': [base.IMAGE]}).json
        validation.validate(schemas.CREATE_RESPONSE, body, 'response')
        self.assertIs(True, body['migrations'][0]['reused'])

    def test_a_running_migration_asked_otherwise_409(self):
        self.engine.raise_on_call = exception.MigrationInProgress(
            image_id=base.IMAGE, peer='b', migration_id='m1',
            state='running', created_at='2026-11-24T10:00:00Z',
            reason='force asks for another copy while it runs')
        error = self.assertError(409, self.request(
            'POST', '/v1/migrations', {'peer': 'b', 'images': [base.IMAGE],
                                       'options': {'force': True}}))
        self.assertIn('by migration m1 (running since '
                      '2026-11-24T10:00:00Z): force asks for another copy',
                      error['message'])

    def test_selector(self):
        resp = self.request('POST', '/v1/migrations', {
            'peer': 'b', 'tag': 't', 'properties': {'os': 'linux'}})
        self.assertEqual(202, resp.status_int, resp.body)
        kwargs = self.engine.calls[0][2]
        self.assertIsNone(kwargs['images'])
        self.assertEqual({'tag': 't', 'properties': {'os': 'linux'}},
                         kwargs['selector'])
        self.assertEqual([base.IMAGE], [m['image_id'] for m in
                                        resp.json['migrations']])

    def test_images_and_selector_together_400(self):
        error = self.assertError(400, self.request(
            'POST', '/v1/migrations',
            {'peer': 'b', 'images': [base.IMAGE], 'tag': 't'}))
        self.assertIn('either images', error['message'])
        error = self.assertError(400, self.request(
            'POST', '/v1/migrations', {'peer': 'b'}))
        self.assertIn('either images', error['message'])
        self.assertEqual([], self.engine.calls)

    def test_messages_name_the_field(self):
        for body, words in (
                ({'images': [base.IMAGE]}, 'peer is required'),
                ({'peer': 'b', 'images': ['nope']}, 'body images.0'),
                ({'peer': 'b', 'images': [base.IMAGE], 'x': 1}, "'x'"),
                ({'peer': 'b', 'images': [base.IMAGE],
                  'options': {'visibility': 'everyone'}},
                 'options.visibility'),
                ({'peer': 'b', 'images': [base.IMAGE],
                  'options': {'keep_id': 'yes'}}, 'boolean'),
                ({'peer': 'b', 'images': [base.IMAGE],
                  'request_id': 'r'}, 'request_id'),
                ({'peer': 'b\x00', 'images': [base.IMAGE]}, 'body peer'),
                ({'peer': 'b', 'images': [base.IMAGE] * 1001},
                 'at most 1000')):
            self.assertError(400, self.request('POST', '/v1/migrations',
                                               body), words)
        self.assertEqual([], self.engine.calls)

    def test_request_id_must_be_a_uuid(self):
        for value in ('r', 'r' * 40, 'g' * 32):
            resp = self.request('POST', '/v1/migrations', {
                'peer': 'b', 'images': [base.IMAGE], 'request_id': value})
            self.assertError(400, resp,
                             'body request_id is not a UUID: %r' % value)
        self.assertError(400, self.request(
            'GET', '/v1/migrations?request_id=r'),
            'query parameter request_id is not a UUID')

    def test_long_values_are_quoted_once_and_short(self):
        long = 'n' * 5000
        for resp in (
                self.request('POST', '/v1/migrations',
                             {'peer': 'b', 'images': [base.IMAGE],
                              long: 1}),
                self.request('POST', '/v1/migrations',
                             {'peer': 'b', 'images': [long]}),
                self.request('GET', '/v1/migrations/' + long),
                self.request('GET', '/v1/peers/' + long)):
            message = self.assertError(resp.status_int, resp)['message']
            self.assertIn("…(5000 characters)", message)
            self.assertEqual(1, message.count('n' * 64), message)
            self.assertLess(len(message), 300, message)

    def test_engine_not_found_404(self):
        self.assertError(404, self.request(
            'POST', '/v1/migrations', {'peer': 'nowhere',
                                       'images': [base.IMAGE]}), 'nowhere')
        self.assertError(404, self.request(
            'POST', '/v1/migrations', {'peer': 'b', 'images': ['f' * 32]}),
            str(uuid.UUID('f' * 32)))


class TestList(base.ApiTestCase):

    def setUp(self):
        super().setUp()
        start = datetime.datetime(2026, 11, 24, 10, 0, 0)
        self.rows = []
        for i in range(7):
            t = start + datetime.timedelta(minutes=i)
            self.rows.append(self.add(
                state=('running', 'complete', 'failed')[i % 3],
                peer=('b', 'c')[i % 2], request_id='%032x' % (i % 2),
                image_name='img%d' % (6 - i), created_at=t, updated_at=t))
        self.others = [self.add(project=base.OTHER)]

    def ids(self, resp):
        self.assertEqual(200, resp.status_int, resp.body)
        validation.validate(schemas.LIST_RESPONSE, resp.json, 'response')
        return [m['id'] for m in resp.json['migrations']]

    def test_own_project_newest_first(self):
        self.assertEqual([r['id'] for r in reversed(self.rows)],
                         self.ids(self.request('GET', '/v1/migrations')))
        self.assertEqual([self.others[0]['id']], self.ids(self.request(
            'GET', '/v1/migrations', persona='other')))

    def test_admin_all_projects(self):
        everything = self.ids(self.request(
            'GET', '/v1/migrations?all_projects=true', persona='admin'))
        self.assertEqual(8, len(everything))
        # Without all_projects, an admin lists the admin's own project.
        self.assertEqual([], self.ids(self.request(
            'GET', '/v1/migrations', persona='admin')))
        self.assertEqual(7, len(self.ids(self.request(
            'GET', '/v1/migrations?all_projects=false'))))

    def test_all_projects_is_admin_only(self):
        for persona in ('member', 'reader', 'other'):
            self.assertError(403, self.request(
                'GET', '/v1/migrations?all_projects=1', persona=persona),
                'all_projects')

    def test_filters(self):
        def ids(query):
            return set(self.ids(self.request('GET',
                                             '/v1/migrations?' + query)))
        self.assertEqual({r['id'] for r in self.rows
                          if r['state'] == 'failed'}, ids('state=failed'))
        self.assertEqual({r['id'] for r in self.rows
                          if r['state'] != 'running'},
                         ids('state=failed&state=complete'))
        self.assertEqual({r['id'] for r in self.rows if r['peer'] == 'c'},
                         ids('peer=c'))
        self.assertEqual(set(), ids('direction=incoming'))
        self.assertEqual({r['id'] for r in self.rows
                          if r['request_id'] == '%032x' % 1},
                         ids('request_id=' + str(uuid.UUID(int=1))))
        self.assertEqual(7, len(ids('image_id=' + base.IMAGE)))
        self.assertEqual(7, len(ids('image_id=' +
                                    uuid.UUID(base.IMAGE).hex)))
        self.assertEqual({r['id'] for r in self.rows[5:]},
                         ids('changes-since=2026-11-24T10:05:00Z'))
        self.assertEqual({r['id'] for r in self.rows[5:]}, ids(
            'changes-since=' + urllib.parse.quote(
                '2026-11-24T11:05:00+01:00')))

    def test_pages_follow_next(self):
        seen = []
        url = '/v1/migrations?limit=3&state=running&state=complete' \
              '&state=failed'
        pages = 0
        while url:
            resp = self.request('GET', url)
            seen.extend(self.ids(resp))
            pages += 1
            links = resp.json.get('links')
            url = None
            if links:
                [link] = links
                self.assertEqual('next', link['rel'])
                parts = urllib.parse.urlsplit(link['href'])
                self.assertEqual('/v1/migrations', parts.path)
                query = urllib.parse.parse_qs(parts.query)
                self.assertEqual(['3'], query['limit'])
                self.assertEqual(3, len(query['state']))
                url = parts.path + '?' + parts.query
        self.assertEqual(3, pages)
        self.assertEqual([r['id'] for r in reversed(self.rows)], seen)

    def test_no_next_link_on_an_exact_last_page(self):
        resp = self.request('GET', '/v1/migrations?limit=7')
        self.assertEqual(7, len(self.ids(resp)))
        self.assertNotIn('links', resp.json)

    def test_default_and_max_limit(self):
        self.conf.set_override('default_limit', 2, 'api')
        self.assertEqual(2, len(self.ids(self.request('GET',
                                                      '/v1/migrations'))))
        self.conf.set_override('max_limit', 4, 'api')
        self.assertError(400, self.request('GET', '/v1/migrations?limit=5'),
                         'at most 4')

    def test_sorting(self):
        resp = self.request('GET', '/v1/migrations?sort_key=image_name'
                                   '&sort_dir=asc')
        self.assertEqual([r['id'] for r in reversed(self.rows)],
                         self.ids(resp))
        resp = self.request('GET', '/v1/migrations?sort_dir=asc')
        self.assertEqual([r['id'] for r in self.rows], self.ids(resp))

    def test_marker_of_another_project_400(self):
        self.assertError(400, self.request(
            'GET', '/v1/migrations?marker=' + self.others[0]['id']),
            'Marker')
        self.assertError(400, self.request(
            'GET', '/v1/migrations?marker=' + 'f' * 32), 'Marker')

    def test_bad_parameters_name_themselves(self):
        for query, words in (
                ('limit=0', 'limit'), ('limit=abc', 'limit'),
                ('limit=1001', 'limit'), ('limit=1&limit=2', 'limit'),
                ('sort_key=password', 'sort_key'),
                ('sort_dir=up', 'sort_dir'),
                ('changes-since=yesterday', 'changes-since'),
                ('changes-since=2026-13-45T99:00:00', 'changes-since'),
                ('state=exploded', 'state'),
                ('direction=sideways', 'direction'),
                ('all_projects=maybe', 'all_projects'),
                ('image_id=abc', 'image_id'),
                ('marker=%27%3B+DROP+TABLE', 'marker'),
                ('colour=red', 'colour')):
            self.assertError(400, self.request('GET',
                                               '/v1/migrations?' + query),
                             words)


class TestShow(base.ApiTestCase):

    def test_show_with_events(self):
        now = timeutils.utcnow()
        row = self.add(stage='transfer', bytes_export=100,
                       bytes_transfer=40, progress=0.35, rate=1.5e6,
                       eta=12.5, size=100, started_at=now)
        self.db.migration_event_add(row['id'], None, 'queued')
        self.db.migration_event_add(row['id'], 'export', 'started')
        self.db.migration_event_add(row['id'], 'export', 'finished',
                                    bytes=100)
        for key in (row['id'], str(uuid.UUID(row['id']))):
            resp = self.request('GET', '/v1/migrations/' + key)
            self.assertEqual(200, resp.status_int, resp.body)
            validation.validate(schemas.SHOW_RESPONSE, resp.json, 'response')
            m = resp.json['migration']
            self.assertEqual(row['id'], m['id'])
            self.assertEqual({'export': 100, 'transfer': 40, 'import': 0},
                             m['bytes'])
            self.assertEqual((0.35, 1.5e6, 12.5),
                             (m['progress'], m['rate'], m['eta']))
            self.assertEqual('transfer', m['stage'])
            self.assertEqual(now.strftime('%Y-%m-%dT%H:%M:%S.%fZ'),
                             m['started_at'])
            self.assertEqual(['queued', 'started', 'finished'],
                             [e['event'] for e in m['events']])
            self.assertEqual(100, m['events'][2]['bytes'])

    def test_owner_and_epoch_stay_the_engine_s(self):
        # The fencing of active/active engines (issue 39) is not the
        # API's: neither a show nor a listing says which engine holds a
        # migration.
        row = self.add()
        self.db.migration_claim(row['id'], 'engine-host-1', 0)
        resp = self.request('GET', '/v1/migrations/' + row['id'])
        self.assertEqual(200, resp.status_int, resp.body)
        validation.validate(schemas.SHOW_RESPONSE, resp.json, 'response')
        listed = self.request('GET', '/v1/migrations')
        self.assertEqual(200, listed.status_int, listed.body)
        for m in [resp.json['migration']] + listed.json['migrations']:
            self.assertNotIn('owner', m)
            self.assertNotIn('epoch', m)
        self.assertNotIn(b'engine-host-1', resp.body + listed.body)

    def test_not_found(self):
        for key in ('f' * 32, 'not-a-uuid', '\u00e9' * 40):
            self.assertError(404, self.request(
                'GET', '/v1/migrations/' + urllib.parse.quote(key)))

    def test_unknown_query_400(self):
        row = self.add()
        self.assertError(400, self.request(
            'GET', '/v1/migrations/%s?verbose=1' % row['id']), 'verbose')


class TestActions(base.ApiTestCase):

    def action(self, row, body, persona='member'):
        return self.request('POST', '/v1/migrations/%s/action' % row['id'],
                            body, persona=persona)

    def test_cancel_then_retry(self):
        row = self.add()
        resp = self.action(row, {'cancel': None})
        self.assertEqual(202, resp.status_int, resp.body)
        validation.validate(schemas.ACTION_RESPONSE, resp.json, 'response')
        self.assertEqual('cancelled', resp.json['migration']['state'])
        resp = self.action(row, {'retry': None})
        self.assertEqual(202, resp.status_int, resp.body)
        self.assertEqual('queued', resp.json['migration']['state'])
        self.assertEqual(['cancel_migration', 'retry_migration'],
                         [c[0] for c in self.engine.calls])
        self.assertEqual(row['id'], self.engine.calls[0][2]['migration_id'])

    def test_conflict_409(self):
        row = self.add(state='complete')
        self.assertError(409, self.action(row, {'retry': None}), 'complete')
        self.assertError(409, self.action(row, {'cancel': None}),
                         'is already complete: cannot cancel it')

    def test_bad_actions_400(self):
        row = self.add()
        for body in ({}, {'cancel': None, 'retry': None}, {'explode': None},
                     {'cancel': {'now': True}}, {'retry': 1}, [], None):
            self.assertError(400, self.action(row, body))
        self.assertEqual([], self.engine.calls)

    def test_unknown_migration_404(self):
        self.assertError(404, self.action({'id': 'f' * 32},
                                          {'cancel': None}))
