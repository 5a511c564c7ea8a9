"""[glance] options: own, keystoneauth1 session/adapter/auth."""


from keystoneauth1 import loading as ks_loading
from keystoneauth1 import token_endpoint

from dtn_migrate import conf as global_conf
from dtn_migrate.conf import glance
from tests.unit import utils
from tests.unit import testcase

MiB = 1 << 20


class TestGlanceOpts(testcase.TestCase):
    def conf(self, text=''):
        return utils.conf_from_text(self, glance.register_opts, text)

    def test_defaults(self):
        g = self.conf().glance
        self.assertEqual(('local', 8, 30.0, MiB),
                         (g.cloud_name, g.retries, g.retry_max_delay,
                          g.chunk_size))
        self.assertEqual('image', g.service_type)
        self.assertIsNone(g.auth_type)
        for name in ('timeout', 'cafile', 'insecure', 'region_name',
                     'valid_interfaces', 'endpoint_override',
                     'auth_section'):
            self.assertIn(name, g)

    def test_registered_on_the_global_conf(self):
        self.assertIn('glance', global_conf.CONF)
        self.assertIn('retry_max_delay', global_conf.CONF.glance)
        self.assertIn('auth_type', global_conf.CONF.glance)

    def test_invalid_values_are_rejected(self):
        conf = self.conf()
        for name, value in (('retries', -1), ('retry_max_delay', -1),
                            ('chunk_size', 100)):
            self.assertRaises(ValueError, conf.set_override, name, value,
                              'glance')

    def test_list_opts_for_the_sample_config(self):
        (group, opts), = glance.list_opts().items()
        self.assertEqual('glance', group.name)
        names = [o.dest for o in opts]
        self.assertEqual(len(names), len(set(names)))
        for name in ('cloud_name', 'retries', 'retry_max_delay',
                     'chunk_size', 'auth_type', 'auth_section', 'auth_url',
                     'username', 'password', 'project_name',
                     'user_domain_name', 'project_domain_name',
                     'system_scope', 'cafile', 'timeout', 'region_name',
                     'valid_interfaces', 'endpoint_override'):
            self.assertIn(name, names)
        by_name = {o.dest: o for o in opts}
        self.assertTrue(by_name['password'].secret)
        self.assertEqual('image', by_name['service_type'].default)
        for opt in opts:
            self.assertTrue(opt.help, opt.dest)

    def test_password_plugin_from_config(self):
        conf = self.conf('[glance]\nauth_type = password\n'
                         'auth_url = http://ks.example:5000/v3\n'
                         'username = migrator\npassword = secret\n'
                         'project_name = p\nuser_domain_name = Default\n'
                         'project_domain_name = Default\n')
        plugin = ks_loading.load_auth_from_conf_options(conf, 'glance')
        self.assertEqual('http://ks.example:5000/v3', plugin.auth_url)
        self.assertEqual('migrator', plugin._username)

    def test_admin_token_plugin_from_config(self):
        # What the dev clouds' noauth Glances use: a stock plugin.
        conf = self.conf('[glance]\nauth_type = admin_token\n'
                         'endpoint = http://127.0.0.1:9292\n'
                         'token = t0\n')
        plugin = ks_loading.load_auth_from_conf_options(conf, 'glance')
        self.assertIsInstance(plugin, token_endpoint.Token)
        self.assertEqual('http://127.0.0.1:9292',
                         plugin.get_endpoint(None, service_type='image'))
        self.assertEqual({'X-Auth-Token': 't0'}, plugin.get_headers(None))

    def test_no_plugin_of_this_package(self):
        self.assertNotIn('dtn_migrate_devcloud',
                         ks_loading.get_available_plugin_names())

    def test_plugin_options_stay_in_their_conf(self):
        first = self.conf('[glance]\nauth_type = admin_token\n'
                          'endpoint = http://127.0.0.1:9292\n'
                          'token = t0\n')
        ks_loading.load_auth_from_conf_options(first, 'glance')
        # The plugin's required options are not forced on another conf.
        second = self.conf()
        self.assertNotIn('endpoint', second.glance)
        self.assertNotIn('endpoint', global_conf.CONF.glance)
