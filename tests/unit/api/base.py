"""The whole dtn-migrate-api application on a real SQLite database
(through dtn_migrate.db.api, synced with alembic), noauth2, and a fake
engine that writes the records the real one would.
"""

import datetime
import json
import uuid

import fixtures
from oslo_config import cfg
from oslo_utils import timeutils
import webob

from dtn_migrate.api import app as app_mod
from dtn_migrate import conf as dtn_conf
from dtn_migrate.db import api as db_api
from dtn_migrate.db import migration as db_migration
from dtn_migrate import exception

from tests.unit import testcase

PROJECT = 'a' * 32
OTHER = 'b' * 32
#: Persona -> (project, roles), the roles as Keystone's implied roles
#: put them in a token.
PERSONAS = {
    'admin': (uuid.UUID(int=1).hex, 'admin,member,reader'),
    'member': (PROJECT, 'member,reader'),
    'reader': (PROJECT, 'reader'),
    'other': (OTHER, 'member,reader'),
    'nobody': (PROJECT, ''),
}
PEERS = ('b', 'c')
IMAGE = '11111111-2222-3333-4444-555555555555'
IMAGE2 = '11111111-2222-3333-4444-666666666666'


def iso(value):
    return value.isoformat() if isinstance(value, datetime.datetime) \
        else value


def rpc_row(row):
    """A row as it crosses the bus: datetimes as ISO 8601 text."""
    return {k: iso(v) for k, v in row.items()}


POLICY_OPTIONS = {'keep_id': False, 'target_project': None,
                  'deletion': 'keep', 'deletion_grace_minutes': 60}


#: An image of a drill's report, as the engine writes it.
DRILL_IMAGE = {
    'source_image_id': IMAGE, 'replica_image_id': IMAGE2,
    'image_name': 'cirros', 'status': 'intact',
    'checks': {'present': True, 'size': True, 'hash': True,
               'qemu_img': True, 'clone': None},
    'error': None, 'seconds': 2.5}


