"""The WSGI entry point: where the configuration comes from, and an
application built from a real configuration file.
"""

import os
from unittest import mock

import fixtures
import webob

from dtn_migrate.api import wsgi
from dtn_migrate import conf as dtn_conf
from dtn_migrate.db import api as db_api
from dtn_migrate.db import migration as db_migration
from dtn_migrate import exception
from dtn_migrate import rpc
from tests.unit.api import base
from tests.unit import testcase


class TestConfigFiles(testcase.TestCase):

    def test_environment_first(self):
        self.assertEqual(['/a.conf', '/b.conf'], wsgi.config_files(
            {wsgi.CONFIG_FILES_ENV: '/a.conf, /b.conf',
             wsgi.CONFIG_FILE_ENV: '/c.conf'}, ['--config-file', '/d']))
        self.assertEqual(['/c.conf'], wsgi.config_files(
            {wsgi.CONFIG_FILE_ENV: '/c.conf'}, ['--config-file', '/d']))

    def test_then_argv(self):
        self.assertEqual(['/d', '/e'], wsgi.config_files(
            {}, ['--config-file', '/d', '--other', '--config-file=/e']))

    def test_then_etc_when_present(self):
        with mock.patch('os.path.exists', return_value=True):
            self.assertEqual([wsgi.DEFAULT_CONFIG_FILE],
                             wsgi.config_files({}, []))
        with mock.patch('os.path.exists', return_value=False):
            self.assertEqual([], wsgi.config_files({}, []))

    def test_missing_file_is_a_clear_error(self):
        exc = self.assertRaises(exception.ConfigError,
                                wsgi.init_application,
                                files=['/nonexistent/dtn.conf'])
        self.assertIn('/nonexistent/dtn.conf', str(exc))


class TestInitApplication(testcase.TestCase):

    def setUp(self):
        super().setUp()
        directory = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(directory, 'dtn-migrate.conf')
        with open(self.path, 'w') as f:
            f.write('[DEFAULT]\ntransport_url = fake:/\n'
                    '[database]\nconnection = sqlite:///%s/dtn.sqlite\n'
                    '[api]\nauth_strategy = noauth2\n' % directory)

    def test_from_the_environment(self):
        self.addCleanup(dtn_conf.CONF.reset)
        self.addCleanup(dtn_conf.CONF.clear)
        self.addCleanup(rpc.cleanup)
        # The module's database is this test's only.
        self.useFixture(fixtures.MockPatchObject(db_api, '_DB', None))
        # Logging is set up once, for the process: not in a test's.
        log_setup = self.useFixture(fixtures.MockPatchObject(
            wsgi.logging, 'setup')).mock
        self.useFixture(fixtures.EnvironmentVariable(
            wsgi.CONFIG_FILES_ENV, self.path))
        lazy = wsgi._LazyApplication()
        req = webob.Request.blank('/')
        resp = req.get_response(lazy)
        self.addCleanup(db_api.get_database().dispose)
        self.assertEqual(200, resp.status_int)
        self.assertEqual('v1', resp.json['versions'][0]['id'])
        # The database of the file serves the listing.
        db_migration.db_sync(dtn_conf.CONF)
        req = webob.Request.blank('/v1/migrations', headers={
            'X-User-Id': 'u', 'X-Project-Id': base.PROJECT,
            'X-Roles': 'reader'})
        resp = req.get_response(lazy)
        self.assertEqual(200, resp.status_int, resp.body)
        self.assertEqual({'migrations': []}, resp.json)
        self.assertEqual('noauth2', dtn_conf.CONF.api.auth_strategy)
        log_setup.assert_called_once_with(dtn_conf.CONF, 'dtn-migrate-api')

    def test_built_once(self):
        lazy = wsgi._LazyApplication()
        calls = []

        def app(environ, start_response):
            calls.append(environ['PATH_INFO'])
            start_response('200 OK', [('Content-Type', 'text/plain')])
            return [b'ok']
        with mock.patch.object(wsgi, 'init_application',
                               return_value=app) as init:
            for _ in range(3):
                webob.Request.blank('/').get_response(lazy)
        self.assertEqual(1, init.call_count)
        self.assertEqual(['/'] * 3, calls)
