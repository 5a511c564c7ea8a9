"""[protection] options: protection policies of dtn-migrate-engine."""

from oslo_config import cfg

from dtn_migrate.conf import utils

protection_group = cfg.OptGroup(
    'protection', title='Protection policies',
    help='The engine keeps the images its protection policies select '
         'replicated on their peer: it follows Glance\'s notifications '
         'on this cloud\'s bus, scans Glance for what it missed, and '
         'tracks each policy\'s recovery point.')

protection_opts = [
    cfg.BoolOpt(
        'listen', default=True,
        help='Follow Glance\'s image notifications (image.activate, '
             'image.update, image.delete) for continuous policies. Glance '
             'must publish them to this cloud\'s bus: '
             '[oslo_messaging_notifications] driver = messagingv2 in '
             'glance-api.conf.'),
    cfg.StrOpt(
        'glance_exchange', default='glance',
        help='The exchange Glance publishes its notifications to (its '
             'control_exchange).'),
    cfg.ListOpt(
        'notification_topics', default=['notifications'],
        help='The topics Glance publishes its notifications on.'),
    cfg.StrOpt(
        'listener_pool', default='dtn-migrate-engine',
        help='Listener pool of the engine: its own queue, so that other '
             'consumers of Glance\'s notifications (Ceilometer, say) still '
             'get every one.'),
    cfg.IntOpt(
        'scan_interval', default=300, min=5,
        help='Seconds between scans of Glance for images of continuous '
             'policies whose notification was lost (an engine that was '
             'down, a broker restart). A scan also runs at start-up.'),
    cfg.IntOpt(
        'rpo_interval', default=30, min=1,
        help='Seconds between computations of every policy\'s recovery '
             'point (and runs of the scheduled policies that are due).'),
    cfg.IntOpt(
        'retry_interval', default=120, min=1,
        help='Seconds after which an image whose replication failed (a '
             'cut DTN link, a full disk on the peer) is tried again.'),
    cfg.FloatOpt(
        'at_risk_fraction', default=0.5, min=0.0, max=1.0,
        help='A policy is at-risk once its oldest unreplicated change is '
             'this fraction of its RPO target old (or its peer is '
             'unreachable while a change waits), breached once it is '
             'as old as the target.'),
    cfg.StrOpt(
        'drill_dir',
        help='Directory where a drill keeps the replica it checks while '
             'it runs qemu-img check (one image at a time; default: the '
             'system\'s temporary directory).'),
    cfg.StrOpt(
        'drill_project',
        help='Project that owns the hidden clones a drill with clone makes '
             '(and removes); default: the project of the replicas.'),
    cfg.IntOpt(
        'max_running_drills', default=2, min=1,
        help='Drills that may run at once on this cloud (each downloads '
             'and hashes every replica of its policy). One more is '
             'refused (409) until one ends; so is a second drill of a '
             'policy whose drill runs.'),
    cfg.IntOpt(
        'qemu_img_address_space', default=1024, min=64,
        help='MiB of address space qemu-img may use when a drill '
             'inspects and checks a replica (the bytes a peer sent).'),
    cfg.IntOpt(
        'qemu_img_cpu_time', default=60, min=1,
        help='Seconds of CPU time qemu-img may use on one replica.'),
    cfg.IntOpt(
        'failback_window', default=14400, min=60,
        help='Seconds for which this cloud accepts the metadata a peer '
             'sends back in its failback of a policy, once an '
             'administrator opened it here (openstack dtn failback '
             '<policy>, on the cloud where the policy is primary), '
             'unless the peer says earlier that its failback is '
             'complete. Also needs [peer:<name>] '
             'accept_metadata_updates.'),
    cfg.ListOpt(
        'failback_properties', default=['description', 'x_*'],
        help='Image properties (fnmatch patterns) a peer\'s failback may '
             'set or remove on this cloud\'s images; their name, tags, '
             'min_disk and min_ram always may. Whatever the patterns, '
             'never: image signatures (img_*), Glance\'s own (os_hash_*, '
             'os_glance_*), owner, visibility, protected, os_hidden, the '
             'dtn_migrate_* markers, and what decides how a server boots '
             '(hw_*, os_*, kernel_id, ramdisk_id, block device mappings, '
             'traits, architecture, hypervisor_type, vm_mode).'),
    cfg.IntOpt(
        'default_rpo_minutes', default=60, min=1,
        help='RPO target of a policy created without one.'),
]


def register_opts(conf):
    utils.register(conf, protection_group, protection_opts)


def list_opts():
    return {protection_group: protection_opts}
