"""The application as a whole: versions, routing, errors, the
middleware stack and the fault barrier.
"""

import io
from unittest import mock

import fixtures
from keystonemiddleware import auth_token
from oslo_db import exception as db_exc
import oslo_messaging as messaging
import webob

from dtn_migrate.api import app as app_mod
from dtn_migrate import exception
from tests.unit.api import base


class TestVersions(base.ApiTestCase):

    def test_root_needs_no_token(self):
        resp = self.request('GET', '/', persona=None)
        self.assertEqual(200, resp.status_int)
        [version] = resp.json['versions']
        self.assertEqual('v1', version['id'])
        self.assertEqual('CURRENT', version['status'])
        self.assertEqual([{'rel': 'self', 'href': 'http://localhost/v1/'}],
                         version['links'])

    def test_v1(self):
        for path in ('/v1', '/v1/'):
            resp = self.request('GET', path)
            self.assertEqual(200, resp.status_int)
            self.assertEqual('v1', resp.json['version']['id'])

    def test_v1_needs_identity(self):
        self.assertError(401, self.request('GET', '/v1/', persona=None))

    def test_links_follow_the_proxy(self):
        self.conf.set_override('enable_proxy_headers_parsing', True,
                               'oslo_middleware')
        resp = self.request('GET', '/', persona=None, headers={
            'X-Forwarded-Proto': 'https', 'X-Forwarded-Host': 'api.example',
            'X-Forwarded-Prefix': '/dtn-migration'})
        self.assertEqual('https://api.example/dtn-migration/v1/',
                         resp.json['versions'][0]['links'][0]['href'])


class TestRouting(base.ApiTestCase):

    def test_unknown_path_404(self):
        for path in ('/v2/', '/v1/nothing', '/v1/migrations/x/y/z',
                     '/v1/peers/b/extra'):
            self.assertError(404, self.request('GET', path), path)

    def test_wrong_method_405_with_allow(self):
        for method, path, allow in (
                ('DELETE', '/v1/migrations', 'GET, POST'),
                ('PUT', '/v1/migrations/%s' % ('f' * 32), 'GET'),
                ('GET', '/v1/migrations/%s/action' % ('f' * 32), 'POST'),
                ('POST', '/v1/peers', 'GET'),
                ('PATCH', '/v1/peers/b', 'GET'),
                ('POST', '/', 'GET')):
            resp = self.request(method, path)
            error = self.assertError(405, resp)
            self.assertEqual(allow, resp.headers['Allow'])
            self.assertIn(allow, error['message'])

    def test_request_id_header(self):
        resp = self.request('GET', '/v1/migrations')
        self.assertTrue(resp.headers['X-Openstack-Request-Id'].startswith(
            'req-'))
        resp = self.request('GET', '/v1/nothing')
        self.assertTrue(resp.headers['X-Openstack-Request-Id'].startswith(
            'req-'))


class TestBodies(base.ApiTestCase):

    def test_too_large_413(self):
        big = {'peer': 'b', 'images': [base.IMAGE], 'tag': 'x' * 200000}
        self.assertError(413, self.request('POST', '/v1/migrations', big))

    def test_too_large_chunked_413(self):
        # No Content-Length: the limit holds while the body is read.
        req = webob.Request.blank('/v1/migrations', method='POST')
        req.headers.update(self.headers('member'))
        req.content_type = 'application/json'
        req.environ['wsgi.input'] = io.BytesIO(b' ' * 300000)
        req.environ.pop('CONTENT_LENGTH', None)
        req.environ['wsgi.input_terminated'] = True
        req.headers['Transfer-Encoding'] = 'chunked'
        resp = req.get_response(self.app)
        self.assertError(413, resp)

    def test_wrong_content_type_415(self):
        resp = self.request('POST', '/v1/migrations',
                            {'peer': 'b', 'images': [base.IMAGE]},
                            content_type='text/plain')
        self.assertError(415, resp, 'text/plain')
        self.assertEqual([], self.engine.calls)

    def test_missing_body_400(self):
        self.assertError(400, self.request('POST', '/v1/migrations'),
                         'body is required')

    def test_bad_json_400(self):
        self.assertError(400, self.request('POST', '/v1/migrations',
                                           raw=b'{"peer": '),
                         'not valid JSON')


