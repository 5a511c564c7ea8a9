"""The API's calls to the engine over a real oslo.messaging client (the
in-memory ``fake:`` transport): what crosses the bus, and a silent
engine answering 503.
"""

import oslo_messaging as messaging
from oslo_messaging import conffixture

from dtn_migrate.api import app as app_mod
from dtn_migrate.engine import rpcapi
from dtn_migrate import exception
from dtn_migrate import rpc
from tests.unit.api import base


class Endpoint:
    """An engine's RPC endpoint answering from the fake engine."""

    target = messaging.Target(version='1.2')

    def __init__(self, fake):
        self.fake = fake

    @messaging.expected_exceptions(exception.DtnMigrateException)
    def list_peers(self, ctxt):
        return self.fake.list_peers(ctxt)

    @messaging.expected_exceptions(exception.DtnMigrateException)
    def get_peer(self, ctxt, name):
        return self.fake.get_peer(ctxt, name)

    @messaging.expected_exceptions(exception.DtnMigrateException)
    def migrate(self, ctxt, peer, images=None, selector=None, options=None,
                request_id=None):
        return self.fake.migrate(ctxt, peer, images, selector, options,
                                 request_id)

    @messaging.expected_exceptions(exception.DtnMigrateException)
    def cancel_migration(self, ctxt, migration_id):
        return self.fake.cancel_migration(ctxt, migration_id)


class TestEngineOverTheBus(base.ApiTestCase):

    api_overrides = {'engine_timeout': 1.0}

    def setUp(self):
        super().setUp()
        self.useFixture(conffixture.ConfFixture(self.conf))
        self.transport = messaging.get_rpc_transport(
            self.conf, url='fake:/',
            allowed_remote_exmods=rpc.ALLOWED_EXMODS)
        self.addCleanup(self.transport.cleanup)
        self.api = app_mod.Api(self.conf, db=self.db, engine=rpcapi.EngineAPI(
            timeout=self.conf.api.engine_timeout, transport=self.transport))
        self.app = app_mod.deploy(self.conf, self.api)

    def serve(self):
        server = rpc.get_server(
            messaging.Target(topic=rpcapi.TOPIC, server='engine-1'),
            [Endpoint(self.engine)], transport=self.transport)
        server.start()
        self.addCleanup(server.wait)
        self.addCleanup(server.stop)

    def test_no_engine_503(self):
        for method, path, body in (
                ('GET', '/v1/peers', None),
                ('POST', '/v1/migrations', {'peer': 'b',
                                            'images': [base.IMAGE]})):
            self.assertError(503, self.request(method, path, body),
                             'did not answer')

    def test_round_trip(self):
        self.serve()
        resp = self.request('GET', '/v1/peers/b')
        self.assertEqual(200, resp.status_int, resp.body)
        peer = resp.json['peer']
        self.assertEqual(('b', True, 0.25, 1.5e9),
                         (peer['name'], peer['reachable'], peer['rtt_ms'],
                          peer['last_throughput']))
        self.assertEqual('2026-11-24T10:05:00.123456Z', peer['checked_at'])
        # The caller's context crossed the bus as a dict.
        [(name, ctxt, kwargs)] = self.engine.calls
        self.assertEqual(('get_peer', base.PROJECT, 'user-member'),
                         (name, ctxt['project_id'], ctxt['user']))

    def test_remote_errors_keep_their_code(self):
        self.serve()
        error = self.assertError(404, self.request('GET', '/v1/peers/zz'))
        # The message is the engine's, without its traceback.
        self.assertNotIn('Traceback', error['message'])
        self.assertIn('zz', error['message'])
        row = self.add(state='complete')
        self.assertError(409, self.request(
            'POST', '/v1/migrations/%s/action' % row['id'],
            {'cancel': None}))

    def test_create_over_the_bus(self):
        self.serve()
        resp = self.request('POST', '/v1/migrations',
                            {'peer': 'b', 'images': [base.IMAGE]})
        self.assertEqual(202, resp.status_int, resp.body)
        [m] = resp.json['migrations']
        self.assertEqual(base.IMAGE, m['image_id'])
        self.assertTrue(m['created_at'].endswith('Z'))
