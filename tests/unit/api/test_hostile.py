"""A corpus of hostile inputs at every route: each gets a 4xx with the
API's JSON error, never a 5xx.
"""

import json
import urllib.parse

from dtn_migrate.api import router
from tests.unit.api import base

HUGE = ('1e400', '9' * 400, '-0', '1.5', '0x10', ' 1', '１')
TEXTS = ('\x00', 'a\x00b', '\u202e\u0000', '\U0001f4a5' * 300,
         "' OR 1=1 --", '1; DROP TABLE migrations', '../../etc/passwd',
         '%s', '{{7*7}}', '\ud800', 'x' * 5000)
BODIES = (
    b'', b'{', b'null', b'[]', b'"peer"', b'7', b'true', b'{}',
    b'\xff\xfe\x00garbage', b'{"peer": "\\ud800", "images": []}',
    b'[' * 5000 + b']' * 5000, b'{"a":' * 3000 + b'1' + b'}' * 3000,
    b'{"peer": NaN}', b'{"peer": Infinity}', b'{"peer": 1e999}',
    b'{"peer": "b", "peer": 7}',
)
JSON_BODIES = (
    {'peer': 7}, {'peer': None}, {'peer': ['b']}, {'peer': {'b': 1}},
    {'peer': True}, {'peer': 'b', 'images': {}}, {'peer': 'b',
                                                  'images': [7]},
    {'peer': 'b', 'images': [None]}, {'peer': 'b', 'images': [[]]},
    {'peer': 'b', 'images': ["' OR 1=1 --"]},
    {'peer': 'b', 'images': ['\x00' * 36]},
    {'peer': 'b', 'images': [base.IMAGE], 'options': []},
    {'peer': 'b', 'images': [base.IMAGE], 'options': {'keep_id': 1}},
    {'peer': 'b', 'images': [base.IMAGE],
     'options': {'force': 'true'}},
    {'peer': 'b', 'images': [base.IMAGE],
     'options': {'transfer_options': {}}},
    {'peer': 'b', 'images': [base.IMAGE], 'request_id': 10 ** 40},
    {'peer': 'b', 'properties': {}}, {'peer': 'b', 'properties': {'': 'v'}},
    {'peer': 'b', 'properties': {'k': 7}},
    {'peer': 'b', 'properties': {'k\x00': 'v'}},
    {'peer': 'b', 'tag': ''}, {'peer': 'b', 'tag': 'x' * 256},
    {'peer': 'b\x00', 'tag': 't'}, {'peer': 'b', 'tag': 't\n'},
    {'cancel': None}, {'retry': None},
)
POLICY_BODIES = (
    {'name': 'p', 'peer': 'b'}, {'name': 'p', 'peer': 'b', 'selector': []},
    {'name': 'p', 'peer': 'b', 'selector': {}},
    {'name': 'p', 'peer': 'b', 'selector': {'tags': 'gold'}},
    {'name': 'p', 'peer': 'b', 'selector': {'tags': [None]}},
    {'name': 'p', 'peer': 'b', 'selector': {'tags': ['x'] * 51}},
    {'name': 'p', 'peer': 'b', 'selector': {'name_pattern': ''}},
    {'name': 'p', 'peer': 'b', 'selector': {'visibility': 'public'}},
    {'name': 'p', 'peer': 'b', 'selector': {'tags': ['x']},
     'rpo_minutes': 10 ** 40},
    {'name': 'p', 'peer': 'b', 'selector': {'tags': ['x']},
     'rpo_minutes': '5'},
    {'name': 'p', 'peer': 'b', 'selector': {'tags': ['x']},
     'enabled': 'yes'},
    {'name': 'p', 'peer': 'b', 'selector': {'tags': ['x']},
     'schedule': 'x' * 256, 'mode': 'scheduled'},
    {'name': 'p', 'peer': 'b', 'selector': {'tags': ['x']},
     'options': {'deletion_grace_minutes': 1e400}},
    {'name': ['p'], 'peer': 'b', 'selector': {'tags': ['x']}},
    {'name': 'p\x00', 'peer': 'b', 'selector': {'tags': ['x']}},
)
DRILL_BODIES = (
    {'policy_id': 7}, {'policy_id': None}, {'policy_id': 'x'},
    {'policy_id': 'g' * 32}, {'policy_id': [base.IMAGE]},
    {'policy_id': base.IMAGE, 'clone': 'yes'},
    {'policy_id': base.IMAGE, 'clone': None},
    {'policy_id': base.IMAGE, 'wait': True}, {'clone': True},
    {'policy_id': base.IMAGE + '\x00'},
)
ACTION_BODIES = (
    {}, {'cancel': None, 'retry': None}, {'cancel': 0}, {'retry': []},
    {'retry': 'now'}, {'delete': None}, {'cancel': None, 'x': 1},
    {'peer': 'b', 'images': [base.IMAGE]},
    {'failover': None, 'failback': None}, {'sync': None, 'failover': None},
    {'failover': 0}, {'failback': 'now'}, {'failover': {}},
    {'failback': [None]}, {'FAILOVER': None}, {'failover\x00': None},
)
LIST_PARAMS = ('state', 'image_id', 'peer', 'direction', 'request_id',
               'changes-since', 'marker', 'limit', 'sort_key', 'sort_dir',
               'all_projects')


