"""What one peer may hold in the sink's staging root: a quota of bytes
and of files.

A peer holds the files of its transfers: the ones the sink records for
it in this run and the ones ``held(peer)`` names (the agent's records,
across restarts).  Each transfer's share is what ``StagingRoot.usage``
finds on disk (its directory and its partial copies), plus, for names
outside the transfer's directory (``any``), the files this run
installed.  The usage is counted again at each session's first file and
grows with each file the sink then admits, so that files imported and
removed meanwhile stop counting and concurrent sessions see each other.
A file that would take the peer past either limit is refused before
anything is written, with the option that raises it.
"""

import collections
import logging
import threading

from dtn_migrate.transfer import errors

LOG = logging.getLogger(__name__)

#: A peer's limits, and the settings that raise them (for the refusal).
Limits = collections.namedtuple(
    "Limits", "max_bytes max_files bytes_option files_option")


class QuotaError(errors.TransferError):
    """A file would take its peer past its staging quota."""

    code = errors.Code.LIMIT


class StagingQuota:
    """The usage of each peer, checked against ``limits(peer)`` (a
    Limits, or None: no quota).
    """

    def __init__(self, root, limits, held=None):
        self.root = root
        self.limits = limits
        self.held = held or (lambda peer: ())
        self.lock = threading.Lock()
        self.used = {}        # peer -> [bytes, files]

    def count(self, peer, records):
        """What ``peer`` holds now, from disk: (bytes, files).
        ``records``: the sink's TransferRecords of this run.
        """
        mine = [r for r in records if r.peer == peer]
        tids = set(self.held(peer) or ()) | {r.transfer_id for r in mine}
        nbytes = nfiles = 0
        for tid in sorted(tids):
            b, f = self.root.usage(tid)
            nbytes += b
            nfiles += f
        for rec in mine:
            with rec.lock:
                outside = [name for name, info in rec.files.items()
                           if info.get("state") == "done" and
                           not name.startswith(rec.transfer_id + "/")]
            for name in outside:
                st = self.root.stat(name)
                if st is not None:
                    nbytes += st.st_size
                    nfiles += 1
        return nbytes, nfiles

    def admit(self, session, msg, part_size):
        """Charge the peer of ``session`` for file ``msg`` (a NewFile)
        whose partial copy, if any, holds ``part_size`` bytes (None: no
        copy); QuotaError if it would exceed a limit.
        """
        peer = session.peer
        limits = self.limits(peer)
        if limits is None:
            return
        with self.lock:
            if not session.quota_counted:
                self.used[peer] = list(self.count(
                    peer, session.server.record_list()))
                session.quota_counted = True
            used = self.used.setdefault(peer, [0, 0])
            nbytes = used[0] + msg.size - (part_size or 0)
            nfiles = used[1] + (1 if part_size is None else 0)
            check(limits, peer, msg.name, msg.size, used[0], nbytes, nfiles)
            used[0], used[1] = nbytes, nfiles

    def room(self, peer, name, size, files, records, already=(0, 0)):
        """QuotaError unless ``peer`` may add ``files`` files of ``size``
        bytes in all (``name``: what the refusal calls them) to what it
        holds now (counted from disk; ``records``: the sink's of this
        run), of which ``already`` (bytes, files) would be replaced.
        Nothing is charged: a preflight asks before the first byte.
        """
        limits = self.limits(peer)
        if limits is None:
            return
        with self.lock:
            held_bytes, held_files = self.count(peer, records)
        check(limits, peer, name, size, held_bytes,
              held_bytes + size - already[0],
              held_files + files - already[1])


def check(limits, peer, name, size, held, nbytes, nfiles):
    """QuotaError if ``peer`` holding ``nbytes`` bytes (``held`` before
    ``name`` of ``size`` bytes) in ``nfiles`` files exceeds ``limits``.
    """
    if nbytes > limits.max_bytes:
        raise QuotaError(
            "%s: peer %s would hold %d bytes in this DTN's staging "
            "(%d held, this file %d), more than its quota of %d "
            "bytes; raise %s, or let its finished transfers be "
            "imported and removed"
            % (name, peer, nbytes, held, size, limits.max_bytes,
               limits.bytes_option))
    if nfiles > limits.max_files:
        raise QuotaError(
            "%s: peer %s would hold %d files in this DTN's staging, "
            "more than its quota of %d files; raise %s, or let its "
            "finished transfers be imported and removed"
            % (name, peer, nfiles, limits.max_files, limits.files_option))
