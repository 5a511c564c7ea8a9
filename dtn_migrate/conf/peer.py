"""[peer:<name>] options, one section per peer DTN in [agent] peers.

Like Cinder's per-backend sections, these groups are registered at run
time from the list of names; the sample configuration shows the options
under a ``[peer:<name>]`` placeholder.  The agent reads the peering
options; the engine reads the import rules of the peers its cloud
receives from (``import_rules``), registering the section of a peer
when it first imports from it.
"""

import collections

from oslo_config import cfg
from oslo_config import types

from dtn_migrate.common import states

SAMPLE_GROUP = 'peer:<name>'
#: Visibilities a peer may ask for unless configured otherwise: those
#: that show an image to nobody but its owner's project (a 'shared'
#: image arrives without members).
DEFAULT_VISIBILITIES = ['private', 'shared']

ImportRules = collections.namedtuple(
    'ImportRules', 'peer import_project allowed_projects allowed_visibilities '
                   'project_map')

peer_opts = [
    cfg.HostAddressOpt('address', help='Address of the peer DTN agent.'),
    cfg.PortOpt('port', default=47100,
                help='Transfer port of the peer DTN agent.'),
    cfg.StrOpt('key', secret=True,
               help='Shared HMAC key of this peering (hex or text, at least '
                    '16 bytes). Both DTNs of the pair hold the same key.'),
    cfg.StrOpt('key_file',
               help='File holding the key, instead of "key".'),
    cfg.BoolOpt('tls', default=False,
                help='Use TLS when sending to this peer (needs [tls] '
                     'ca_file).'),
    cfg.BoolOpt('require_tls', default=False,
                help='Refuse plain TCP connections from this peer.'),
    cfg.StrOpt('server_name',
               help='Name expected in the peer\'s TLS certificate; default: '
                    'its address.'),
    cfg.ListOpt('source_addresses', default=[],
                help='IP addresses or networks (CIDR) the peer\'s '
                     'connections come from. They are admitted first: '
                     'when every unauthenticated slot of this sink is '
                     'taken, a connection from one of them closes the '
                     'oldest one still authenticating from anywhere '
                     'else, and each counts towards '
                     '[transfer] max_unauthenticated_per_address by its '
                     'own address, never its IPv6 /64. Connections from '
                     'other addresses are still accepted (a firewall is '
                     'the place to refuse them). Empty: no preference.'),
]

#: What a peer may write into this DTN's staging root.
staging_opts = [
    cfg.StrOpt('incoming_names', default='migration',
               choices=[('migration', 'only <transfer id>/image.json and '
                                      '<transfer id>/image.data of the '
                                      'transfer the session sends'),
                        ('transfer', 'any file under <transfer id>/ of the '
                                     'transfer the session sends'),
                        ('any', 'any file of the staging root but in the '
                                'directory of another transfer (operator '
                                'transfers of arbitrary files with '
                                'dtn-migrate-manage transfer start)')],
               help='Receiving side: the names this peer\'s transfers may '
                    'write under the staging root. Any other name is '
                    'refused (the file fails, nothing is written) and '
                    'logged with the peer\'s name.'),
    cfg.IntOpt('staging_quota_bytes', default=4 << 40, min=1,
               help='Receiving side: the bytes this peer\'s transfers may '
                    'hold in the staging root at once (received files '
                    'not yet imported and removed, and partial copies, '
                    'at their full size). A file that would exceed it is '
                    'refused before anything is written. Default 4 TiB.'),
    cfg.IntOpt('staging_quota_files', default=10000, min=1,
               help='Receiving side: the files this peer\'s transfers may '
                    'hold in the staging root at once (a migration stages '
                    'two). A file that would exceed it is refused before '
                    'anything is written.'),
]

