"""The DTN transfer engine: resumable, out-of-order object transfer.

A self-contained library (no OpenStack imports) following FT-LADS:
``source/`` and ``sink/`` (the two ends), ``wire/`` (what they say to
each other: frames, authentication, the handshake), ``objectlog/`` (what
the sink holds durably, for resume), ``transport/`` (framed connections,
TCP and RDMA data planes), ``report`` and ``request`` (the connections
that are not transfers), and ``cli`` (a standalone command line).  The
modules at the top are shared by both ends: datasets, confined paths,
buffers, checksums, zero extents, compression, durable files, progress.
"""
