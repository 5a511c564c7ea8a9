"""Image descriptors: what may migrate, what travels, what is compared."""

import json


from dtn_migrate import exception
from dtn_migrate.image import metadata

from tests.unit import testcase

HASH = 'ab' * 64


def glance_image(**overrides):
    """An active image as Glance v2 returns it (glanceclient dict)."""
    image = {
        'id': '8d0d5f4e-2f4b-4bb1-9c39-0a8d1c3f6b11', 'name': 'debian-12',
        'status': 'active', 'disk_format': 'qcow2',
        'container_format': 'bare', 'min_disk': 2, 'min_ram': 512,
        'size': 123456, 'virtual_size': 2 << 30, 'checksum': 'cd' * 16,
        'os_hash_algo': 'sha512', 'os_hash_value': HASH,
        'visibility': 'private', 'protected': False, 'os_hidden': False,
        'owner': 'project-a', 'tags': ['prod', 'base'],
        'created_at': '2024-01-01T00:00:00Z',
        'updated_at': '2024-01-02T00:00:00Z',
        'file': '/v2/images/x/file', 'schema': '/v2/schemas/image',
        'self': '/v2/images/x', 'stores': 'fs',
        'locations': [{'url': 'file:///var/lib/glance/x', 'metadata': {}}],
        'direct_url': 'file:///var/lib/glance/x',
        'os_glance_importing_to_stores': '', 'os_glance_failed_import': '',
        'os_distro': 'debian', 'hw_disk_bus': 'virtio',
        'owner_specified.openstack.md5': 'cd' * 16,
    }
    image.update(overrides)
    return image


def peer_copy(args, image):
    """What the peer Glance shows after create(**args) and the upload."""
    peer = {k: v for k, v in args.items() if k != 'id'}
    for key in metadata.DATA_FIELDS:
        peer[key] = image[key]
    peer.update(status='active', stores='fs', owner='project-b',
                tags=list(reversed(args['tags'])))
    return peer


class TestCheckMigratable(testcase.TestCase):
    def test_active_image_passes(self):
        self.assertIsNone(metadata.check_migratable(glance_image()))

    def test_non_active_images_are_refused(self):
        for status in ('queued', 'saving', 'importing', 'deactivated',
                       'killed', 'pending_delete', None):
            e = self.assertRaises(exception.ImageNotActive,
                                  metadata.check_migratable,
                                  glance_image(status=status))
            self.assertEqual(str(status), str(e.kwargs['status']))
            self.assertIn('8d0d5f4e', str(e))
            self.assertEqual(409, e.code)

    def test_unsupported_images(self):
        cases = {
            'size': dict(size=None),
            'os_hash_algo': dict(os_hash_algo='sha256'),
            'os_hash_value': dict(os_hash_value=None),
            'disk_format': dict(disk_format=None),
            'container_format': dict(container_format=''),
        }
        for field, overrides in cases.items():
            e = self.assertRaises(exception.ImageUnsupported,
                                  metadata.check_migratable,
                                  glance_image(**overrides))
            self.assertIn(field.split('_')[-1], str(e))

    def test_md5_only_image_is_unsupported(self):
        image = glance_image()
        del image['os_hash_algo'], image['os_hash_value']
        e = self.assertRaises(exception.ImageUnsupported,
                              metadata.check_migratable, image)
        self.assertIn('sha512', str(e))


class TestDescribe(testcase.TestCase):
    def test_core_fields_and_sorted_tags(self):
        desc = metadata.describe(glance_image())
        self.assertEqual({
            'id', 'name', 'disk_format', 'container_format', 'min_disk',
            'min_ram', 'size', 'os_hash_algo', 'os_hash_value', 'checksum',
            'visibility', 'protected', 'os_hidden', 'tags', 'properties'},
            set(desc))
        self.assertEqual(['base', 'prod'], desc['tags'])
        self.assertEqual((2, 512, 123456, HASH),
                         (desc['min_disk'], desc['min_ram'], desc['size'],
                          desc['os_hash_value']))

    def test_only_user_properties(self):
        desc = metadata.describe(glance_image())
        self.assertEqual({'os_distro': 'debian', 'hw_disk_bus': 'virtio',
                          'owner_specified.openstack.md5': 'cd' * 16},
                         desc['properties'])

    def test_glance_owned_keys_never_become_properties(self):
        image = glance_image(os_glance_import_task='t',
                             os_hash_extra='x', deleted=False,
                             deleted_at=None)
        props = metadata.describe(image)['properties']
        for key in ('status', 'owner', 'created_at', 'updated_at', 'file',
                    'schema', 'self', 'stores', 'locations', 'direct_url',
                    'virtual_size', 'os_glance_import_task',
                    'os_glance_failed_import', 'os_hash_extra', 'checksum',
                    'size', 'id', 'tags', 'deleted', 'deleted_at'):
            self.assertNotIn(key, props)

    def test_hostile_properties_survive_json(self):
        hostile = {
            'a b': 'spaces', 'ключ': 'значение \u2603', 'x&y=z': '?#%',
            '"quoted"': "it's \"quoted\"\n\\", 'nul': 'a\x00b',
            'long': 'v' * 65535, 'backend': 'not-a-store',
            'owner_specified.openstack.sha256': '00' * 32, '': 'empty',
            'kernel_id': None,
        }
        desc = metadata.describe(glance_image(**hostile))
        self.assertEqual(desc, json.loads(json.dumps(desc)))
        for key, value in hostile.items():
            self.assertEqual(value, desc['properties'][key])

    def test_non_json_values_become_text(self):
        desc = metadata.describe(glance_image(odd=object(), pair=(1, 2),
                                              nested={'k': {1, 2}}))
        self.assertIsInstance(desc['properties']['odd'], str)
        self.assertEqual([1, 2], desc['properties']['pair'])
        self.assertIsInstance(desc['properties']['nested']['k'], str)
        json.dumps(desc)

    def test_image_without_tags_or_optional_fields(self):
        desc = metadata.describe({'id': 'i', 'status': 'queued'})
        self.assertEqual([], desc['tags'])
        self.assertEqual({}, desc['properties'])
        self.assertIsNone(desc['size'])