class TestHostileInput(base.ApiTestCase):

    def setUp(self):
        super().setUp()
        self.row = self.add()
        self.policy = self.add_policy()
        self.drill = self.add_drill()
        self.bad = []

    def expect_4xx(self, resp, what):
        ok = 400 <= resp.status_int < 500 and \
            resp.content_type == 'application/json'
        if ok:
            error = resp.json.get('error', {})
            ok = error.get('code') == resp.status_int and \
                bool(error.get('message'))
        if not ok:
            self.bad.append((what, resp.status_int, resp.body[:200]))

    def tearDown(self):
        # The table is still there and the row unchanged.
        self.assertEqual('running',
                         self.db.migration_get(self.row['id'])['state'])
        super().tearDown()

    def paths(self, value):
        """Every route's path, its variables set to ``value``."""
        quoted = urllib.parse.quote(value.encode('utf-8', 'surrogatepass'),
                                    safe='')
        for path, methods in router.ROUTES:
            if '{' not in path:
                continue
            yield path.split('{')[0] + quoted + (
                path.split('}')[1] if path.count('}') else ''), methods

    def test_hostile_path_values(self):
        for value in TEXTS + HUGE + ('f' * 33, 'F' * 32 + '0'):
            for path, methods in self.paths(value):
                for method in methods:
                    body = {'cancel': None} if method == 'POST' else None
                    if path.startswith('/v1/peers/') and \
                            value in TEXTS[4:6]:
                        continue        # a plain name: a clean 404 below
                    self.expect_4xx(self.request(method, path, body),
                                    (method, path[:60]))
        self.assertEqual([], self.bad)

    def test_sqlish_peer_names_are_just_unknown(self):
        for value in TEXTS[4:6]:
            resp = self.request('GET', '/v1/peers/' +
                                urllib.parse.quote(value))
            self.assertError(404, resp)

    def test_hostile_query_values_on_every_get(self):
        gets = [p.replace('{migration_id}', self.row['id'])
                 .replace('{policy_id}', self.policy['id'])
                 .replace('{drill_id}', self.drill['id'])
                 .replace('{name}', 'b')
                for p, m in router.ROUTES if 'GET' in m and
                p not in ('/', '/v1', '/v1/')]
        for path in gets:
            names = LIST_PARAMS if path == '/v1/migrations' else \
                ('x', 'limit', 'all_projects')
            for name in names:
                for value in TEXTS + HUGE:
                    if path == '/v1/migrations' and name == 'peer' and \
                            (value in HUGE or value in TEXTS[4:10]):
                        continue        # printable text: a valid filter
                    query = urllib.parse.urlencode(
                        {name: value.encode('utf-8', 'surrogatepass')})
                    self.expect_4xx(self.request('GET', path + '?' + query),
                                    (path, name, value[:20]))
            # Raw, broken escapes too.
            for raw in ('limit=%ff', 'limit=%', '%00=1', 'a=%ED%A0%80',
                        'limit=1&limit=2', '=&=', 'state'):
                self.expect_4xx(self.request('GET', path + '?' + raw),
                                (path, raw))
        self.assertEqual([], self.bad)

    def test_hostile_bodies_on_every_post(self):
        posts = [p.replace('{migration_id}', self.row['id'])
                 .replace('{policy_id}', self.policy['id'])
                 for p, m in router.ROUTES if 'POST' in m]
        for path in posts:
            for raw in BODIES:
                self.expect_4xx(self.request('POST', path, raw=raw),
                                (path, raw[:30]))
            bodies = JSON_BODIES if path == '/v1/migrations' else \
                POLICY_BODIES + ACTION_BODIES if path == '/v1/policies' \
                else DRILL_BODIES + ACTION_BODIES if path == '/v1/drills' \
                else ACTION_BODIES
            for body in bodies:
                self.expect_4xx(self.request('POST', path, body),
                                (path, json.dumps(body)[:60]))
            for ctype in ('text/plain', 'application/xml',
                          'application/x-www-form-urlencoded', '',
                          'application/json-seq', '\x00'):
                self.expect_4xx(self.request(
                    'POST', path, raw=b'{"cancel": null}',
                    content_type=None, headers={'Content-Type': ctype}),
                    (path, ctype))
        self.assertEqual([], self.bad)
        self.assertEqual([], [c for c in self.engine.calls
                              if c[0] != 'migrate'])

    def test_hostile_policy_updates(self):
        path = '/v1/policies/' + self.policy['id']
        for raw in BODIES:
            self.expect_4xx(self.request('PUT', path, raw=raw),
                            (path, raw[:30]))
        for body in POLICY_BODIES[1:] + ACTION_BODIES + (
                {'project_id': 'p'}, {'name': None}, {'selector': None},
                {'options': {'keep_id': None}}):
            self.expect_4xx(self.request('PUT', path, body),
                            (path, json.dumps(body)[:60]))
        self.assertEqual([], self.bad)
        self.assertEqual([], self.engine.calls)

    def test_failover_failback_of_every_role_never_5xx(self):
        # The admin may act: a policy of the wrong role is a 409, an
        # unknown or malformed id a 404, never a 5xx.
        for role in ('primary', 'failback', 'failed-over', 'replica',
                     'secondary', ''):
            row = self.add_policy(name='r-' + role, role=role)
            for action in ('failover', 'failback', 'failback'):
                resp = self.request(
                    'POST', '/v1/policies/%s/action' % row['id'],
                    {action: None}, persona='admin')
                if resp.status_int != 202:
                    self.expect_4xx(resp, (role, action))
        for value in ('f' * 32, 'x', '\x00', 'f' * 33):
            for action in ('failover', 'failback'):
                self.expect_4xx(self.request(
                    'POST', '/v1/policies/%s/action'
                    % urllib.parse.quote(value), {action: None},
                    persona='admin'), (value, action))
        self.assertEqual([], self.bad)

    def test_hostile_headers(self):
        for headers in ({'X-Project-Id': '\x00'},
                        {'X-Roles': 'admin\x00'},
                        {'X-Roles': ',' * 1000},
                        {'X-Project-Id': 'x' * 5000},
                        {'X-Forwarded-Proto': '\x00'},
                        {'X-Openstack-Request-Id': "'; DROP"}):
            resp = self.request('GET', '/v1/migrations/' + self.row['id'],
                                headers=headers)
            self.assertLess(resp.status_int, 500, (headers, resp.body))
