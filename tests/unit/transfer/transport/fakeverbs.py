"""A fake pyverbs over a simulated fabric, following the real API.

Every class, method, attribute and keyword argument here mirrors the
installed pyverbs (``test_verbs_conformance`` checks them, so code that
runs on this fake uses only what the real module has).  The enums are the
real ones: ``install`` puts either the real ``pyverbs.enums`` (rdma-core
up to v58) or a ``pyverbs.libibverbs_enums`` shaped like v59's (qualified
names only) into the fake package.

The fabric behaves like an adapter where it matters here: an RDMA READ
goes from a connected RC queue pair to its peer, must name an rkey of an
MR in the *peer's* protection domain with remote read access, inside
that MR, into a local MR of the reader's own domain; otherwise it
completes with an error and both queue pairs go to the error state.
Registration counts pinned bytes against ``Fabric.memlock``.
"""

import ctypes
import enum
import itertools
import os
import sys
import threading
import types
from unittest import mock

try:
    from pyverbs import enums as REAL_ENUMS
except Exception:            # pragma: no cover - no pyverbs here
    REAL_ENUMS = None


FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures",
                       "libibverbs_enums_v59.txt")


class PyverbsError(Exception):
    pass


class PyverbsRDMAError(PyverbsError):
    pass


def _e():
    return REAL_ENUMS


class Fabric:
    """Shared state of every fake device: queue pairs, keys, memory."""

    def __init__(self, devices=("fake0",), memlock=None, gids=None,
                 link_layer=2, state=4, lid=0, transports=None,
                 list_error=None, open_error=None, reg_error=None):
        self.devices = devices
        self.link_layer = link_layer      # 2 Ethernet (RoCE), 1 IB
        self.state = state                # port state (4: active)
        self.lid = lid
        self.transports = transports or {}    # name -> transport type
        self.list_error = list_error      # get_device_list raises this
        self.open_error = open_error      # Context() raises this
        self.reg_error = reg_error        # MR() raises this
        self.log = []                     # ("open", name), ("close", cls)
        self.memlock = memlock            # bytes that may be pinned
        self.pinned = 0
        self.peak_pinned = 0
        self.mrs = []                     # live MRs
        self.pds = []                     # live PDs
        self.qps = {}                     # qpn -> QP
        self.reads = 0
        self.read_bytes = 0
        self.on_read = None               # f(n, view, remote address)
        #                                   may damage the bytes read
        self.fail_read = None             # f(n) -> True: fail this READ
        self.lock = threading.RLock()
        self._keys = itertools.count(0x1000, 0x100)
        self._qpns = itertools.count(0x20)
        # (GID text, gid type): index 0 RoCE v1, index 1 RoCE v2.
        self.gids = gids or [
            ("0000:0000:0000:0000:0000:ffff:0a00:0001", 0),
            ("0000:0000:0000:0000:0000:ffff:0a00:0001", 1)]

    def key(self):
        return next(self._keys)

    def qpn(self):
        return next(self._qpns)


FABRIC = None


def _fabric():
    return FABRIC


# pyverbs.device

class Device:
    __slots__ = ("name", "transport_type")

    def __init__(self, name, transport_type):
        self.name = name
        self.transport_type = transport_type


class PortAttr:
    __slots__ = ("state", "link_layer", "lid", "active_mtu", "max_msg_sz",
                 "gid_tbl_len")

    def __init__(self):
        fabric = _fabric()
        self.state = fabric.state
        self.link_layer = fabric.link_layer
        self.lid = fabric.lid
        self.active_mtu = 5
        self.max_msg_sz = 1 << 31
        self.gid_tbl_len = len(_fabric().gids)


class DeviceAttr:
    __slots__ = ("max_mr_size", "max_qp_rd_atom", "max_qp_init_rd_atom",
                 "max_qp_wr")

    def __init__(self):
        self.max_mr_size = 1 << 40
        self.max_qp_rd_atom = 16
        self.max_qp_init_rd_atom = 8
        self.max_qp_wr = 1024


class Context:
    def __init__(self, name=None):
        fabric = _fabric()
        if fabric.open_error or name not in fabric.devices:
            raise PyverbsRDMAError(fabric.open_error or
                                   "Failed to open device %s" % name)
        self.name = name
        self.closed = False
        fabric.log.append(("open", name))

    def query_port(self, port_num):
        if port_num != 1:
            raise PyverbsRDMAError("Failed to query port %d" % port_num)
        return PortAttr()

    def query_device(self):
        return DeviceAttr()

    def query_gid(self, port_num, index):
        gids = _fabric().gids
        if not 0 <= index < len(gids):
            raise PyverbsRDMAError("Failed to query gid %d" % index)
        return gids[index][0]

    def query_gid_type(self, port_num, index):
        return _fabric().gids[index][1]

    def close(self):
        self.closed = True
        _fabric().log.append(("close", "Context"))


