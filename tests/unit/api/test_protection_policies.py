"""/v1/policies and /v1/replicas on a real database: create, list,
show, update, delete, sync, failover and failback, the images of a
policy, the replica catalog; tight bodies (4xx, never 5xx).
"""

import uuid

from dtn_migrate.api.schemas import protection_policies as schemas
from dtn_migrate.api.schemas import replicas as replica_schemas
from dtn_migrate.api import validation
from dtn_migrate.common import states
from dtn_migrate import exception
from tests.unit.api import base

BODY = {'name': 'gold', 'peer': 'b', 'selector': {'tags': ['gold']}}


class TestCreate(base.ApiTestCase):

    def test_create_201_with_defaults(self):
        resp = self.request('POST', '/v1/policies', BODY)
        self.assertEqual(201, resp.status_int, resp.body)
        validation.validate(schemas.SHOW_RESPONSE, resp.json, 'response')
        policy = resp.json['policy']
        self.assertEqual(32, len(policy['id']))
        self.assertEqual(('gold', 'b', 'continuous', True, base.PROJECT),
                         (policy['name'], policy['peer'], policy['mode'],
                          policy['enabled'], policy['project_id']))
        self.assertEqual({'tags': ['gold'], 'properties': {},
                          'visibility': [], 'name_pattern': None,
                          'projects': []}, policy['selector'])
        self.assertEqual(base.POLICY_OPTIONS, policy['options'])
        self.assertEqual({'target_minutes': 60, 'state': None,
                          'seconds': None, 'checked_at': None},
                         policy['rpo'])
        self.assertEqual(dict.fromkeys(states.POLICY_IMAGE_STATES, 0),
                         policy['images'])
        [(name, ctxt, kwargs)] = self.engine.calls
        self.assertEqual('create_policy', name)
        self.assertEqual(base.PROJECT, ctxt['project_id'])
        self.assertEqual(BODY, kwargs['values'])

    def test_full_body(self):
        body = dict(BODY, description='line 1\nline 2', mode='scheduled',
                    schedule='0 2 * * *', rpo_minutes=1440, enabled=False,
                    selector={'tags': ['a', 'b'],
                              'properties': {'os': 'linux'},
                              'visibility': ['private', 'shared'],
                              'name_pattern': 'db-*'},
                    options={'keep_id': True, 'target_project': 'p2',
                             'deletion': 'mirror',
                             'deletion_grace_minutes': 0})
        # keep_id and target_project are an administrator's.
        resp = self.request('POST', '/v1/policies', body, persona='admin')
        self.assertEqual(201, resp.status_int, resp.body)
        policy = resp.json['policy']
        self.assertEqual('0 2 * * *', policy['schedule'])
        self.assertEqual(1440, policy['rpo']['target_minutes'])
        self.assertEqual(body['options'], policy['options'])
        self.assertEqual('db-*', policy['selector']['name_pattern'])

    def test_duplicate_name_409(self):
        self.request('POST', '/v1/policies', BODY)
        self.assertError(409, self.request('POST', '/v1/policies', BODY),
                         'gold')

    def test_refused_by_the_peers_preflight_409(self):
        # Issue 37, 3: the peer's import rules refuse the policy.
        self.engine.raise_on_call = exception.PreflightRefused(
            peer='b', what="the policy's imports",
            reason='Peer a may not import into project p9: [peer:a] does '
                   'not allow it for source project %s' % base.PROJECT)
        error = self.assertError(409, self.request(
            'POST', '/v1/policies', dict(BODY, options={
                'target_project': 'p9'}), persona='admin'))
        self.assertIn("Peer b refused the policy's imports before any byte "
                      "was sent: Peer a may not import into project p9",
                      error['message'])

    def test_unknown_peer_404(self):
        self.assertError(404, self.request(
            'POST', '/v1/policies', dict(BODY, peer='zz')))

    def test_bad_bodies_400(self):
        for body, words in (
                ({'peer': 'b', 'selector': {'tags': ['x']}},
                 'name is required'),
                (dict(BODY, selector={}), 'at least one of'),
                (dict(BODY, selector={'tags': []}), 'at least one of'),
                (dict(BODY, selector={'projects': ['p']}),
                 'at least one of'),
                (dict(BODY, selector={'tags': ['x'], 'tag': 'x'}),
                 "unknown field 'tag'"),
                (dict(BODY, selector={'tags': ['x'] * 2}), 'non-unique'),
                (dict(BODY, selector={'tags': ['x' * 256]}), 'at most'),
                (dict(BODY, selector={'visibility': ['secret']}),
                 'must be one of'),
                (dict(BODY, selector={'properties': {'k': 1}}),
                 'must be of type'),
                (dict(BODY, rpo_minutes=0), 'at least 1'),
                (dict(BODY, rpo_minutes=525601), 'at most 525600'),
                (dict(BODY, rpo_minutes=1.5), 'must be of type'),
                (dict(BODY, mode='hourly'), 'must be one of'),
                (dict(BODY, mode='scheduled'), 'schedule is required'),
                (dict(BODY, schedule='0 2 * * *'), 'only for mode'),
                (dict(BODY, options={'deletion': 'purge'}),
                 'must be one of'),
                (dict(BODY, options={'deletion_grace_minutes': -1}),
                 'at least 0'),
                (dict(BODY, options={'force': True}), 'unknown field'),
                (dict(BODY, name='a\x00b'), 'printable'),
                (dict(BODY, id='f' * 32), "unknown field 'id'"),
                (dict(BODY, description='x' * 1025), 'at most')):
            error = self.assertError(400, self.request(
                'POST', '/v1/policies', body))
            self.assertIn(words, error['message'], body)
        self.assertEqual([], self.engine.calls)

    def test_projects_need_the_admin_rule(self):
        body = dict(BODY, selector={'tags': ['x'], 'projects': ['p2']})
        self.assertError(403, self.request('POST', '/v1/policies', body),
                         'dtn:policy:create:projects')
        self.assertError(403, self.request(
            'POST', '/v1/policies', dict(BODY, project_id=base.OTHER)))
        resp = self.request('POST', '/v1/policies',
                            dict(BODY, project_id=base.OTHER),
                            persona='admin')
        self.assertEqual(201, resp.status_int, resp.body)
        self.assertEqual(base.OTHER, resp.json['policy']['project_id'])
        resp = self.request('POST', '/v1/policies', body, persona='admin')
        self.assertEqual(201, resp.status_int, resp.body)


