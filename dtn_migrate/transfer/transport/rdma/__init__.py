"""RDMA data plane: the sink pulls objects with RDMA READ (FT-LADS III-A).

The source reads an object into a buffer of its registered pool and sends
a NEW_BLOCK naming the buffer (``addr``, ``rkey``) on the data connection.
The sink reads the bytes straight from the source's memory with RDMA READ
over the data stream's reliable-connected (RC) queue pair, into a buffer
of its own registered pool, then answers BLOCK_PULLED so that the source
can reuse its buffer.

Each data stream has one RC queue pair (and its own completion queue) on
each side.  Queue pair endpoints travel as opaque bytes in the ``rdma``
field of the data connection's CONNECT / CONNECT_ACK; ``Endpoint`` is
their versioned encoding.

pyverbs is imported lazily (``verbs.load``, across rdma-core releases):
importing this package never needs it, and ``probe`` tells, without
raising, why RDMA cannot be used here.  Each source session has its own
protection domain and registered pool, freed when its plane closes.
See doc/source/rdma.rst for the design.

Modules: ``probing`` (``probe``), ``device`` (``RdmaDevice``), ``memory``
(registered pools), ``endpoint`` (the wire encoding), ``queuepair`` (one
RC queue pair: connect, READ), ``planes`` (the source and sink planes),
``resources`` (the errors, closing pyverbs objects).
"""

from dtn_migrate.transfer.transport.rdma.device import RdmaDevice
from dtn_migrate.transfer.transport.rdma.endpoint import Endpoint
from dtn_migrate.transfer.transport.rdma.endpoint import ENDPOINT_SIZE
from dtn_migrate.transfer.transport.rdma.endpoint import LINK_ETHERNET
from dtn_migrate.transfer.transport.rdma.endpoint import LINK_INFINIBAND
from dtn_migrate.transfer.transport.rdma.memory import allocate_block
from dtn_migrate.transfer.transport.rdma.memory import PAGE_SIZE
from dtn_migrate.transfer.transport.rdma.memory import Region
from dtn_migrate.transfer.transport.rdma.memory import RegionPool
from dtn_migrate.transfer.transport.rdma.memory import stride_for
from dtn_migrate.transfer.transport.rdma.planes import RdmaSinkPlane
from dtn_migrate.transfer.transport.rdma.planes import RdmaSourcePlane
from dtn_migrate.transfer.transport.rdma.probing import probe
from dtn_migrate.transfer.transport.rdma.resources import RdmaError
from dtn_migrate.transfer.transport.rdma.resources import RdmaExhausted

__all__ = ["ENDPOINT_SIZE", "Endpoint", "LINK_ETHERNET", "LINK_INFINIBAND",
           "PAGE_SIZE", "RdmaDevice", "RdmaError", "RdmaExhausted",
           "RdmaSinkPlane", "RdmaSourcePlane", "Region", "RegionPool",
           "allocate_block", "probe", "stride_for"]
