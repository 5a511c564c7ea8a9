"""The default policies: the contract's names, documented, project
scoped, the personas' answers, and the generated sample in etc/.
"""

import importlib.metadata
import os
import pathlib

import fixtures
from oslo_config import cfg
from oslo_policy import generator
from oslo_policy import policy as oslo_policy

import dtn_migrate
from dtn_migrate import conf as dtn_conf
from dtn_migrate import context
from dtn_migrate import exception
from dtn_migrate import policies
from dtn_migrate import policy

from tests.unit import testcase

ROOT = pathlib.Path(dtn_migrate.__file__).parent.parent
SAMPLE = ROOT / 'etc' / 'dtn-migrate' / 'policy.yaml.sample'
NAMES = {
    'dtn:migration:create', 'dtn:migration:create:target_project',
    'dtn:migration:create:visibility', 'dtn:migration:create:keep_id',
    'dtn:migration:list',
    'dtn:migration:list:all_projects', 'dtn:migration:show',
    'dtn:migration:cancel', 'dtn:migration:retry', 'dtn:peer:list',
    'dtn:peer:show', 'dtn:peer:show:details', 'dtn:policy:create',
    'dtn:policy:create:projects', 'dtn:policy:create:target_project',
    'dtn:policy:create:keep_id', 'dtn:policy:delete:non_primary',
    'dtn:policy:list', 'dtn:policy:list:all_projects', 'dtn:policy:show',
    'dtn:policy:update', 'dtn:policy:delete', 'dtn:policy:sync',
    'dtn:policy:failover', 'dtn:policy:failback',
    'dtn:replica:list', 'dtn:replica:list:all_projects',
    'dtn:drill:start', 'dtn:drill:start:clone', 'dtn:drill:list',
    'dtn:drill:list:all_projects', 'dtn:drill:show',
}
#: rule -> the personas it allows on their own project's resources.
ALLOWED = {
    'dtn:migration:create': {'admin', 'member'},
    'dtn:migration:create:target_project': {'admin'},
    'dtn:migration:create:visibility': {'admin'},
    'dtn:migration:create:keep_id': {'admin'},
    'dtn:migration:list': {'admin', 'member', 'reader'},
    'dtn:migration:list:all_projects': {'admin'},
    'dtn:migration:show': {'admin', 'member', 'reader'},
    'dtn:migration:cancel': {'admin', 'member'},
    'dtn:migration:retry': {'admin', 'member'},
    'dtn:peer:list': {'admin', 'member', 'reader'},
    'dtn:peer:show': {'admin', 'member', 'reader'},
    'dtn:peer:show:details': {'admin'},
    'dtn:policy:create': {'admin', 'member'},
    'dtn:policy:create:projects': {'admin'},
    'dtn:policy:create:target_project': {'admin'},
    'dtn:policy:create:keep_id': {'admin'},
    'dtn:policy:list': {'admin', 'member', 'reader'},
    'dtn:policy:list:all_projects': {'admin'},
    'dtn:policy:show': {'admin', 'member', 'reader'},
    'dtn:policy:update': {'admin', 'member'},
    'dtn:policy:delete': {'admin', 'member'},
    'dtn:policy:delete:non_primary': {'admin'},
    'dtn:policy:sync': {'admin', 'member'},
    'dtn:policy:failover': {'admin'},
    'dtn:policy:failback': {'admin'},
    'dtn:replica:list': {'admin', 'member', 'reader'},
    'dtn:replica:list:all_projects': {'admin'},
    'dtn:drill:start': {'admin', 'member'},
    'dtn:drill:start:clone': {'admin'},
    'dtn:drill:list': {'admin', 'member', 'reader'},
    'dtn:drill:list:all_projects': {'admin'},
    'dtn:drill:show': {'admin', 'member', 'reader'},
}
PROJECT = 'p1'
ROLES = {'admin': ['admin', 'member', 'reader'],
         'member': ['member', 'reader'], 'reader': ['reader'],
         'nobody': []}


def _context(persona, project=PROJECT, **kwargs):
    return context.RequestContext(user_id='u-' + persona,
                                  project_id=project,
                                  roles=ROLES[persona], **kwargs)