class TestRead(base.ApiTestCase):

    def test_list_filters_pages_and_counts(self):
        rows = [self.add_policy(name='p%d' % i, peer='b' if i % 2 else 'c')
                for i in range(5)]
        self.add_policy(project=base.OTHER, name='theirs')
        self.db.policy_image_upsert(rows[0]['id'], base.IMAGE,
                                    {'state': 'replicated'})
        body = self.request('GET', '/v1/policies').json
        validation.validate(schemas.LIST_RESPONSE, body, 'response')
        self.assertEqual(['p4', 'p3', 'p2', 'p1', 'p0'],
                         [p['name'] for p in body['policies']])
        self.assertEqual(1, body['policies'][-1]['images']['replicated'])
        self.assertEqual(['p3', 'p1'], [p['name'] for p in self.request(
            'GET', '/v1/policies?peer=b').json['policies']])
        self.assertEqual(['p2'], [p['name'] for p in self.request(
            'GET', '/v1/policies?name=p2').json['policies']])
        page = self.request('GET', '/v1/policies?limit=2').json
        self.assertEqual(2, len(page['policies']))
        href = page['links'][0]['href']
        self.assertIn('marker=' + page['policies'][1]['id'], href)
        nxt = self.request('GET', href[href.index('/v1'):]).json
        self.assertEqual(['p2', 'p1'],
                         [p['name'] for p in nxt['policies']])
        self.assertEqual(6, len(self.request(
            'GET', '/v1/policies?all_projects=true',
            persona='admin').json['policies']))
        self.assertError(403, self.request(
            'GET', '/v1/policies?all_projects=true'))

    def test_bad_queries_400(self):
        for query in ('limit=0', 'mode=hourly', 'rpo_state=bad',
                      'marker=nope', 'sort_key=peer', 'enabled=maybe',
                      'x=1', 'marker=' + 'f' * 32):
            self.assertError(400, self.request('GET', '/v1/policies?' +
                                               query))

    def test_show_and_404(self):
        row = self.add_policy()
        resp = self.request('GET', '/v1/policies/' +
                            str(uuid.UUID(row['id'])))
        self.assertEqual(200, resp.status_int, resp.body)
        self.assertEqual(row['id'], resp.json['policy']['id'])
        for pid in ('f' * 32, 'nope', 'x' * 300):
            self.assertError(404, self.request('GET', '/v1/policies/' +
                                               pid))
        self.assertError(404, self.request(
            'GET', '/v1/policies/' + row['id'], persona='other'))

    def test_images(self):
        row = self.add_policy()
        self.db.policy_image_upsert(row['id'], base.IMAGE, {
            'state': 'replicated', 'image_name': 'cirros', 'size': 10})
        self.db.policy_image_upsert(row['id'], base.IMAGE2, {
            'state': 'failed', 'error': 'boom'})
        path = '/v1/policies/%s/images' % row['id']
        body = self.request('GET', path).json
        validation.validate(schemas.IMAGES_RESPONSE, body, 'response')
        self.assertEqual([base.IMAGE, base.IMAGE2],
                         [i['image_id'] for i in body['images']])
        self.assertEqual(['boom'], [i['error'] for i in self.request(
            'GET', path + '?state=failed').json['images']])
        page = self.request('GET', path + '?limit=1').json
        href = page['links'][0]['href']
        self.assertEqual([base.IMAGE2], [i['image_id'] for i in self.request(
            'GET', href[href.index('/v1'):]).json['images']])
        self.assertError(400, self.request(
            'GET', path + '?marker=' + str(uuid.uuid4())))
        self.assertError(400, self.request('GET', path + '?state=gone'))
        self.assertError(404, self.request('GET', path, persona='other'))