def get_device_list():
    fabric = _fabric()
    if fabric.list_error:
        raise PyverbsRDMAError(fabric.list_error)
    return [Device(name.encode(), fabric.transports.get(name, 0))
            for name in fabric.devices]


_PORT_STATES = {0: "NOP", 1: "Down", 2: "Init", 3: "Armed", 4: "Active",
                5: "Active deferred"}


def port_state_to_str(port_state):
    return "%s (%d)" % (_PORT_STATES.get(port_state, "Unknown"),
                        port_state)


# pyverbs.pd

class PD:
    def __init__(self, creator):
        self.ctx = creator
        self.mrs = {}                     # rkey -> MR
        self.closed = False
        with _fabric().lock:
            _fabric().pds.append(self)

    def close(self):
        fabric = _fabric()
        with fabric.lock:
            if not self.closed:
                self.closed = True
                fabric.pds.remove(self)
                fabric.log.append(("close", "PD"))


# pyverbs.mr

class MR:
    def __init__(self, creator, length=0, access=0, address=None):
        fabric = _fabric()
        with fabric.lock:
            if fabric.reg_error:
                raise PyverbsRDMAError(fabric.reg_error)
            if fabric.memlock is not None and \
                    fabric.pinned + length > fabric.memlock:
                raise PyverbsRDMAError(
                    "Failed to register a MR. Errno: 12, Cannot allocate "
                    "memory")
            fabric.pinned += length
            fabric.peak_pinned = max(fabric.peak_pinned, fabric.pinned)
            self.pd = creator
            self.length = length
            self.access = access
            self.address = address
            self.lkey = self.rkey = fabric.key()
            self.closed = False
            creator.mrs[self.rkey] = self
            fabric.mrs.append(self)
            fabric.log.append(("reg", length, access, address))

    def covers(self, addr, length):
        return self.address <= addr and addr + length <= \
            self.address + self.length

    def close(self):
        fabric = _fabric()
        with fabric.lock:
            if not self.closed:
                self.closed = True
                fabric.pinned -= self.length
                fabric.mrs.remove(self)
                self.pd.mrs.pop(self.rkey, None)
                fabric.log.append(("close", "MR"))


# pyverbs.cq

class WC:
    __slots__ = ("wr_id", "status", "opcode", "vendor_err", "byte_len")

    def __init__(self, wr_id=0, status=0, opcode=0, vendor_err=0,
                 byte_len=0):
        self.wr_id = wr_id
        self.status = status
        self.opcode = opcode
        self.vendor_err = vendor_err
        self.byte_len = byte_len


class CQ:
    def __init__(self, context, cqe, cq_context=None, channel=None,
                 comp_vector=0):
        self.cqe = cqe
        self.done = []
        self.lock = threading.Lock()
        self.closed = False

    def poll(self, num_entries=1):
        with self.lock:
            wcs, self.done = self.done[:num_entries], self.done[num_entries:]
        return len(wcs), wcs

    def complete(self, wr_id, status):
        with self.lock:
            self.done.append(WC(wr_id=wr_id, status=status,
                                vendor_err=0 if status == 0 else 0x81))

    def close(self):
        self.closed = True


# pyverbs.qp

class QPCap:
    __slots__ = ("max_send_wr", "max_recv_wr", "max_send_sge",
                 "max_recv_sge", "max_inline_data")

    def __init__(self, max_send_wr=1, max_recv_wr=10, max_send_sge=1,
                 max_recv_sge=1, max_inline_data=0):
        self.max_send_wr = max_send_wr
        self.max_recv_wr = max_recv_wr
        self.max_send_sge = max_send_sge
        self.max_recv_sge = max_recv_sge
        self.max_inline_data = max_inline_data


class QPInitAttr:
    __slots__ = ("qp_type", "send_cq", "recv_cq", "srq", "cap",
                 "sq_sig_all")

    def __init__(self, qp_type=None, qp_context=None, scq=None, rcq=None,
                 srq=None, cap=None, sq_sig_all=1):
        self.qp_type = qp_type
        self.send_cq = scq
        self.recv_cq = rcq
        self.srq = srq
        self.cap = cap
        self.sq_sig_all = sq_sig_all