class FakePolicyEngine:
    """The engine's protection policy calls (1.4), on the database: the
    defaults and scoping of the real engine, none of its replication.
    """

    def _record(self, row):
        counts = self.db.policy_image_counts([row['id']]).get(row['id'])
        return dict(rpc_row(row), images=counts or {})

    def _policy(self, ctxt, policy_id):
        return self.db.policy_get(
            policy_id, project_id=None if ctxt.get('is_admin')
            else ctxt['project_id'])

    def create_policy(self, ctxt, values):
        self._called('create_policy', ctxt, values=values)
        if values['peer'] not in PEERS:
            raise exception.PeerNotFound(peer=values['peer'],
                                         known=', '.join(PEERS))
        row = dict(mode='continuous', rpo_minutes=60, enabled=True,
                   role='primary', user_id=ctxt['user'],
                   project_id=ctxt['project_id'])
        row.update(values)
        row['options'] = dict(POLICY_OPTIONS, **values.get('options', {}))
        return self._record(self.db.policy_create(row))

    def update_policy(self, ctxt, policy_id, values):
        self._called('update_policy', ctxt, policy_id=policy_id,
                     values=values)
        self._policy(ctxt, policy_id)
        return self._record(self.db.policy_update(policy_id, values))

    def delete_policy(self, ctxt, policy_id):
        self._called('delete_policy', ctxt, policy_id=policy_id)
        self._policy(ctxt, policy_id)
        self.db.policy_delete(policy_id)

    def sync_policy(self, ctxt, policy_id):
        self._called('sync_policy', ctxt, policy_id=policy_id)
        row = self._policy(ctxt, policy_id)
        migration = self.db.migration_create({
            'image_id': IMAGE, 'image_name': 'cirros', 'peer': row['peer'],
            'direction': 'outgoing', 'state': 'queued', 'attempt': 1,
            'project_id': row['project_id'], 'user_id': ctxt['user']})
        self.db.policy_image_upsert(policy_id, IMAGE, {
            'state': 'syncing', 'image_name': 'cirros',
            'project_id': row['project_id'],
            'migration_id': migration['id']})
        return {'policy': self._record(self.db.policy_get(policy_id)),
                'migrations': [rpc_row(migration)]}

    def failover_policy(self, ctxt, policy_id):
        """The real engine's answer and records, without touching Glance:
        ``promoted`` counts the policy's current incoming replicas.
        """
        self._called('failover_policy', ctxt, policy_id=policy_id)
        row = self._policy(ctxt, policy_id)
        if row['role'] not in ('replica', 'failed-over'):
            raise exception.ProtectionPolicyConflict(
                policy_id=policy_id, state='a %s policy' % row['role'],
                action='fail over')
        failover = dict(row['options'].get('failover') or {})
        reverse = self._reverse(failover)
        if reverse is None:
            selector = dict(row['selector'], projects=[row['project_id']])
            reverse = self.db.policy_create({
                'name': row['name'] + '-failback', 'peer': row['peer'],
                'mode': 'manual', 'rpo_minutes': row['rpo_minutes'],
                'role': 'failback', 'enabled': True,
                'selector': selector, 'project_id': row['project_id'],
                'options': dict(POLICY_OPTIONS, keep_id=True)})
        promoted = len(self.db.replica_get_all(filters={
            'direction': 'incoming', 'policy_id': policy_id,
            'state': 'current'}))
        if failover.get('done'):
            failover = {}
        failover.setdefault('at', timeutils.utcnow().isoformat())
        failover.update(reverse_policy_id=reverse['id'], done=False)
        row = self.db.policy_update(policy_id, {
            'role': 'failed-over',
            'options': dict(row['options'], failover=failover)})
        return {'policy': self._record(row),
                'reverse_policy': self._record(reverse),
                'promoted': promoted}

    def _reverse(self, failover):
        try:
            return self.db.policy_get(failover.get('reverse_policy_id')
                                      or 'f' * 32)
        except exception.ProtectionPolicyNotFound:
            return None

    def failback_policy(self, ctxt, policy_id):
        """A migration for each pending image of the reverse policy
        (then syncing); complete when none is pending, syncing or
        failed.
        """
        self._called('failback_policy', ctxt, policy_id=policy_id)
        row = self._policy(ctxt, policy_id)
        failover = row['options'].get('failover') or {}
        reverse = self._reverse(failover)
        if row['role'] == 'replica' and failover.get('done'):
            return {'policy': self._record(row),
                    'reverse_policy': reverse and self._record(reverse),
                    'migrations': [], 'complete': True}
        if row['role'] != 'failed-over' or reverse is None:
            raise exception.ProtectionPolicyConflict(
                policy_id=policy_id, state='a %s policy' % row['role'],
                action='fail back')
        started = []
        for image in self.db.policy_images_get(policy_id=reverse['id'],
                                               states=['pending']):
            migration = self.db.migration_create({
                'image_id': image['image_id'],
                'image_name': image['image_name'], 'peer': row['peer'],
                'direction': 'outgoing', 'state': 'queued', 'attempt': 1,
                'project_id': row['project_id'], 'user_id': ctxt['user']})
            self.db.policy_image_upsert(reverse['id'], image['image_id'], {
                'state': 'syncing', 'migration_id': migration['id']})
            started.append(rpc_row(migration))
        complete = not self.db.policy_images_get(
            policy_id=reverse['id'], states=['pending', 'syncing', 'failed'])
        if complete:
            row = self.db.policy_update(policy_id, {
                'role': 'replica', 'options': dict(
                    row['options'], failover=dict(failover, done=True))})
            reverse = self.db.policy_update(reverse['id'],
                                            {'enabled': False})
        return {'policy': self._record(row),
                'reverse_policy': self._record(reverse),
                'migrations': started, 'complete': complete}

    def start_drill(self, ctxt, policy_id, clone=False):
        """A drill of the policy, ``running`` (the real engine then
        checks the replicas in the background).
        """
        self._called('start_drill', ctxt, policy_id=policy_id, clone=clone)
        row = self._policy(ctxt, policy_id)
        return rpc_row(self.db.drill_create({
            'policy_id': policy_id, 'policy_name': row['name'],
            'project_id': row['project_id'], 'state': 'running',
            'clone': clone, 'started_at': timeutils.utcnow()}))


