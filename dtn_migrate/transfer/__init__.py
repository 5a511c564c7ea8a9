"""The DTN transfer engine: resumable, out-of-order object transfer.

A self-contained library (no OpenStack imports) following FT-LADS:
``protocol`` (wire format), ``source``/``sink`` (the two ends),
``objectlog`` (what the sink holds durably, for resume), ``transport``
(TCP and RDMA data planes), and ``cli`` (a standalone command line).
"""