class QPAttr:
    __slots__ = ("qp_state", "cur_qp_state", "port_num", "pkey_index",
                 "qp_access_flags", "path_mtu", "dest_qp_num", "rq_psn",
                 "sq_psn", "max_dest_rd_atomic", "max_rd_atomic",
                 "min_rnr_timer", "ah_attr", "timeout", "retry_cnt",
                 "rnr_retry")

    def __init__(self, qp_state=None, cur_qp_state=None, port_num=1,
                 path_mtu=5):
        self.qp_state = qp_state
        self.cur_qp_state = cur_qp_state
        self.port_num = port_num
        self.path_mtu = path_mtu
        self.pkey_index = 0
        self.qp_access_flags = 0
        self.dest_qp_num = 0
        self.rq_psn = self.sq_psn = 0
        self.max_dest_rd_atomic = self.max_rd_atomic = 0
        self.min_rnr_timer = self.timeout = 0
        self.retry_cnt = self.rnr_retry = 0
        self.ah_attr = None


class QP:
    def __init__(self, creator, init_attr, qp_attr=None):
        fabric = _fabric()
        self.pd = creator
        self.cq = init_attr.send_cq
        self.qp_num = fabric.qpn()
        self.access = qp_attr.qp_access_flags if qp_attr else 0
        self.state = "INIT" if qp_attr is not None else "RESET"
        self.dest = None
        self.closed = False
        with fabric.lock:
            fabric.qps[self.qp_num] = self

    def to_rtr(self, qp_attr):
        self.dest = qp_attr.dest_qp_num
        self.state = "RTR"

    def to_rts(self, qp_attr):
        self.state = "RTS"

    def modify(self, qp_attr, comp_mask):
        if qp_attr.qp_state == _e().IBV_QPS_ERR:
            self.state = "ERR"

    def post_send(self, wr, bad_wr=None):
        e = _e()
        if self.closed:
            raise PyverbsRDMAError("Failed to post send")
        if self.state == "ERR":
            self.cq.complete(wr.wr_id, e.IBV_WC_WR_FLUSH_ERR)
            return
        status = self._read(wr)
        if status != e.IBV_WC_SUCCESS:
            self.state = "ERR"
        self.cq.complete(wr.wr_id, status)

    def _read(self, wr):
        e = _e()
        fabric = _fabric()
        sge = wr.sg_list[0]
        with fabric.lock:
            fabric.reads += 1
            n = fabric.reads
            peer = fabric.qps.get(self.dest)
            if peer is None or peer.closed or peer.dest != self.qp_num or \
                    self.state != "RTS" or \
                    (fabric.fail_read and fabric.fail_read(n)):
                return e.IBV_WC_RETRY_EXC_ERR
            remote = peer.pd.mrs.get(wr.rkey)
            if remote is None or not remote.covers(wr.remote_addr,
                                                   sge.length) \
                    or not remote.access & e.IBV_ACCESS_REMOTE_READ \
                    or not peer.access & e.IBV_ACCESS_REMOTE_READ:
                peer.state = "ERR"
                return e.IBV_WC_REM_ACCESS_ERR
            local = self.pd.mrs.get(sge.lkey)
            if local is None or not local.covers(sge.addr, sge.length) \
                    or not local.access & e.IBV_ACCESS_LOCAL_WRITE:
                return e.IBV_WC_LOC_PROT_ERR
            fabric.read_bytes += sge.length
        ctypes.memmove(sge.addr, wr.remote_addr, sge.length)
        if fabric.on_read is not None and sge.length:
            view = (ctypes.c_char * sge.length).from_address(sge.addr)
            fabric.on_read(n, memoryview(view).cast("B"), wr.remote_addr)
        return e.IBV_WC_SUCCESS

    def close(self):
        fabric = _fabric()
        with fabric.lock:
            self.closed = True
            fabric.qps.pop(self.qp_num, None)


# pyverbs.addr

class GID:
    __slots__ = ("gid",)

    def __init__(self, val=None):
        self.gid = val


class GlobalRoute:
    __slots__ = ("dgid", "flow_label", "sgid_index", "hop_limit",
                 "traffic_class")

    def __init__(self, dgid=None, flow_label=0, sgid_index=0, hop_limit=1,
                 traffic_class=0):
        self.dgid = dgid
        self.flow_label = flow_label
        self.sgid_index = sgid_index
        self.hop_limit = hop_limit
        self.traffic_class = traffic_class


