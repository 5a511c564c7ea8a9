"""Fencing of the engines' commands at the agent.

With several engines (a jobboard), a migration belongs to the engine
whose claim holds its row's epoch (``db.api.migration_claim``).  Every
command an engine sends the agent about a migration's transfer carries
that epoch; the agent keeps, per transfer, the highest epoch it has
seen, durably, and refuses a command of a lower one (StaleEpoch).  An
engine that was paused or partitioned past its claim therefore cannot
start, resume, cancel or report a transfer another engine owns now, even
before it learns that it lost the claim.

A command without an epoch (one engine without a jobboard, an operator's
``dtn-migrate-manage``) is not fenced.
"""

import os
import threading
import time

from oslo_log import log as logging

from dtn_migrate.agent import ids
from dtn_migrate import exception
from dtn_migrate.transfer import durable

LOG = logging.getLogger(__name__)


def check_epoch(epoch):
    """``epoch`` as an int of at least 1 (None stays None), or
    InvalidInput.
    """
    if epoch is None:
        return None
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 1:
        raise exception.InvalidInput(
            reason="epoch %r is not a claim's epoch (an integer of at "
                   "least 1)" % (epoch,))
    return epoch


class Fences:
    """The highest claim epoch seen of each transfer, one small file per
    transfer under ``<state_dir>/fences``, written before the command it
    admits runs.
    """

    def __init__(self, state_dir, retention=None, clock=time.time):
        """``retention``: seconds a transfer's epoch is kept after its
        last command (None or 0: for ever), by ``clock``.
        """
        self.dir = os.path.join(state_dir, "fences")
        os.makedirs(self.dir, exist_ok=True)
        self.retention = retention or None
        self.clock = clock
        self.lock = threading.Lock()
        self._epochs = {}       # tid -> highest epoch seen

    def _path(self, tid):
        return os.path.join(self.dir, tid)

    def _load(self, tid):
        try:
            with open(self._path(tid)) as f:
                return int(f.read().strip())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            # Unreadable: refuse nothing on its account, say so.
            LOG.error("transfer %s: unreadable fence epoch: %s", tid, exc)
            return None

    def highest(self, transfer_id):
        """The highest epoch seen of ``transfer_id``, or None."""
        tid = ids.check_id(transfer_id)
        with self.lock:
            return self._highest(tid)

    def _highest(self, tid):
        if tid not in self._epochs:
            self._epochs[tid] = self._load(tid)
        return self._epochs[tid]

    def admit(self, transfer_id, epoch, command):
        """Admit ``command`` (its name, for the log) of claim ``epoch``
        on ``transfer_id``: StaleEpoch when a later claim's command was
        seen; a new highest epoch is written durably first.
        """
        epoch = check_epoch(epoch)
        if epoch is None:
            return
        tid = ids.check_id(transfer_id)
        with self.lock:
            highest = self._highest(tid)
            if highest is not None and epoch < highest:
                LOG.warning("transfer %s: %s of epoch %d refused: a later "
                            "claim (epoch %d) holds it", tid, command,
                            epoch, highest)
                raise exception.StaleEpoch(transfer_id=tid, epoch=epoch,
                                           held=highest, command=command)
            if highest != epoch:
                durable.write_atomic(self._path(tid), b"%d\n" % epoch)
                self._epochs[tid] = epoch
                if highest is not None:
                    LOG.info("transfer %s: claim epoch %d (was %d)", tid,
                             epoch, highest)
            elif self.retention:
                # Its age counts from the last command.
                os.utime(self._path(tid))

    def sweep(self):
        """Forget the epochs of transfers with no command for
        ``retention`` seconds.  Returns how many were forgotten.
        """
        if not self.retention:
            return 0
        cutoff = self.clock() - self.retention
        gone = 0
        with self.lock:
            for name in os.listdir(self.dir):
                path = self._path(name)
                try:
                    if os.stat(path).st_mtime >= cutoff:
                        continue
                    os.unlink(path)
                except FileNotFoundError:
                    continue
                self._epochs.pop(name, None)
                gone += 1
        return gone
