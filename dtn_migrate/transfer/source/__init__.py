"""The source side of a transfer (FT-LADS "Source").

``transfer`` (``SourceTransfer``: a dataset to one sink, attempt after
attempt), ``attempt`` (one attempt: its connections, the scheduler and
the sink's control messages), ``data`` (readers and senders), ``hash``
(the file's sha512 fed from the objects read), ``flow`` (the window and
the rate limit) and ``file`` (per-file state, how to reach a sink, and
the exceptions that end attempts).
"""
