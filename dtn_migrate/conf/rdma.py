"""[rdma] options: which RDMA device the data plane uses."""

from oslo_config import cfg

from dtn_migrate.conf import utils

rdma_group = cfg.OptGroup(
    'rdma', title='RDMA data plane',
    help='Used when [transfer] transport is auto or rdma and pyverbs finds '
         'a device.')

rdma_opts = [
    cfg.StrOpt('device',
               help='RDMA device name (e.g. mlx5_0); default: the first '
                    'usable one.'),
    cfg.PortOpt('port', default=1, min=1, help='Device port number.'),
    cfg.IntOpt('gid_index', min=0,
               help='GID index for RoCE; default: the first RoCE v2 GID.'),
]


def register_opts(conf):
    utils.register(conf, rdma_group, rdma_opts)


def list_opts():
    return {rdma_group: rdma_opts}
