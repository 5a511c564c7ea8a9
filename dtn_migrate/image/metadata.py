"""Image metadata: what may be migrated, and what travels with the data.

``describe`` turns a Glance image into a JSON-safe descriptor that the
source engine sends to its peer; ``create_args`` turns it back into
``images.create`` arguments on the peer; ``compare`` checks the result.
"""

import collections

from dtn_migrate import exception
from dtn_migrate.i18n import _

HASH_ALGO = 'sha512'

# Descriptor keys besides ``properties``; the first group is what
# images.create accepts.
CREATE_FIELDS = ('name', 'disk_format', 'container_format', 'min_disk',
                 'min_ram', 'visibility', 'protected', 'os_hidden')
DATA_FIELDS = ('size', 'os_hash_algo', 'os_hash_value', 'checksum')
CORE_FIELDS = ('id',) + CREATE_FIELDS + DATA_FIELDS + ('tags',)

# Set by Glance (or by the target: owner), never copied as properties.
GLANCE_OWNED = frozenset(CORE_FIELDS + (
    'status', 'created_at', 'updated_at', 'deleted', 'deleted_at', 'owner',
    'file', 'schema', 'self', 'locations', 'location', 'direct_url',
    'stores', 'virtual_size'))
GLANCE_OWNED_PREFIXES = ('os_glance_', 'os_hash_')

# What compare() checks on the peer.
COMPARED_FIELDS = ('disk_format', 'container_format', 'min_disk', 'min_ram',
                   'size', 'os_hash_algo', 'os_hash_value')


class Difference(collections.namedtuple('Difference',
                                        'field expected actual')):
    """One mismatch found by compare(); ``field`` is e.g. ``min_ram`` or
    ``properties.os_distro``.
    """

    __slots__ = ()

    def __str__(self):
        return '%s: expected %r, found %r' % self


def is_glance_owned(key):
    """True for keys Glance sets or reserves (not user properties)."""
    return key in GLANCE_OWNED or key.startswith(GLANCE_OWNED_PREFIXES)


def check_migratable(image):
    """Raise unless IMAGE (a dict) is active with data the peer can check:
    a size, a sha512 os_hash_value, and both formats.
    """
    image_id = image.get('id')
    if image.get('status') != 'active':
        raise exception.ImageNotActive(image_id=image_id,
                                       status=image.get('status'))
    if image.get('size') is None:
        reason = _('it has no size (no data)')
    elif image.get('os_hash_algo') != HASH_ALGO:
        reason = _('its os_hash_algo is %(algo)s, not %(want)s') % {
            'algo': image.get('os_hash_algo'), 'want': HASH_ALGO}
    elif not image.get('os_hash_value'):
        reason = _('it has no os_hash_value')
    elif not image.get('disk_format') or not image.get('container_format'):
        reason = _('its disk_format or container_format is not set')
    else:
        return
    raise exception.ImageUnsupported(image_id=image_id, reason=reason)


def _plain(value):
    """VALUE as JSON types (lists for tuples, str for the unknown)."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)


def describe(image):
    """A JSON-safe descriptor of IMAGE: its core fields, sorted ``tags``
    and ``properties`` (every user property).
    """
    desc = {key: _plain(image.get(key)) for key in CORE_FIELDS
            if key != 'tags'}
    desc['tags'] = sorted(str(t) for t in image.get('tags') or ())
    desc['properties'] = {str(k): _plain(v) for k, v in image.items()
                          if not is_glance_owned(str(k))}
    return desc


def _check_properties(properties, image_id):
    for key in properties:
        if not isinstance(key, str) or not key or is_glance_owned(key):
            raise exception.ImageUnsupported(
                image_id=image_id,
                reason=_('property %r is reserved by Glance') % (key,))


def create_args(descriptor, keep_id=False, visibility=None, owner=None,
                extra_properties=None):
    """kwargs for glanceclient ``images.create`` from DESCRIPTOR.

    KEEP_ID creates the image with the source's id; VISIBILITY overrides
    the descriptor's; OWNER sets the target project; EXTRA_PROPERTIES
    (e.g. a migration marker) are added, overriding same-named ones.
    """
    image_id = descriptor.get('id')
    properties = dict(descriptor.get('properties') or {})
    properties.update(extra_properties or {})
    _check_properties(properties, image_id)
    args = {key: descriptor[key] for key in CREATE_FIELDS
            if descriptor.get(key) is not None}
    args.update(properties)
    args['tags'] = list(descriptor.get('tags') or ())
    if visibility:
        args['visibility'] = visibility
    if owner:
        args['owner'] = owner
    if keep_id:
        args['id'] = image_id
    return args


def compare(descriptor, image):
    """Differences between DESCRIPTOR and IMAGE (the peer's copy): a list
    of ``Difference``, empty when formats, min_disk/min_ram, size, hash,
    tags and every descriptor property match.  Properties the peer has on
    top (a migration marker) are not differences.
    """
    diffs = [Difference(key, descriptor.get(key), image.get(key))
             for key in COMPARED_FIELDS
             if descriptor.get(key) != image.get(key)]
    expected, tags = (sorted(descriptor.get('tags') or ()),
                      sorted(image.get('tags') or ()))
    if expected != tags:
        diffs.append(Difference('tags', expected, tags))
    for key, value in sorted((descriptor.get('properties') or {}).items()):
        if image.get(key) != value:
            diffs.append(Difference('properties.%s' % key, value,
                                    image.get(key)))
    return diffs