class TestFaults(base.ApiTestCase):

    def _fail_with(self, exc):
        self.useFixture(fixtures.MockPatchObject(
            self.db, 'migration_get_all', side_effect=exc))
        return self.request('GET', '/v1/migrations')

    def test_database_unavailable_503(self):
        # The driver's text (here a fake SQL error) is logged, not sent.
        resp = self._fail_with(exception.DatabaseUnavailable(
            reason="(pymysql.err.OperationalError) (1267, 'SELECT ...')"))
        error = self.assertError(503, resp, 'database is unavailable')
        self.assertNotIn('pymysql', error['message'])
        self.assertNotIn('SELECT', error['message'])

    def test_oslo_db_connection_error_503(self):
        self.assertError(503, self._fail_with(
            db_exc.DBConnectionError('refused')))

    def test_engine_timeout_503(self):
        self.engine.raise_on_call = messaging.MessagingTimeout('no reply')
        resp = self.request('POST', '/v1/migrations',
                            {'peer': 'b', 'images': [base.IMAGE],
                             'request_id': 'c' * 32})
        error = self.assertError(503, resp, 'did not answer')
        # The message says how to follow the request later.
        self.assertIn('request_id=' + 'c' * 32, error['message'])
        self.engine.raise_on_call = messaging.MessagingTimeout('no reply')
        self.assertError(503, self.request('GET', '/v1/peers'))

    def test_engine_refusal_keeps_its_code(self):
        self.engine.raise_on_call = exception.ImageNotReadable(
            image_id=base.IMAGE, cloud='a')
        self.assertError(403, self.request(
            'POST', '/v1/migrations', {'peer': 'b', 'images': [base.IMAGE]}),
            base.IMAGE)

    def test_bug_500_logged_with_request_id(self):
        logger = self.useFixture(fixtures.FakeLogger(name='dtn_migrate'))
        resp = self._fail_with(KeyError('oops'))
        error = self.assertError(500, resp)
        request_id = resp.headers['X-Openstack-Request-Id']
        self.assertIn(request_id, error['message'])
        self.assertNotIn('oops', error['message'])
        self.assertIn(request_id, logger.output)
        self.assertIn('KeyError', logger.output)

    def test_internal_dtn_exception_500(self):
        resp = self._fail_with(exception.ImageHashMismatch(
            image_id='i', where='w', actual='a', expected='e'))
        self.assertError(500, resp)


class TestAuthStrategy(base.ApiTestCase):

    def _keystone(self):
        self.conf.set_override('auth_strategy', 'keystone', 'api')
        for group, opts in auth_token.list_opts():
            self.conf.register_opts(opts, group=group)
        self.conf.set_override('www_authenticate_uri',
                               'http://keystone.invalid/identity',
                               'keystone_authtoken')
        self.app = app_mod.deploy(self.conf, self.api)

    def test_keystone_uses_auth_token(self):
        self.conf.set_override('auth_strategy', 'keystone', 'api')
        with mock.patch('keystonemiddleware.auth_token.AuthProtocol') as ap:
            ap.return_value = mock.sentinel.auth
            app_mod.deploy(self.conf, self.api)
        args = ap.call_args[0]
        self.assertIs(self.conf, args[1]['oslo_config_config'])

    def test_keystone_rejects_without_token(self):
        # The real auth_token: no token, 401 in the API's error shape,
        # without contacting Keystone.
        self._keystone()
        resp = self.request('GET', '/v1/migrations', persona=None)
        self.assertError(401, resp)
        self.assertEqual(200, self.request('GET', '/', persona=None)
                         .status_int)

    def test_identity_headers_are_not_trusted_under_keystone(self):
        self._keystone()
        resp = self.request('GET', '/v1/migrations', persona='admin')
        self.assertError(401, resp)
