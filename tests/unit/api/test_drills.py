"""/v1/drills on a real database: start a drill of a policy, list the
drills, show one with its report; tight bodies (4xx, never 5xx).
"""

import uuid

from dtn_migrate.api.schemas import drills as schemas
from dtn_migrate.api import validation
from dtn_migrate.api import views
from dtn_migrate import exception
from tests.unit.api import base


class TestStart(base.ApiTestCase):

    def setUp(self):
        super().setUp()
        self.policy = self.add_policy(role='replica', mode='manual',
                                      enabled=False)

    def test_start_202(self):
        resp = self.request('POST', '/v1/drills',
                            {'policy_id': self.policy['id']})
        self.assertEqual(202, resp.status_int, resp.body)
        validation.validate(schemas.START_RESPONSE, resp.json, 'response')
        drill = resp.json['drill']
        self.assertNotIn('report', drill)
        self.assertEqual((self.policy['id'], 'gold', base.PROJECT,
                          'running', False),
                         (drill['policy_id'], drill['policy_name'],
                          drill['project_id'], drill['state'],
                          drill['clone']))
        self.assertTrue(drill['started_at'].endswith('Z'))
        [(name, ctxt, kwargs)] = self.engine.calls
        self.assertEqual('start_drill', name)
        self.assertEqual(base.PROJECT, ctxt['project_id'])
        self.assertEqual({'policy_id': self.policy['id'], 'clone': False},
                         kwargs)
        # The drill is in the database: GET shows it.
        self.assertEqual('running', self.request(
            'GET', '/v1/drills/' + drill['id']).json['drill']['state'])

    def test_dashed_id_and_clone(self):
        dashed = str(uuid.UUID(self.policy['id']))
        resp = self.request('POST', '/v1/drills',
                            {'policy_id': dashed, 'clone': True},
                            persona='admin')
        self.assertEqual(202, resp.status_int, resp.body)
        self.assertIs(True, resp.json['drill']['clone'])
        self.assertEqual({'policy_id': self.policy['id'], 'clone': True},
                         self.engine.calls[0][2])

    def test_clone_is_an_administrators(self):
        # Clones write every replica into Glance again: a member drills
        # without them (dtn:drill:start:clone).
        resp = self.request('POST', '/v1/drills',
                            {'policy_id': self.policy['id'], 'clone': True})
        self.assertError(403, resp)
        self.assertIn('dtn:drill:start:clone', resp.json['error']['message'])
        self.assertEqual([], self.engine.calls)
        resp = self.request('POST', '/v1/drills',
                            {'policy_id': self.policy['id'], 'clone': False})
        self.assertEqual(202, resp.status_int, resp.body)

    def test_a_drill_that_runs_409(self):
        self.engine.raise_on_call = exception.DrillConflict(
            policy_id=self.policy['id'], reason='its drill %s runs' % (
                'd' * 32))
        resp = self.request('POST', '/v1/drills',
                            {'policy_id': self.policy['id']})
        self.assertError(409, resp)
        self.assertIn('its drill %s runs' % ('d' * 32),
                      resp.json['error']['message'])

    def test_unknown_or_other_project_policy_404(self):
        self.assertError(404, self.request(
            'POST', '/v1/drills', {'policy_id': 'f' * 32}))
        self.assertError(404, self.request(
            'POST', '/v1/drills', {'policy_id': self.policy['id']},
            persona='other'))

    def test_bad_bodies_400(self):
        for body in ({}, {'policy_id': 'x'}, {'policy_id': 7},
                     {'policy_id': self.policy['id'], 'clone': 'yes'},
                     {'policy_id': self.policy['id'], 'wait': True},
                     {'policy_id': None}):
            self.assertError(400, self.request('POST', '/v1/drills', body))
        self.assertEqual([], self.engine.calls)

    def test_roles(self):
        self.assertError(403, self.request(
            'POST', '/v1/drills', {'policy_id': self.policy['id']},
            persona='reader'))
        self.assertError(403, self.request(
            'POST', '/v1/drills', {'policy_id': self.policy['id']},
            persona='nobody'))

    def test_engine_down_503(self):
        import oslo_messaging
        self.engine.raise_on_call = oslo_messaging.MessagingTimeout('gone')
        self.assertError(503, self.request(
            'POST', '/v1/drills', {'policy_id': self.policy['id']}))


