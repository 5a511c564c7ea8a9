"""What a project member may ask of the peer cloud, and see of it (issue
36, items 1, 4 and 11): the project, visibility and ids of the images
created on the peer are an administrator's to choose, for migrations
and protection policies alike; deleting a policy that is not primary is
an administrator's; the peers' addresses, ports and probe errors are
for administrators.
"""

from tests.unit.api import base

#: (option, a value that needs its rule, the rule)
MIGRATION_ASKS = (
    ('target_project', 'p-peer', 'dtn:migration:create:target_project'),
    ('visibility', 'public', 'dtn:migration:create:visibility'),
    ('visibility', 'community', 'dtn:migration:create:visibility'),
    ('visibility', 'shared', 'dtn:migration:create:visibility'),
    ('keep_id', True, 'dtn:migration:create:keep_id'),
)
POLICY_ASKS = (
    ('target_project', 'p-peer', 'dtn:policy:create:target_project'),
    ('keep_id', True, 'dtn:policy:create:keep_id'),
)
POLICY = {'name': 'gold', 'peer': 'b', 'selector': {'tags': ['gold']}}


class TestMigrationOptions(base.ApiTestCase):

    def migrate(self, options, persona='member'):
        return self.request('POST', '/v1/migrations', {
            'peer': 'b', 'images': [base.IMAGE], 'options': options},
            persona=persona)

    def asked(self):
        """The options the engine got with the last request."""
        return self.engine.calls[-1][2]['options']

    def test_a_member_may_not_ask(self):
        for persona in ('member', 'other'):
            for key, value, rule in MIGRATION_ASKS:
                resp = self.migrate({key: value}, persona)
                error = self.assertError(403, resp, 'options.%s' % key)
                self.assertIn(rule, error['message'])
        # Nothing reached the engine.
        self.assertEqual([], self.engine.calls)
        self.assertEqual([], self.db.migration_get_all())

    def test_an_admin_may(self):
        for key, value, _rule in MIGRATION_ASKS:
            resp = self.migrate({key: value}, 'admin')
            self.assertEqual(202, resp.status_int, resp.body)
            self.assertEqual(value, self.asked()[key])
        # And the source image's visibility is left to the peer's rules.
        self.assertEqual(202, self.migrate({}, 'admin').status_int)
        self.assertEqual({}, self.asked())

    def test_what_a_member_may_ask(self):
        for options in ({'visibility': 'private'}, {'keep_id': False},
                        {'mode': 'serial', 'verify': False}):
            resp = self.migrate(options)
            self.assertEqual(202, resp.status_int, resp.body)

    def test_a_members_images_are_imported_private(self):
        # Not with the source image's visibility: a member may migrate a
        # public image it can read, or one it made community, and would
        # publish it on the peer.
        self.assertEqual(202, self.migrate({'mode': 'serial'}).status_int)
        self.assertEqual({'mode': 'serial', 'visibility': 'private'},
                         self.asked())
        self.assertEqual(202, self.request('POST', '/v1/migrations', {
            'peer': 'b', 'tag': 't'}).status_int)
        self.assertEqual({'visibility': 'private'}, self.asked())


