"""Who may do what, on every route: the admin, a project member, a
project reader, a member of another project, and a user with no role.

Another project's migration answers 404 (existence is not leaked); a
role that may not act at all answers 403.
"""

import os

import fixtures

from dtn_migrate.api import app as app_mod
from tests.unit.api import base

PERSONAS = ('admin', 'member', 'reader', 'other', 'nobody')


class TestPolicyMatrix(base.ApiTestCase):

    def check(self, expected, call):
        got = {}
        for persona in PERSONAS:
            resp = call(persona)
            got[persona] = resp.status_int
            if resp.status_int >= 400:
                self.assertEqual(resp.status_int,
                                 resp.json['error']['code'])
        self.assertEqual(expected, got)

    def test_create(self):
        self.check(
            {'admin': 202, 'member': 202, 'reader': 403, 'other': 202,
             'nobody': 403},
            lambda p: self.request('POST', '/v1/migrations',
                                   {'peer': 'b', 'images': [base.IMAGE]},
                                   persona=p))
        # Each record belongs to the project that asked.
        projects = sorted(r['project_id']
                          for r in self.db.migration_get_all())
        self.assertEqual(sorted([base.PERSONAS['admin'][0], base.PROJECT,
                                 base.OTHER]), projects)

    def test_list(self):
        mine = self.add()['id']

        def call(persona):
            resp = self.request('GET', '/v1/migrations', persona=persona)
            if resp.status_int == 200:
                seen = [m['id'] for m in resp.json['migrations']]
                self.assertEqual(persona in ('member', 'reader'),
                                 mine in seen, persona)
            return resp
        self.check({'admin': 200, 'member': 200, 'reader': 200,
                    'other': 200, 'nobody': 403}, call)

    def test_list_all_projects(self):
        self.add()
        self.check({'admin': 200, 'member': 403, 'reader': 403,
                    'other': 403, 'nobody': 403},
                   lambda p: self.request(
                       'GET', '/v1/migrations?all_projects=true',
                       persona=p))

    def test_show(self):
        row = self.add()
        self.check({'admin': 200, 'member': 200, 'reader': 200,
                    'other': 404, 'nobody': 403},
                   lambda p: self.request('GET', '/v1/migrations/' +
                                          row['id'], persona=p))

    def _action(self, action, state):
        def call(persona):
            row = self.add(state=state)
            return self.request('POST',
                                '/v1/migrations/%s/action' % row['id'],
                                {action: None}, persona=persona)
        return call

    def test_cancel(self):
        self.check({'admin': 202, 'member': 202, 'reader': 403,
                    'other': 404, 'nobody': 403},
                   self._action('cancel', 'running'))
        # Only the allowed callers reached the engine.
        self.assertEqual(2, len(self.engine.calls))

    def test_retry(self):
        self.check({'admin': 202, 'member': 202, 'reader': 403,
                    'other': 404, 'nobody': 403},
                   self._action('retry', 'failed'))
        self.assertEqual(2, len(self.engine.calls))

    def test_other_project_sees_no_difference_from_missing(self):
        row = self.add()
        theirs = self.request('GET', '/v1/migrations/' + row['id'],
                              persona='other').json['error']
        missing = self.request('GET', '/v1/migrations/' + 'f' * 32,
                               persona='other').json['error']
        self.assertEqual(theirs['message'].replace(row['id'], 'X'),
                         missing['message'].replace('f' * 32, 'X'))

    def test_peers(self):
        expected = {'admin': 200, 'member': 200, 'reader': 200,
                    'other': 200, 'nobody': 403}
        self.check(expected, lambda p: self.request('GET', '/v1/peers',
                                                    persona=p))
        self.check(expected, lambda p: self.request('GET', '/v1/peers/b',
                                                    persona=p))

    def test_policy_create(self):
        names = iter(range(100))
        self.check(
            {'admin': 201, 'member': 201, 'reader': 403, 'other': 201,
             'nobody': 403},
            lambda p: self.request('POST', '/v1/policies', {
                'name': 'p%d' % next(names), 'peer': 'b',
                'selector': {'tags': ['gold']}}, persona=p))
        self.check(
            {'admin': 201, 'member': 403, 'reader': 403, 'other': 403,
             'nobody': 403},
            lambda p: self.request('POST', '/v1/policies', {
                'name': 'q%d' % next(names), 'peer': 'b',
                'selector': {'tags': ['gold'], 'projects': ['x']}},
                persona=p))

    def test_policy_read(self):
        row = self.add_policy()
        self.check({'admin': 200, 'member': 200, 'reader': 200,
                    'other': 200, 'nobody': 403},
                   lambda p: self.request('GET', '/v1/policies',
                                          persona=p))
        self.check({'admin': 200, 'member': 403, 'reader': 403,
                    'other': 403, 'nobody': 403},
                   lambda p: self.request(
                       'GET', '/v1/policies?all_projects=true', persona=p))
        for path in ('/v1/policies/%s', '/v1/policies/%s/images'):
            self.check({'admin': 200, 'member': 200, 'reader': 200,
                        'other': 404, 'nobody': 403},
                       lambda p: self.request('GET', path % row['id'],
                                              persona=p))

    def test_policy_write(self):
        expected = {'admin': 200, 'member': 200, 'reader': 403,
                    'other': 404, 'nobody': 403}
        row = self.add_policy()
        self.check(expected, lambda p: self.request(
            'PUT', '/v1/policies/' + row['id'], {'enabled': False},
            persona=p))
        self.check(dict(expected, admin=202, member=202),
                   lambda p: self.request(
                       'POST', '/v1/policies/%s/action' % row['id'],
                       {'sync': None}, persona=p))
        names = iter(range(100))

        def delete(persona):
            row = self.add_policy(name='d%d' % next(names))
            return self.request('DELETE', '/v1/policies/' + row['id'],
                                persona=persona)
        self.check(dict(expected, admin=204, member=204), delete)

    def test_policy_failover_failback(self):
        # An operator's actions, on the policy the replicas brought
        # (of the project they were imported into, not the admin's).
        row = self.add_policy(role='replica', mode='manual',
                              enabled=False)
        path = '/v1/policies/%s/action' % row['id']
        expected = {'admin': 202, 'member': 403, 'reader': 403,
                    'other': 403, 'nobody': 403}
        self.check(expected, lambda p: self.request(
            'POST', path, {'failover': None}, persona=p))
        self.check(expected, lambda p: self.request(
            'POST', path, {'failback': None}, persona=p))

    def test_replicas(self):
        self.check({'admin': 200, 'member': 200, 'reader': 200,
                    'other': 200, 'nobody': 403},
                   lambda p: self.request('GET', '/v1/replicas',
                                          persona=p))
        self.check({'admin': 200, 'member': 403, 'reader': 403,
                    'other': 403, 'nobody': 403},
                   lambda p: self.request(
                       'GET', '/v1/replicas?all_projects=true', persona=p))

    def test_drills(self):
        # Each persona drills its own project's policy (another
        # project's answers 404, from the engine).
        mine = self.add_policy()
        self.check({'admin': 202, 'member': 202, 'reader': 403,
                    'other': 404, 'nobody': 403},
                   lambda p: self.request('POST', '/v1/drills',
                                          {'policy_id': mine['id']},
                                          persona=p))
        row = self.add_drill()
        self.check({'admin': 200, 'member': 200, 'reader': 200,
                    'other': 200, 'nobody': 403},
                   lambda p: self.request('GET', '/v1/drills', persona=p))
        self.check({'admin': 200, 'member': 403, 'reader': 403,
                    'other': 403, 'nobody': 403},
                   lambda p: self.request(
                       'GET', '/v1/drills?all_projects=true', persona=p))
        self.check({'admin': 200, 'member': 200, 'reader': 200,
                    'other': 404, 'nobody': 403},
                   lambda p: self.request('GET', '/v1/drills/' + row['id'],
                                          persona=p))

    def test_operator_policy_file_overrides(self):
        path = os.path.join(self.useFixture(
            fixtures.TempDir()).path, 'policy.yaml')
        with open(path, 'w') as f:
            f.write('"dtn:peer:list": "role:admin"\n')
        self.conf.set_override('policy_file', path, 'oslo_policy')
        self.api = app_mod.Api(self.conf, db=self.db, engine=self.engine)
        self.app = app_mod.deploy(self.conf, self.api)
        self.check({'admin': 200, 'member': 403, 'reader': 403,
                    'other': 403, 'nobody': 403},
                   lambda p: self.request('GET', '/v1/peers', persona=p))