class AHAttr:
    __slots__ = ("dlid", "sl", "src_path_bits", "static_rate", "is_global",
                 "port_num", "dgid", "sgid_index", "hop_limit",
                 "flow_label", "traffic_class")

    def __init__(self, dlid=0, sl=0, src_path_bits=0, static_rate=0,
                 is_global=0, port_num=1, gr=None):
        self.dlid = dlid
        self.sl = sl
        self.src_path_bits = src_path_bits
        self.static_rate = static_rate
        self.is_global = is_global
        self.port_num = port_num
        gr = gr or GlobalRoute()
        self.dgid = gr.dgid
        self.sgid_index = gr.sgid_index
        self.hop_limit = gr.hop_limit
        self.flow_label = gr.flow_label
        self.traffic_class = gr.traffic_class


# pyverbs.wr

class SGE:
    __slots__ = ("addr", "length", "lkey")

    def __init__(self, addr, length, lkey):
        self.addr = addr
        self.length = length
        self.lkey = lkey

    def close(self):
        pass


class SendWR:
    __slots__ = ("wr_id", "opcode", "num_sge", "imm_data", "sg_list",
                 "send_flags", "rkey", "remote_addr")

    def __init__(self, wr_id=0, opcode=None, num_sge=0, imm_data=0,
                 sg=None, send_flags=None):
        self.wr_id = wr_id
        self.opcode = opcode
        self.num_sge = num_sge
        self.imm_data = imm_data
        self.sg_list = [SGE(s.addr, s.length, s.lkey) for s in sg or ()]
        self.send_flags = send_flags
        self.rkey = self.remote_addr = None

    def set_wr_rdma(self, rkey, addr):
        self.rkey = rkey
        self.remote_addr = addr

    def close(self):
        pass


# Wiring.

MODULES = {
    "device": (Context, Device, PortAttr, DeviceAttr, get_device_list,
               port_state_to_str),
    "pd": (PD,),
    "mr": (MR,),
    "cq": (CQ, WC),
    "qp": (QP, QPCap, QPInitAttr, QPAttr),
    "addr": (GID, GlobalRoute, AHAttr),
    "wr": (SGE, SendWR),
    "pyverbs_error": (PyverbsError, PyverbsRDMAError),
}

#: Fake attributes that are not in pyverbs: the simulation's own state.
SIMULATION_ONLY = {
    "Context": {"name", "closed"},
    "PD": {"ctx", "mrs", "closed"},
    "MR": {"pd", "length", "access", "address", "closed", "covers"},
    "CQ": {"cqe", "done", "lock", "closed", "complete"},
    "QP": {"pd", "cq", "access", "state", "dest", "closed"},
    "SendWR": {"remote_addr"},
}


def v59_enums():
    """{enum class: (members)} of the fixture."""
    found = {}
    with open(FIXTURE) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                cls, member = line.split()
                found.setdefault(cls, []).append(member)
    return {cls: tuple(members) for cls, members in found.items()}


def v59_enum_module():
    """A ``pyverbs.libibverbs_enums`` as v59 builds it under Cython 3.1:
    enum classes only, no module-level names.  Classes and members are
    those of the v59 fixture, values those of the installed pyverbs.
    """
    mod = types.ModuleType("pyverbs.libibverbs_enums")
    for cls_name, members in v59_enums().items():
        real = getattr(REAL_ENUMS, cls_name)
        values = {m: int(getattr(real, m)) for m in members
                  if hasattr(real, m)}
        setattr(mod, cls_name, enum.IntFlag(cls_name, values)
                if cls_name.endswith("_flags") or cls_name.endswith("_mask")
                else enum.IntEnum(cls_name, values))
    return mod


def install(fabric, v59=False, missing=()):
    """A ``mock.patch.dict`` of sys.modules with this fake as pyverbs.

    ``missing``: submodule names that this pyverbs lacks.
    """
    global FABRIC
    FABRIC = fabric
    package = types.ModuleType("pyverbs")
    package.__path__ = []
    mods = {"pyverbs": package}
    for name, members in MODULES.items():
        mod = types.ModuleType("pyverbs." + name)
        for member in members:
            setattr(mod, member.__name__, member)
        mods["pyverbs." + name] = mod
        setattr(package, name, mod)
    if v59:
        mods["pyverbs.libibverbs_enums"] = v59_enum_module()
        mods["pyverbs.enums"] = None
    else:
        mods["pyverbs.enums"] = REAL_ENUMS
        mods["pyverbs.libibverbs_enums"] = None
    for name in ("enums", "libibverbs_enums"):
        if mods["pyverbs." + name] is not None:
            setattr(package, name, mods["pyverbs." + name])
    for name in missing:
        mods["pyverbs." + name] = None
        if hasattr(package, name):
            delattr(package, name)
    return mock.patch.dict(sys.modules, mods)
