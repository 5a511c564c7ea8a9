"""Committed watermarks of staged files.

The local copy publishes how many leading bytes of a staged file are
durable.  Two kinds of readers follow it: the transfer engine, sending a
growing file, and the local copy itself, resuming after a failure.  The
side file ``<name>.watermark`` (``[staging] watermark_suffix``) next to
the staged file holds the value in the transfer engine's format (see
:func:`dtn_migrate.transfer.dataset.read_watermark_file`)::

    <decimal committed bytes>[ failed]\\n

and is replaced atomically (:meth:`Backend.write_small`).  In-process
followers use a :class:`Watermark` instead.

A *follower* is what the remote copy polls while the file it reads is
still growing: a callable returning ``(available_bytes, state)``, or
``(available_bytes, state, name)`` when the file changes its name (the
sink's partial copy is renamed when complete).  States: ``None`` or
``"open"`` while growing, ``"done"`` once complete, ``"failed"`` or
``"mismatch"`` when the writer gave up.  ``"done"`` from the sink
(:func:`sink_follower`) means more than complete: the sink checked the
file's sha512 against the source's and installed it durably, so a
reader that does not hash the file itself can hold back its last block
until then (``open_staged(..., until_done=True)``).

A follower may also have ``wait(seconds)``: block until its value may
have changed (True) or ``seconds`` passed (False).  The remote copy then
waits on it between polls instead of sleeping, so a value that is
pushed to the reader (the sink agent's events) is seen at once.
"""

import posixpath
import threading

from dtn_migrate.staging import backend as base
from dtn_migrate.transfer import dataset

SUFFIX = ".watermark"

OPEN = "open"
DONE = "done"
FAILED = "failed"

MISMATCH = "mismatch"

#: Follower states meaning the writer gave up.
FAILED_STATES = frozenset((FAILED, MISMATCH))


def side_file(name, suffix=SUFFIX):
    """Name of the watermark side file of staged file ``name``."""
    return name + suffix


# The side file's format is the transfer engine's.
format_watermark = dataset.format_watermark
parse_watermark = dataset.parse_watermark


def read(backend, name, suffix=SUFFIX):
    """(committed, failed) of staged file ``name``, or None without a
    side file.
    """
    data = backend.read_small(side_file(name, suffix))
    return None if data is None else parse_watermark(data)


def publish(backend, name, committed, failed=False, suffix=SUFFIX):
    """Atomically replace the side file of ``name``."""
    backend.write_small(side_file(name, suffix),
                        format_watermark(committed, failed))


def publish_in_place(backend, name, committed, failed=False, suffix=SUFFIX):
    """Overwrite the existing side file of ``name`` in place, padded with
    spaces to its old length.  This needs no new space on the export, so
    a copy that failed because the export is full can still say so; it
    is not atomic, which readers tolerate (they parse whitespace-separated
    tokens).
    """
    path = side_file(name, suffix)
    old = backend.size(path)
    if old is None:
        raise base.StagingNotFound("%s has no watermark to update" % name)
    data = format_watermark(committed, failed)
    if len(data) < old:
        data = data[:-1] + b" " * (old - len(data)) + b"\n"
    with backend.open_write(path) as w:
        w.pwrite(data, 0)
        w.commit()


class Watermark:
    """A committed watermark shared in one process.

    Give :meth:`publish` to the local copy as its observer,
    :meth:`provider` to the transfer engine (``watermarks={name: ...}``)
    and :meth:`follow` to a remote copy.
    """

    def __init__(self, size=None):
        self.size = size
        self.committed = 0
        self.failed = False
        self._lock = threading.Lock()

    def publish(self, committed, failed=False):
        with self._lock:
            self.committed = committed
            self.failed = failed

    def provider(self):
        """Committed bytes; raises GrowingFileFailed once failed."""
        with self._lock:
            if self.failed:
                raise dataset.GrowingFileFailed(
                    "the local copy reported failure at %d bytes"
                    % self.committed)
            return self.committed

    def follow(self):
        """(available, state) for a remote copy."""
        with self._lock:
            if self.failed:
                return self.committed, FAILED
            done = self.size is not None and self.committed >= self.size
            return self.committed, DONE if done else OPEN


def side_file_follower(backend, name, suffix=SUFFIX):
    """Follower of the side file of ``name`` on ``backend``."""
    def follow():
        mark = read(backend, name, suffix)
        if mark is None:
            return 0, None
        return mark[0], FAILED if mark[1] else OPEN
    return follow


class _Waiting:
    """A follower function with a ``wait``."""

    def __init__(self, follow, wait):
        self._follow = follow
        self.wait = wait

    def __call__(self):
        return self._follow()


def sink_follower(get_info, root=None, wait=None):
    """Follower over the sink's view of an incoming file.

    ``get_info()`` returns what ``SinkServer.watermark`` or the agent's
    ``get_watermark`` RPC return: None or a mapping with ``durable``,
    ``state`` and ``path``.  With ``root`` (where the backend's names
    start on the sink), the follower also gives the file's current name:
    the partial copy while it grows, the final name once complete.
    ``wait`` becomes the follower's ``wait`` (see above).
    """
    def follow():
        info = get_info()
        if not info:
            return 0, None, None
        path = info.get("path")
        name = None
        if root and path:
            name = posixpath.relpath(path, root)
            if name.startswith(".."):
                name = None
        return info.get("durable") or 0, info.get("state"), name
    return follow if wait is None else _Waiting(follow, wait)