class FakeEngine(FakePolicyEngine):
    """The engine's RPC calls of the API, on the same database.

    Records carry the caller's project and user, as the real engine's
    do; ``calls`` keeps what the API asked.
    """

    def __init__(self, db):
        self.db = db
        self.calls = []
        self.images = {IMAGE: {'name': 'cirros', 'tags': ['t'],
                               'properties': {'os': 'linux'}},
                       IMAGE2: {'name': 'fedora', 'tags': [],
                                'properties': {}}}
        self.raise_on_call = None

    def _called(self, method, ctxt, **kwargs):
        assert isinstance(ctxt, dict), ctxt
        self.calls.append((method, ctxt, kwargs))
        if self.raise_on_call is not None:
            raise self.raise_on_call

    def migrate(self, ctxt, peer, images=None, selector=None, options=None,
                request_id=None):
        self._called('migrate', ctxt, peer=peer, images=images,
                     selector=selector, options=options,
                     request_id=request_id)
        if peer not in PEERS:
            raise exception.PeerNotFound(peer=peer, known=', '.join(PEERS))
        if images is None:
            images = [i for i, meta in self.images.items()
                      if (not selector.get('tag') or
                          selector['tag'] in meta['tags']) and
                      all(meta['properties'].get(k) == v for k, v in
                          (selector.get('properties') or {}).items())]
        for image in images:
            if image not in self.images:
                raise exception.ImageNotFound(image_id=image, cloud='a')
        existing = self.db.migration_get_all(
            filters={'request_id': request_id},
            project_id=ctxt['project_id'])
        if existing:
            rows = existing
        else:
            rows = []
            for image in images:
                row = self.db.migration_create({
                    'request_id': request_id, 'image_id': image,
                    'image_name': self.images[image]['name'],
                    'peer': peer, 'direction': 'outgoing',
                    'state': 'queued', 'attempt': 1,
                    'mode': (options or {}).get('mode', 'pipelined'),
                    'options': options or {},
                    'project_id': ctxt['project_id'],
                    'user_id': ctxt['user']})
                self.db.migration_event_add(row['id'], None, 'queued')
                rows.append(row)
        return {'request_id': request_id, 'peer': peer,
                'migrations': [rpc_row(r) for r in rows]}

    def cancel_migration(self, ctxt, migration_id):
        self._called('cancel_migration', ctxt, migration_id=migration_id)
        state = self.db.migration_get(migration_id)['state']
        if state not in ('queued', 'running'):
            raise exception.MigrationStateConflict(
                migration_id=migration_id, state='already %s' % state,
                action='cancel')
        row = self.db.migration_update(
            migration_id, {'state': 'cancelled'},
            expected_state=['queued', 'running'])
        self.db.migration_event_add(migration_id, None, 'cancelled')
        return rpc_row(row)

    def retry_migration(self, ctxt, migration_id):
        self._called('retry_migration', ctxt, migration_id=migration_id)
        row = self.db.migration_get(migration_id)
        if row['state'] not in ('failed', 'cancelled'):
            raise exception.MigrationStateConflict(
                migration_id=migration_id, state=row['state'],
                action='retry')
        row = self.db.migration_update(
            migration_id, {'state': 'queued',
                           'attempt': (row['attempt'] or 1) + 1})
        self.db.migration_event_add(migration_id, None, 'retried')
        return rpc_row(row)

    def _peer(self, name):
        return {'name': name,
                'address': '192.0.2.%d' % (PEERS.index(name) + 2),
                'port': 7000, 'reachable': name == 'b',
                'rtt_ms': 0.25 if name == 'b' else None,
                'last_throughput': 1.5e9 if name == 'b' else None,
                'last_transfer_at': '2026-11-24T10:00:00.000000'
                if name == 'b' else None,
                'checked_at': '2026-11-24T10:05:00.123456',
                'error': None if name == 'b' else 'connection refused'}

    def list_peers(self, ctxt):
        self._called('list_peers', ctxt)
        return [self._peer(name) for name in PEERS]

    def get_peer(self, ctxt, name):
        self._called('get_peer', ctxt, name=name)
        if name not in PEERS:
            raise exception.PeerNotFound(peer=name, known=', '.join(PEERS))
        return self._peer(name)