class TestReads(base.ApiTestCase):

    def test_show_with_report(self):
        row = self.add_drill()
        resp = self.request('GET', '/v1/drills/' + row['id'])
        self.assertEqual(200, resp.status_int, resp.body)
        validation.validate(schemas.SHOW_RESPONSE, resp.json, 'response')
        drill = resp.json['drill']
        self.assertEqual([base.DRILL_IMAGE], drill['report']['images'])
        self.assertEqual((1, 1, 0, 2.5, 'passed'),
                         (drill['images_total'], drill['images_intact'],
                          drill['images_bad'], drill['rto_seconds'],
                          drill['state']))
        self.assertEqual('2026-11-24T10:01:00.000000Z',
                         drill['finished_at'])
        dashed = str(uuid.UUID(row['id']))
        self.assertEqual(drill, self.request(
            'GET', '/v1/drills/' + dashed).json['drill'])

    def test_show_running_without_report(self):
        row = self.add_drill(state='running', report=None,
                             images_total=None, images_intact=None,
                             images_bad=None, rto_seconds=None,
                             finished_at=None)
        drill = self.request('GET', '/v1/drills/' + row['id']).json['drill']
        self.assertEqual({'images': []}, drill['report'])
        self.assertIsNone(drill['rto_seconds'])

    def test_show_not_found(self):
        other = self.add_drill(project=base.OTHER)
        for drill_id in ('f' * 32, 'x', other['id'], 'F' * 33):
            self.assertError(404, self.request('GET',
                                               '/v1/drills/' + drill_id))
        self.assertError(400, self.request(
            'GET', '/v1/drills/%s?x=1' % other['id']))
        self.assertEqual(200, self.request(
            'GET', '/v1/drills/' + other['id'], persona='admin').status_int)
        self.assertEqual(200, self.request(
            'GET', '/v1/drills/' + self.add_drill()['id'],
            persona='reader').status_int)
        self.assertError(403, self.request(
            'GET', '/v1/drills/' + other['id'], persona='nobody'))

    def test_list_filters_and_pages(self):
        policy = 'd' * 32
        ids = [self.add_drill(policy_id=policy if i % 2 else 'c' * 32,
                              state='failed' if i == 3 else 'passed')['id']
               for i in range(5)]
        self.add_drill(project=base.OTHER)
        body = self.request('GET', '/v1/drills').json
        validation.validate(schemas.LIST_RESPONSE, body, 'response')
        self.assertEqual(ids[::-1], [d['id'] for d in body['drills']])
        self.assertNotIn('report', body['drills'][0])
        self.assertNotIn('links', body)
        self.assertEqual([ids[3], ids[1]], [d['id'] for d in self.request(
            'GET', '/v1/drills?policy_id=' + str(uuid.UUID(policy))).json[
            'drills']])
        self.assertEqual([ids[3]], [d['id'] for d in self.request(
            'GET', '/v1/drills?state=failed&state=error').json['drills']])
        # Pages follow the "next" link.
        seen, path = [], '/v1/drills?limit=2'
        while path:
            page = self.request('GET', path).json
            seen.extend(d['id'] for d in page['drills'])
            href = (page.get('links') or [{}])[0].get('href')
            path = href[href.index('/v1'):] if href else None
        self.assertEqual(ids[::-1], seen)
        self.assertEqual(6, len(self.request(
            'GET', '/v1/drills?all_projects=true',
            persona='admin').json['drills']))
        self.assertEqual(5, len(self.request(
            'GET', '/v1/drills', persona='reader').json['drills']))
        self.assertEqual(1, len(self.request(
            'GET', '/v1/drills', persona='other').json['drills']))

    def test_list_errors(self):
        self.add_drill()
        self.assertError(403, self.request(
            'GET', '/v1/drills?all_projects=true'))
        self.assertError(403, self.request('GET', '/v1/drills',
                                           persona='nobody'))
        for query in ('marker=x', 'marker=' + 'f' * 32, 'limit=0',
                      'state=gone', 'policy_id=x', 'y=1', 'limit=x'):
            self.assertError(400, self.request('GET', '/v1/drills?' +
                                               query))


class TestView(base.ApiTestCase):

    def test_odd_rows_are_normalized(self):
        # Whatever the engine wrote, the view answers the schema.
        out = views.drill({'id': 'x', 'policy_id': 'p', 'state': 'error',
                           'clone': None, 'images_total': '3',
                           'images_bad': -1, 'rto_seconds': 'n/a',
                           'report': '{"images": [{"status": "missing",'
                                     ' "checks": {"present": false}},'
                                     ' 7]}'}, report=True)
        validation.validate(schemas.DRILL_WITH_REPORT, out, 'response')
        self.assertEqual((3, 0, None, False),
                         (out['images_total'], out['images_bad'],
                          out['rto_seconds'], out['clone']))
        self.assertEqual(
            {'present': False, 'size': None, 'hash': None,
             'qemu_img': None, 'clone': None},
            out['report']['images'][0]['checks'])
        self.assertEqual({'images': []}, views.drill(
            {'report': 'not json'}, report=True)['report'])
