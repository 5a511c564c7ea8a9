"""Finding a usable RDMA device: ``probe``, which never raises.

pyverbs is imported here, lazily (``verbs.load``).
"""

from dtn_migrate.transfer.transport import verbs as verbs_loader
from dtn_migrate.transfer.transport.rdma import device as device_mod
from dtn_migrate.transfer.transport.rdma import resources

# ibv_transport_type values.
TRANSPORT_IB = 0             # InfiniBand and RoCE
_TRANSPORT_NAMES = {1: "iWARP", 2: "usNIC", 3: "usNIC UDP"}


def _load_verbs():
    """Import the parts of pyverbs this module uses (lazily)."""
    return verbs_loader.load()


def _device_name(dev):
    name = dev.name
    return name.decode() if isinstance(name, bytes) else str(name)


def probe(device=None, port=1, gid_index=None):
    """Open an RDMA device: ``(RdmaDevice, "")`` or ``(None, reason)``.

    ``device`` None takes the first device whose ``port`` is active;
    ``gid_index`` None picks a RoCE v2 GID on Ethernet ports.  Never
    raises: the reason says what is missing.  A pyverbs that is installed
    but unusable gives "pyverbs incompatible: ...", never a reason that
    starts "no RDMA".
    """
    try:
        verbs = _load_verbs()
    except verbs_loader.PyverbsMissing as exc:
        return None, "no RDMA device: %s" % exc
    except verbs_loader.PyverbsIncompatible as exc:
        return None, str(exc)
    except Exception as exc:  # noqa: B902 - never raises, says why
        return None, "pyverbs incompatible: %s" % exc
    try:
        devices = verbs.device.get_device_list()
    except Exception as exc:
        return None, ("no RDMA device: pyverbs get_device_list failed: %s "
                      "(no RDMA kernel driver such as ib_uverbs with "
                      "mlx5_ib or rdma_rxe is loaded?)" % exc)
    try:
        names = [_device_name(d) for d in devices]
        transports = {_device_name(d): getattr(d, "transport_type",
                                               TRANSPORT_IB)
                      for d in devices}
    except Exception as exc:
        return None, "no RDMA device: cannot read the device list: %s" % exc
    if not names:
        return None, "no RDMA device: the device list is empty"
    if device is not None:
        if device not in names:
            return None, ("RDMA device %r not found (present: %s)"
                          % (device, ", ".join(names)))
        names = [device]
    reasons = []
    for name in names:
        transport = transports.get(name, TRANSPORT_IB)
        if transport != TRANSPORT_IB:
            # iWARP connects queue pairs through RDMA CM over TCP; this
            # plane connects them by hand, as InfiniBand and RoCE allow.
            reasons.append("RDMA device %s uses the %s transport, which "
                           "this data plane does not support"
                           % (name, _TRANSPORT_NAMES.get(
                               transport, "transport %s" % transport)))
            continue
        try:
            return device_mod.RdmaDevice(verbs, name, port, gid_index), ""
        except resources.DeviceUnusable as exc:
            reasons.append(str(exc))
        except Exception as exc:
            reasons.append("cannot open RDMA device %s: %s" % (name, exc))
    return None, "; ".join(reasons)