def make_conf(case, directory, **api_overrides):
    conf = cfg.ConfigOpts()
    dtn_conf.register_opts(conf)
    conf([], default_config_files=[])
    case.addCleanup(conf.reset)
    conf.set_override('connection', 'sqlite:///%s/dtn.sqlite' % directory,
                      'database')
    conf.set_override('auth_strategy', 'noauth2', 'api')
    for key, value in api_overrides.items():
        conf.set_override(key, value, 'api')
    return conf


class ApiTestCase(testcase.TestCase):
    """The full application, noauth2, a real database, a fake engine."""

    api_overrides = {}

    def setUp(self):
        super().setUp()
        directory = self.useFixture(fixtures.TempDir()).path
        self.conf = make_conf(self, directory, **self.api_overrides)
        db_migration.db_sync(self.conf)
        self.db = db_api.Database(self.conf)
        self.addCleanup(self.db.dispose)
        self.engine = FakeEngine(self.db)
        self.api = app_mod.Api(self.conf, db=self.db, engine=self.engine)
        self.app = app_mod.deploy(self.conf, self.api)

    def headers(self, persona):
        if persona is None:
            return {}
        project, roles = PERSONAS[persona]
        return {'X-User-Id': 'user-' + persona, 'X-Project-Id': project,
                'X-Roles': roles}

    def request(self, method, path, body=None, persona='member',
                headers=None, raw=None, content_type='application/json'):
        req = webob.Request.blank(path, method=method)
        req.headers.update(self.headers(persona))
        if body is not None or raw is not None:
            req.body = raw if raw is not None else \
                json.dumps(body).encode('utf-8')
            if content_type:
                req.content_type = content_type
        req.headers.update(headers or {})
        return req.get_response(self.app)

    def add(self, project=PROJECT, **values):
        """A record in the database, as the engine writes it."""
        row = {'direction': 'outgoing', 'state': 'running',
               'peer': 'b', 'image_id': IMAGE, 'image_name': 'cirros',
               'project_id': project, 'user_id': 'user-member'}
        row.update(values)
        return self.db.migration_create(row)

    def add_policy(self, project=PROJECT, **values):
        """A protection policy in the database, as the engine writes
        it.
        """
        row = {'name': 'gold', 'peer': 'b', 'mode': 'continuous',
               'rpo_minutes': 60, 'selector': {'tags': ['gold']},
               'options': dict(POLICY_OPTIONS), 'project_id': project,
               'user_id': 'user-member'}
        row.update(values)
        return self.db.policy_create(row)

    def add_drill(self, project=PROJECT, **values):
        """A drill in the database, finished, as the engine writes it."""
        row = {'policy_id': 'c' * 32, 'policy_name': 'gold',
               'project_id': project, 'state': 'passed', 'clone': False,
               'images_total': 1, 'images_intact': 1, 'images_bad': 0,
               'rto_seconds': 2.5, 'report': {'images': [DRILL_IMAGE]},
               'started_at': datetime.datetime(2026, 11, 24, 10, 0),
               'finished_at': datetime.datetime(2026, 11, 24, 10, 1)}
        row.update(values)
        return self.db.drill_create(row)

    def assertError(self, code, resp, contains=None):
        self.assertEqual(code, resp.status_int, resp.body)
        self.assertEqual('application/json', resp.content_type)
        error = resp.json['error']
        self.assertEqual(code, error['code'])
        self.assertTrue(error['title'])
        self.assertTrue(error['message'])
        if contains:
            self.assertIn(contains, error['message'])
        return error