class TestWrite(base.ApiTestCase):

    def test_update(self):
        row = self.add_policy()
        path = '/v1/policies/' + row['id']
        resp = self.request('PUT', path, {'rpo_minutes': 5,
                                          'enabled': False})
        self.assertEqual(200, resp.status_int, resp.body)
        self.assertEqual((5, False),
                         (resp.json['policy']['rpo']['target_minutes'],
                          resp.json['policy']['enabled']))
        self.assertEqual({'rpo_minutes': 5, 'enabled': False},
                         self.engine.calls[-1][2]['values'])
        for body, words in (({}, 'at least 1'),
                            ({'project_id': 'p'}, 'unknown field'),
                            ({'mode': 'scheduled'}, 'schedule is'),
                            ({'selector': {}}, 'at least one of'),
                            ({'name': None}, 'must be of type')):
            self.assertError(400, self.request('PUT', path, body), words)
        resp = self.request('PUT', path, {'mode': 'scheduled',
                                          'schedule': '*/5 * * * *'})
        self.assertEqual(200, resp.status_int, resp.body)
        self.assertError(404, self.request('PUT', path, {'enabled': True},
                                           persona='other'))
        self.assertError(403, self.request('PUT', path, {'enabled': True},
                                           persona='reader'))
        self.assertError(403, self.request(
            'PUT', path, {'selector': {'tags': ['x'], 'projects': ['p']}}))

    def test_delete(self):
        row = self.add_policy()
        path = '/v1/policies/' + row['id']
        self.assertError(404, self.request('DELETE', path,
                                           persona='other'))
        self.assertError(403, self.request('DELETE', path,
                                           persona='reader'))
        resp = self.request('DELETE', path)
        self.assertEqual(204, resp.status_int, resp.body)
        self.assertEqual(b'', resp.body)
        self.assertError(404, self.request('GET', path))
        self.assertError(404, self.request('DELETE', path))

    def test_sync(self):
        row = self.add_policy()
        path = '/v1/policies/%s/action' % row['id']
        resp = self.request('POST', path, {'sync': None})
        self.assertEqual(202, resp.status_int, resp.body)
        validation.validate(schemas.ACTION_RESPONSE, resp.json, 'response')
        self.assertEqual(1, resp.json['policy']['images']['syncing'])
        self.assertEqual([base.IMAGE], [m['image_id'] for m in
                                        resp.json['migrations']])
        for body in ({}, {'sync': 1}, {'sync': None, 'x': None},
                     {'cancel': None}):
            self.assertError(400, self.request('POST', path, body))
        self.assertError(404, self.request('POST', path, {'sync': None},
                                           persona='other'))
        self.assertError(403, self.request('POST', path, {'sync': None},
                                           persona='reader'))

    def replica_policy(self, project=base.PROJECT):
        """The policy a replicas' cloud learnt from its peer, with one
        incoming replica.
        """
        row = self.add_policy(project=project, role='replica',
                              mode='manual', enabled=False)
        self.db.replica_upsert('incoming', 'b', base.IMAGE, {
            'replica_image_id': base.IMAGE2, 'project_id': project,
            'policy_id': row['id']})
        return row

    def test_failover(self):
        row = self.replica_policy()
        path = '/v1/policies/%s/action' % row['id']
        resp = self.request('POST', path, {'failover': None},
                            persona='admin')
        self.assertEqual(202, resp.status_int, resp.body)
        validation.validate(schemas.FAILOVER_RESPONSE, resp.json,
                            'response')
        validation.validate(schemas.ACTION_RESPONSE, resp.json, 'response')
        policy, reverse = resp.json['policy'], resp.json['reverse_policy']
        self.assertEqual(('failed-over', 1),
                         (policy['role'], resp.json['promoted']))
        self.assertEqual(('gold-failback', 'failback', 'manual', 'b',
                          base.PROJECT, [base.PROJECT], True),
                         (reverse['name'], reverse['role'], reverse['mode'],
                          reverse['peer'], reverse['project_id'],
                          reverse['selector']['projects'],
                          reverse['options']['keep_id']))
        self.assertEqual(('failover_policy', row['id']),
                         (self.engine.calls[-1][0],
                          self.engine.calls[-1][2]['policy_id']))
        # Again: the same reverse policy.
        again = self.request('POST', path, {'failover': None},
                             persona='admin')
        self.assertEqual(202, again.status_int, again.body)
        self.assertEqual(reverse['id'], again.json['reverse_policy']['id'])
        # An operator's action: members and readers may not.
        for persona in ('member', 'reader', 'other', 'nobody'):
            self.assertError(403, self.request('POST', path,
                                               {'failover': None},
                                               persona=persona))
        # The primary side answers 409.
        primary = self.add_policy(name='primary')
        self.assertError(409, self.request(
            'POST', '/v1/policies/%s/action' % primary['id'],
            {'failover': None}, persona='admin'), 'fail over')
        self.assertError(404, self.request(
            'POST', '/v1/policies/%s/action' % ('f' * 32),
            {'failover': None}, persona='admin'))

    def test_failback(self):
        row = self.replica_policy()
        path = '/v1/policies/%s/action' % row['id']
        self.assertError(409, self.request('POST', path, {'failback': None},
                                           persona='admin'), 'fail back')
        reverse = self.request('POST', path, {'failover': None},
                               persona='admin').json['reverse_policy']
        self.db.policy_image_upsert(reverse['id'], base.IMAGE2, {
            'state': 'pending', 'image_name': 'new',
            'project_id': base.PROJECT})
        resp = self.request('POST', path, {'failback': None},
                            persona='admin')
        self.assertEqual(202, resp.status_int, resp.body)
        validation.validate(schemas.FAILBACK_RESPONSE, resp.json,
                            'response')
        validation.validate(schemas.ACTION_RESPONSE, resp.json, 'response')
        self.assertFalse(resp.json['complete'])
        self.assertEqual([base.IMAGE2], [m['image_id'] for m in
                                         resp.json['migrations']])
        self.assertEqual('failed-over', resp.json['policy']['role'])
        self.db.policy_image_upsert(reverse['id'], base.IMAGE2,
                                    {'state': 'replicated'})
        resp = self.request('POST', path, {'failback': None},
                            persona='admin')
        self.assertEqual(202, resp.status_int, resp.body)
        self.assertEqual((True, [], 'replica', False),
                         (resp.json['complete'], resp.json['migrations'],
                          resp.json['policy']['role'],
                          resp.json['reverse_policy']['enabled']))
        # Done: complete at once, again and again.
        resp = self.request('POST', path, {'failback': None},
                            persona='admin')
        self.assertEqual((202, True), (resp.status_int,
                                       resp.json['complete']))
        for persona in ('member', 'reader', 'other', 'nobody'):
            self.assertError(403, self.request('POST', path,
                                               {'failback': None},
                                               persona=persona))

    def test_failback_without_reverse_policy_answers_null(self):
        row = self.replica_policy()
        self.db.policy_update(row['id'], {'options': dict(
            base.POLICY_OPTIONS, failover={'done': True,
                                           'reverse_policy_id': 'e' * 32})})
        resp = self.request('POST', '/v1/policies/%s/action' % row['id'],
                            {'failback': None}, persona='admin')
        self.assertEqual(202, resp.status_int, resp.body)
        validation.validate(schemas.FAILBACK_RESPONSE, resp.json,
                            'response')
        self.assertEqual((None, True), (resp.json['reverse_policy'],
                                        resp.json['complete']))

    def test_one_action_at_a_time(self):
        row = self.replica_policy()
        path = '/v1/policies/%s/action' % row['id']
        for body in ({'failover': None, 'failback': None},
                     {'sync': None, 'failover': None}, {'failover': 1},
                     {'failback': {}}, {'failover': None, 'x': None},
                     {'fail-over': None}, {'Failover': None}):
            self.assertError(400, self.request('POST', path, body,
                                               persona='admin'))
        self.assertEqual([], self.engine.calls)

    def test_engine_away_503(self):
        import oslo_messaging as messaging
        self.engine.raise_on_call = messaging.MessagingTimeout('gone')
        self.assertError(503, self.request('POST', '/v1/policies', BODY))


