"""Object based logging for fault tolerant transfers (FT-LADS, section IV).

The transfer source records here the objects that the sink confirmed
durable (BLOCK_SYNC); after a failure it reopens the log and sends only
the objects done() does not hold.  Mechanisms (which log file holds a
file's objects: file, transaction, universal, or none) are in
``mechanisms``, methods (how an object is stored: char, int, binary,
varint, bit8, bit64) in ``methods``, the on-disk formats in ``records``.

Every log survives SIGKILL at any instant: after reopening, done(f) holds
every object of a record() call that returned and nothing that was not
passed to record() (or implied by complete()); sync() extends this to
power loss for what was written before it.

Usage::

    log = open_log(directory, "universal", "bit64",
                   [LogFile(file_id, name, nobjects), ...])
    log.record([(file_id, index), ...])   # once per BLOCK_SYNC
    log.done(file_id)                     # Bitmap, on resume
    log.complete(file_id); log.reset(file_id); log.sync()
    log.space(); log.close(); log.destroy()
"""

from dtn_migrate.transfer.objectlog.mechanisms import destroy_log
from dtn_migrate.transfer.objectlog.mechanisms import LogFile
from dtn_migrate.transfer.objectlog.mechanisms import MECHANISMS
from dtn_migrate.transfer.objectlog.mechanisms import NullLog
from dtn_migrate.transfer.objectlog.mechanisms import ObjectLog
from dtn_migrate.transfer.objectlog.mechanisms import open_log
from dtn_migrate.transfer.objectlog.methods import METHODS
from dtn_migrate.transfer.objectlog.records import LogMismatch

__all__ = ["LogFile", "LogMismatch", "MECHANISMS", "METHODS", "NullLog",
           "ObjectLog", "destroy_log", "open_log"]