class TestCreateArgs(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.image = glance_image()
        self.desc = metadata.describe(self.image)

    def test_core_fields_properties_and_tags(self):
        args = metadata.create_args(self.desc)
        self.assertEqual({
            'name': 'debian-12', 'disk_format': 'qcow2',
            'container_format': 'bare', 'min_disk': 2, 'min_ram': 512,
            'visibility': 'private', 'protected': False, 'os_hidden': False,
            'tags': ['base', 'prod'], 'os_distro': 'debian',
            'hw_disk_bus': 'virtio',
            'owner_specified.openstack.md5': 'cd' * 16}, args)
        args['tags'].append('changed')
        self.assertEqual(['base', 'prod'], self.desc['tags'])

    def test_data_fields_are_never_sent(self):
        args = metadata.create_args(self.desc, keep_id=True)
        for key in ('size', 'checksum', 'os_hash_algo', 'os_hash_value',
                    'status', 'owner', 'virtual_size'):
            self.assertNotIn(key, args)

    def test_keep_id_visibility_owner_and_extra_properties(self):
        args = metadata.create_args(
            self.desc, keep_id=True, visibility='shared', owner='project-b',
            extra_properties={'dtn_migration_id': 'm-1',
                              'os_distro': 'debian12'})
        self.assertEqual(self.image['id'], args['id'])
        self.assertEqual('shared', args['visibility'])
        self.assertEqual('project-b', args['owner'])
        self.assertEqual('m-1', args['dtn_migration_id'])
        self.assertEqual('debian12', args['os_distro'])
        self.assertNotIn('id', metadata.create_args(self.desc))
        self.assertNotIn('owner', metadata.create_args(self.desc))

    def test_reserved_properties_are_refused(self):
        for key in ('status', 'os_glance_import_task', 'os_hash_value',
                    'size', 'id', 'self', 'locations', 'tags', ''):
            forged = dict(self.desc, properties={key: 'x'})
            self.assertRaises(exception.ImageUnsupported,
                              metadata.create_args, forged)
            self.assertRaises(exception.ImageUnsupported,
                              metadata.create_args, self.desc,
                              extra_properties={key: 'x'})

    def test_hostile_property_names_pass_through(self):
        props = {'a b': '1', 'ключ': '2', 'backend': '3', 'x&y=z': '4'}
        desc = metadata.describe(glance_image(**props))
        args = metadata.create_args(desc)
        for key, value in props.items():
            self.assertEqual(value, args[key])


class TestCompare(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.image = glance_image(**{'a b': 'c', 'ключ': 'v'})
        self.desc = metadata.describe(self.image)
        self.args = metadata.create_args(
            self.desc, keep_id=True, extra_properties={'dtn_marker': 'm'})

    def test_faithful_copy_has_no_differences(self):
        self.assertEqual([], metadata.compare(
            self.desc, peer_copy(self.args, self.image)))

    def test_each_difference_is_reported(self):
        peer = peer_copy(self.args, self.image)
        peer.update(min_ram=1024, disk_format='raw', size=1,
                    os_hash_value='00' * 64, tags=['prod'])
        del peer['ключ']
        peer['os_distro'] = 'ubuntu'
        diffs = metadata.compare(self.desc, peer)
        self.assertEqual(
            ['disk_format', 'min_ram', 'size', 'os_hash_value', 'tags',
             'properties.os_distro', 'properties.ключ'],
            [d.field for d in diffs])
        by_field = {d.field: d for d in diffs}
        self.assertEqual((512, 1024), by_field['min_ram'][1:])
        self.assertEqual(('v', None), by_field['properties.ключ'][1:])
        self.assertIn("min_ram: expected 512, found 1024",
                      [str(d) for d in diffs])

    def test_hash_algorithm_counts(self):
        peer = peer_copy(self.args, self.image)
        peer['os_hash_algo'] = 'sha256'
        self.assertEqual(['os_hash_algo'],
                         [d.field for d in metadata.compare(self.desc,
                                                            peer)])

    def test_extra_peer_properties_are_not_differences(self):
        peer = peer_copy(self.args, self.image)
        peer['added_by_peer'] = 'x'
        self.assertEqual([], metadata.compare(self.desc, peer))

    def test_differences_are_json_safe(self):
        peer = peer_copy(self.args, self.image)
        peer['min_disk'] = 3
        diffs = metadata.compare(self.desc, peer)
        self.assertEqual([['min_disk', 2, 3]], json.loads(json.dumps(diffs)))