import_opts = [
    cfg.StrOpt('import_project',
               help='Receiving side: the Glance project (id) that images '
                    'imported from this peer belong to when the peer asks '
                    'for no target project. Empty: the project of this '
                    'cloud\'s engine ([glance] credentials), as before. '
                    'Not for the source projects project_map names.'),
    cfg.ListOpt('allowed_projects', default=[],
                help='Receiving side: the projects (ids) this peer may ask '
                     'for as target_project, besides import_project. '
                     'Empty: only import_project (and, when that is empty '
                     'too, no target project may be asked for at all). A '
                     'request for another project is refused before any '
                     'image is created. Not for the source projects '
                     'project_map names.'),
    cfg.DictOpt('project_map', default={},
                help='Receiving side: the project (id) of this cloud that '
                     'the images of each project of the peer cloud land '
                     'in, as <source project id>:<project id here> pairs '
                     '(the source project is the one that migrates, or '
                     'owns the protection policy, in the peer cloud). A '
                     'source project listed here imports only into its '
                     'project: by default, and as the only target_project '
                     'it may ask for; import_project and allowed_projects '
                     'do not apply to it. A source project not listed '
                     '(or a peer that names none) gets import_project and '
                     'may ask for allowed_projects. Empty: one project '
                     'for the whole peer, as before.'),
    cfg.ListOpt('allowed_visibilities', default=DEFAULT_VISIBILITIES,
                item_type=types.String(choices=states.VISIBILITIES),
                help='Receiving side: the visibilities an image imported '
                     'from this peer may get, asked for explicitly or '
                     'taken from the source image. Anything else (by '
                     'default public and community) is refused before '
                     'any image is created. An import that asks for none '
                     'gets private when allowed, else the first of these.'),
    cfg.BoolOpt('accept_deletions', default=True,
                help='Receiving side: delete the replica of an image that '
                     'this peer deleted, when its protection policy '
                     'mirrors deletions and asks after its grace period. '
                     'Only a replica this cloud catalogued for that peer '
                     'and policy, unchanged since, is deleted; never one '
                     'of a policy this cloud failed over. False: every '
                     'such request is refused and the replicas stay.'),
    cfg.BoolOpt('accept_metadata_updates', default=False,
                help='Source side of a failback: apply the metadata (name, '
                     'tags, min_disk, min_ram and the properties '
                     '[protection] failback_properties allows) that this '
                     'peer sends back for a replica whose bytes did not '
                     'change, to the image this cloud replicated to it as '
                     'that replica, for that policy, with that hash; only '
                     'while an administrator of this cloud has the '
                     'failback of that policy open (openstack dtn failback '
                     '<policy> here). False: every such update is refused '
                     '(and logged).'),
]

peer_opts = peer_opts + staging_opts + import_opts


def group_name(name):
    return 'peer:%s' % name


def register_opts(conf):
    """Register [peer:<name>] for every name in [agent] peers."""
    try:
        names = conf.agent.peers
    except cfg.Error:
        return
    for name in names or ():
        conf.register_opts(peer_opts, group=group_name(name))


def section(conf, name):
    """The ``[peer:<name>]`` section of ``conf``, registered if it is not
    yet (a peer the engine's own [agent] peers does not name).
    """
    group = group_name(name)
    conf.register_opts(peer_opts, group=group)
    return conf[group]


def import_rules(conf, name):
    """The import rules of peer ``name`` on ``conf`` (an ImportRules),
    its section registered if it is not yet.  Raises ValueError when a
    value is invalid (an unknown visibility, a malformed project_map).
    """
    group = group_name(name)
    values = section(conf, name)
    try:
        visibilities = list(values.allowed_visibilities or ())
    except cfg.Error as exc:
        raise ValueError('[%s] allowed_visibilities: %s' % (group, exc))
    try:
        project_map = dict(values.project_map or {})
    except cfg.Error as exc:
        raise ValueError('[%s] project_map: %s' % (group, exc))
    for source, target in project_map.items():
        if not source or not target:
            raise ValueError('[%s] project_map: %r is not a pair of '
                             'project ids' % (group, '%s:%s' % (source,
                                                                target)))
    return ImportRules(name, values.import_project or None,
                       [p for p in values.allowed_projects or () if p],
                       visibilities, project_map)


def list_opts():
    return {SAMPLE_GROUP: peer_opts}