class TestReplicas(base.ApiTestCase):

    def test_list(self):
        policy = self.add_policy()
        for i in range(3):
            self.db.replica_upsert('outgoing', 'b', str(uuid.UUID(int=i)), {
                'replica_image_id': str(uuid.UUID(int=100 + i)),
                'project_id': base.PROJECT, 'policy_id': policy['id'],
                'size': 5})
        self.db.replica_upsert('incoming', 'c', str(uuid.UUID(int=9)),
                               {'project_id': base.OTHER})
        body = self.request('GET', '/v1/replicas').json
        validation.validate(replica_schemas.LIST_RESPONSE, body,
                            'response')
        self.assertEqual(3, len(body['replicas']))
        self.assertEqual({'current'}, {r['state'] for r in body['replicas']})
        page = self.request('GET', '/v1/replicas?limit=2').json
        href = page['links'][0]['href']
        self.assertEqual(1, len(self.request(
            'GET', href[href.index('/v1'):]).json['replicas']))
        self.assertEqual(3, len(self.request(
            'GET', '/v1/replicas?policy_id=' + policy['id']).json[
            'replicas']))
        self.assertEqual(0, len(self.request(
            'GET', '/v1/replicas?direction=incoming').json['replicas']))
        self.assertEqual(1, len(self.request(
            'GET', '/v1/replicas?direction=incoming&all_projects=1',
            persona='admin').json['replicas']))
        self.assertEqual(1, len(self.request(
            'GET', '/v1/replicas?source_image_id=' +
            str(uuid.UUID(int=1))).json['replicas']))
        self.assertError(403, self.request(
            'GET', '/v1/replicas?all_projects=true'))
        self.assertError(403, self.request('GET', '/v1/replicas',
                                           persona='nobody'))
        for query in ('marker=x', 'marker=0', 'limit=0', 'state=gone',
                      'direction=up', 'policy_id=x', 'peer=', 'y=1',
                      'marker=99999'):
            self.assertError(400, self.request('GET', '/v1/replicas?' +
                                               query))