class TestPolicyOptions(base.ApiTestCase):

    def test_create(self):
        for key, value, rule in POLICY_ASKS:
            body = dict(POLICY, options={key: value})
            error = self.assertError(403, self.request(
                'POST', '/v1/policies', body), 'options.%s' % key)
            self.assertIn(rule, error['message'])
        self.assertEqual([], self.db.policy_get_all())
        for key, value, _rule in POLICY_ASKS:
            body = dict(POLICY, name='gold-%s' % key, options={key: value})
            resp = self.request('POST', '/v1/policies', body,
                                persona='admin')
            self.assertEqual(201, resp.status_int, resp.body)
            self.assertEqual(value, resp.json['policy']['options'][key])
        # A member's own choices: no target project, new ids.
        body = dict(POLICY, options={'keep_id': False,
                                     'target_project': None,
                                     'deletion': 'mirror'})
        self.assertEqual(201, self.request('POST', '/v1/policies',
                                           body).status_int)

    def test_update(self):
        row = self.add_policy()
        for key, value, rule in POLICY_ASKS:
            error = self.assertError(403, self.request(
                'PUT', '/v1/policies/%s' % row['id'],
                {'options': {key: value}}), 'options.%s' % key)
            self.assertIn(rule, error['message'])
        self.assertEqual(base.POLICY_OPTIONS,
                         self.db.policy_get(row['id'])['options'])
        resp = self.request('PUT', '/v1/policies/%s' % row['id'],
                            {'options': {'keep_id': True}},
                            persona='admin')
        self.assertEqual(200, resp.status_int, resp.body)
        self.assertTrue(resp.json['policy']['options']['keep_id'])
        # Options are sent whole (openstack dtn policy set does): what
        # an administrator set, sent back unchanged, asks nothing new.
        resp = self.request('PUT', '/v1/policies/%s' % row['id'],
                            {'options': {'keep_id': True,
                                         'target_project': None,
                                         'deletion': 'mirror'}})
        self.assertEqual(200, resp.status_int, resp.body)
        self.assertEqual('mirror',
                         resp.json['policy']['options']['deletion'])
        self.assertError(403, self.request(
            'PUT', '/v1/policies/%s' % row['id'],
            {'options': {'keep_id': True, 'target_project': 'p-peer'}}),
            'options.target_project')


class TestDeleteByRole(base.ApiTestCase):

    def test_only_an_admin_deletes_a_policy_that_is_not_primary(self):
        for role in ('replica', 'failed-over', 'failback'):
            row = self.add_policy(name='p-%s' % role, role=role)
            for persona in ('member', 'reader'):
                error = self.assertError(403, self.request(
                    'DELETE', '/v1/policies/%s' % row['id'],
                    persona=persona))
                self.assertIn('dtn:policy:', error['message'])
            # Another project's is still missing, not forbidden.
            self.assertError(404, self.request(
                'DELETE', '/v1/policies/%s' % row['id'], persona='other'))
            self.assertEqual(role, self.db.policy_get(row['id'])['role'])
            resp = self.request('DELETE', '/v1/policies/%s' % row['id'],
                                persona='admin')
            self.assertEqual(204, resp.status_int, resp.body)

    def test_a_member_deletes_a_primary_policy(self):
        row = self.add_policy()
        resp = self.request('DELETE', '/v1/policies/%s' % row['id'])
        self.assertEqual(204, resp.status_int, resp.body)


class TestPeerDetails(base.ApiTestCase):

    DETAILS = {'address', 'port', 'error'}

    def test_list(self):
        for persona in ('member', 'reader', 'other'):
            resp = self.request('GET', '/v1/peers', persona=persona)
            self.assertEqual(200, resp.status_int, resp.body)
            peers = resp.json['peers']
            self.assertEqual([(True, 0.25), (False, None)],
                             [(p['reachable'], p['rtt_ms']) for p in peers])
            for peer in peers:
                self.assertFalse(self.DETAILS & set(peer), persona)
            self.assertNotIn(b'192.0.2.', resp.body)
            self.assertNotIn(b'connection refused', resp.body)
        resp = self.request('GET', '/v1/peers', persona='admin')
        self.assertEqual([('192.0.2.3', 7000, 'connection refused')],
                         [(p['address'], p['port'], p['error'])
                          for p in resp.json['peers'] if p['name'] == 'c'])

    def test_show(self):
        resp = self.request('GET', '/v1/peers/c', persona='reader')
        self.assertEqual(200, resp.status_int, resp.body)
        self.assertEqual((False, None), (resp.json['peer']['reachable'],
                                         resp.json['peer']['rtt_ms']))
        self.assertFalse(self.DETAILS & set(resp.json['peer']))
        resp = self.request('GET', '/v1/peers/c', persona='admin')
        self.assertEqual('connection refused', resp.json['peer']['error'])
        self.assertEqual('192.0.2.3', resp.json['peer']['address'])
