"""Loading pyverbs, across the releases whose enums moved.

rdma-core up to v58 (Debian 12 ships v44) has ``pyverbs.enums``, whose
names are both module attributes (``enums.IBV_QPT_RC``) and members of
their enum class (``enums.ibv_qp_type.IBV_QPT_RC``).  v59 (August 2025)
removed that module: the enums live in ``pyverbs.libibverbs_enums`` and,
built with Cython 3.1, only the qualified form exists.  So every name is
looked up through its enum class, in ``libibverbs_enums`` first and then
in ``enums``.

``ENUMS`` lists every enum this data plane uses (the conformance test in
tests/unit/transfer/transport checks it against the installed pyverbs
and against v59's names).  ``load`` raises ``PyverbsMissing`` when
pyverbs is not installed at all, and ``PyverbsIncompatible`` ("pyverbs
incompatible: ...") when it is installed but lacks what is needed: an
operator must see the second, never mistake it for "no RDMA device".
"""

import importlib
import types

from dtn_migrate.transfer import errors

#: The enum modules, newest first.
ENUM_MODULES = ("pyverbs.libibverbs_enums", "pyverbs.enums")

#: Enum class -> the members this data plane uses.
ENUMS = {
    "ibv_port_state": ("IBV_PORT_ACTIVE",),
    "ibv_gid_type_sysfs": ("IBV_GID_TYPE_SYSFS_ROCE_V2",),
    "ibv_access_flags": ("IBV_ACCESS_LOCAL_WRITE", "IBV_ACCESS_REMOTE_READ",
                         "IBV_ACCESS_RELAXED_ORDERING"),
    "ibv_qp_type": ("IBV_QPT_RC",),
    "ibv_qp_state": ("IBV_QPS_RTR", "IBV_QPS_ERR"),
    "ibv_qp_attr_mask": ("IBV_QP_STATE",),
    "ibv_wr_opcode": ("IBV_WR_RDMA_READ",),
    "ibv_send_flags": ("IBV_SEND_SIGNALED",),
    "ibv_wc_status": ("IBV_WC_SUCCESS",),
}

#: Enum classes used as classes (to name a status).
ENUM_CLASSES = ("ibv_wc_status",)

#: The pyverbs modules this data plane uses.
MODULES = ("addr", "cq", "device", "mr", "pd", "qp", "wr")


class PyverbsMissing(errors.TransferError):
    """pyverbs is not installed."""


class PyverbsIncompatible(errors.TransferError):
    """pyverbs is installed but lacks what this data plane needs."""

    def __init__(self, message):
        super().__init__("pyverbs incompatible: %s" % message)


def enum_namespace(module):
    """The used enums of ``module`` as a namespace of flat names.

    Raises ``PyverbsIncompatible`` naming the first one missing.
    """
    found = {}
    for cls_name, members in ENUMS.items():
        cls = getattr(module, cls_name, None)
        if cls is None:
            raise PyverbsIncompatible("%s has no enum %s"
                                      % (module.__name__, cls_name))
        for name in members:
            try:
                found[name] = getattr(cls, name)
            except AttributeError:
                raise PyverbsIncompatible("%s.%s has no member %s"
                                          % (module.__name__, cls_name,
                                             name))
    for cls_name in ENUM_CLASSES:
        found[cls_name] = getattr(module, cls_name)
    return types.SimpleNamespace(**found)


def _import(name):
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        if name == "pyverbs" and getattr(exc, "name", None) == "pyverbs":
            raise PyverbsMissing("pyverbs is not installed: %s" % exc)
        raise PyverbsIncompatible("cannot import %s: %s" % (name, exc))
    except Exception as exc:  # noqa: B902 - a broken build, named
        raise PyverbsIncompatible("importing %s failed: %s" % (name, exc))


def _enum_module():
    tried = []
    for name in ENUM_MODULES:
        try:
            return importlib.import_module(name)
        except ImportError as exc:
            tried.append("%s (%s)" % (name, exc))
    raise PyverbsIncompatible("no enum module: tried %s" % "; ".join(tried))


def load():
    """The parts of pyverbs this data plane uses, as a namespace.

    ``addr``, ``cq``, ``device``, ``mr``, ``pd``, ``qp``, ``wr``
    (modules), ``e`` (the enums, flat names) and ``error``
    (PyverbsError).
    """
    _import("pyverbs")
    mods = {name: _import("pyverbs." + name) for name in MODULES}
    error = getattr(_import("pyverbs.pyverbs_error"), "PyverbsError", None)
    if error is None:
        raise PyverbsIncompatible("pyverbs.pyverbs_error has no "
                                  "PyverbsError")
    return types.SimpleNamespace(e=enum_namespace(_enum_module()),
                                 error=error, **mods)
