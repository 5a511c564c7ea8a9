"""The sink side of a transfer (FT-LADS "Sink").

``server`` (``SinkServer``: the listener and its connections),
``admission`` (which connections it holds before they authenticate),
``session`` (one source's session and its partial copies), ``recv``
(data streams: objects received, checked and written), ``hash`` (the
sha512 of a file's contiguous prefix), ``sync`` (durability and the
installation of complete files), ``file`` (what the sink keeps about
incoming transfers and their files) and ``quota`` (what one peer may
hold in the staging root).
"""