class TestRules(testcase.TestCase):

    def test_names(self):
        names = {r.name for r in policies.list_rules()}
        self.assertEqual(NAMES | {'context_is_admin'}, names)

    def test_documented_and_project_scoped(self):
        for rule in policies.list_rules():
            if rule.name == 'context_is_admin':
                continue
            self.assertIsInstance(rule, oslo_policy.DocumentedRuleDefault)
            self.assertEqual(['project'], rule.scope_types, rule.name)
            self.assertTrue(rule.description)
            self.assertTrue(all(op['path'].startswith('/v1/')
                                for op in rule.operations))


class TestEnforcement(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = cfg.ConfigOpts()
        self.conf([], default_config_files=[])
        self.enforcer = policy.make_enforcer(self.conf)

    def test_new_defaults_and_scope_are_enforced(self):
        self.assertTrue(self.conf.oslo_policy.enforce_new_defaults)
        # oslo.policy 6 always enforces scope and has no option left.
        if 'enforce_scope' in self.conf.oslo_policy:
            self.assertTrue(self.conf.oslo_policy.enforce_scope)

    def test_personas_on_their_own_project(self):
        for rule, allowed in ALLOWED.items():
            for persona in ROLES:
                self.assertEqual(
                    persona in allowed,
                    policy.check(_context(persona), rule,
                                 {'project_id': PROJECT}, self.enforcer),
                    (rule, persona))

    def test_another_project(self):
        for rule in ALLOWED:
            # A member or reader of p1 has nothing on p2's records; the
            # admin has.
            for persona in ('member', 'reader'):
                self.assertFalse(policy.check(
                    _context(persona), rule, {'project_id': 'p2'},
                    self.enforcer), (rule, persona))
            self.assertTrue(policy.check(
                _context('admin'), rule, {'project_id': 'p2'},
                self.enforcer), rule)

    def test_authorize_raises_policy_not_authorized(self):
        exc = self.assertRaises(
            exception.PolicyNotAuthorized, policy.authorize,
            _context('reader'), 'dtn:migration:create',
            {'project_id': PROJECT}, self.enforcer)
        self.assertEqual(403, exc.code)
        self.assertIn('dtn:migration:create', str(exc))

    def test_system_scope_is_refused(self):
        ctxt = context.RequestContext(user_id='u', roles=['admin'],
                                      system_scope='all')
        self.assertRaises(exception.PolicyNotAuthorized, policy.authorize,
                          ctxt, 'dtn:migration:list',
                          {'project_id': PROJECT}, self.enforcer)
        self.assertFalse(policy.check(ctxt, 'dtn:migration:list',
                                      {'project_id': PROJECT},
                                      self.enforcer))

    def test_is_admin(self):
        self.assertTrue(policy.is_admin(_context('admin'), self.enforcer))
        self.assertFalse(policy.is_admin(_context('member'),
                                         self.enforcer))


class TestEntryPoints(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.addCleanup(policy.reset)
        policy.reset()
        # A process of its own: the service's options, nothing parsed.
        conf = cfg.ConfigOpts()
        dtn_conf.register_opts(conf)
        self.useFixture(fixtures.MockPatchObject(dtn_conf, 'CONF', conf))
        self.conf = conf

    def _installed(self, group):
        try:
            dist = importlib.metadata.distribution('dtn-migrate')
        except importlib.metadata.PackageNotFoundError:
            self.skipTest('dtn-migrate is not installed')
        found = [ep for ep in dist.entry_points if ep.group == group and
                 ep.name == 'dtn_migrate']
        if not found:
            self.skipTest('the installed dtn-migrate predates the %s '
                          'entry point (pip install -e .)' % group)
        return found[0]

    def test_get_enforcer(self):
        ep = self._installed('oslo.policy.enforcer')
        enforcer = ep.load()()
        self.assertIs(enforcer, policy.init())
        self.assertIs(self.conf, enforcer.conf)
        self.assertIn('dtn:migration:create', enforcer.registered_rules)

    def test_sample_is_generated(self):
        self._installed('oslo.policy.policies')
        out = os.path.join(self.useFixture(fixtures.TempDir()).path,
                           'policy.yaml.sample')
        generator.generate_sample(args=[
            '--namespace', 'dtn_migrate', '--output-file', out],
            conf=cfg.ConfigOpts())
        with open(out) as f:
            expected = f.read()
        self.assertEqual(expected, SAMPLE.read_text(),
                         'run: oslopolicy-sample-generator --config-file '
                         'etc/dtn-migrate/dtn-migrate-policy-generator.conf')
