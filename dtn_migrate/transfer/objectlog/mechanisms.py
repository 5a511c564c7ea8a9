"""Object logging mechanisms: which log file holds which file's objects.

These are the "mechanisms" of FT-LADS (Kasu et al. 2019, section IV-A).
A log lives in one directory::

    index.jsonl      the index (format in ``records``), written once
    f-<slot>.log     file logger: one log per file, created when its
                     first object is recorded, deleted on complete()
    complete.log     file logger: journal of DONE/RESET groups (append
                     format), so completion survives the deletion
    t-<k>.log        transaction logger: slots k*T .. k*T+T-1
                     (T = transaction_size), created on first write
    universal.log    universal logger: every slot, created on first write

Index lines after the header, one per file in dataset order (these are
the paper's lines; Offset/Data_Length are null for append methods, whose
records of different files are interleaved and tagged with the slot)::

    file:         [LogFile, FileName, TotalBlocks, Offset, Data_Length]
    transaction:  [LogFile, FileName, TotalBlocks, Offset, Data_Length]
    universal:    [FileName, TotalBlocks, Offset, Data_Length]

With a bitmap method each file has a region of ``Data_Length`` bytes at
logical ``Offset`` (see ``methods`` for the bit layout, ``records`` for
the paged file that holds logical bytes).  A shared (transaction or
universal) bitmap log starts with a status area, one byte per file of
the log, padded to the method's word size: 0 = in progress, 1 = complete
(done() is all set), 2 = reset under way (finished on the next load).
The file logger needs no status: completion is in the journal and a
reset deletes the file's log.

Files are stored by slot, so file_ids may differ between runs; names,
object counts and order may not (LogMismatch).  Opening a directory
without an index starts a fresh log unless it holds log files, which
raises LogMismatch (the index is written before any log file, so only
outside interference gets there; ``destroy_log`` clears it).  A damaged
index also raises LogMismatch.  A leftover ``index.jsonl.tmp`` (crash
while creating) is removed; ``f-<slot>.log`` files of completed files
(crash between the journal's DONE and the unlink) are deleted on load.

record() of an object already recorded, or of a completed file, writes
nothing.  One process at a time may have a log open (not enforced).
"""

import collections
import operator
import os
import re
import shutil
import threading

from dtn_migrate.transfer import bitmap
from dtn_migrate.transfer import durable
from dtn_migrate.transfer.objectlog import methods as methods_mod
from dtn_migrate.transfer.objectlog import records

MECHANISMS = ("none", "file", "transaction", "universal")

LogFile = collections.namedtuple("LogFile", "file_id name nobjects")

MAX_OBJECTS = (1 << 32) - 1
MAX_OPEN_FILES = 256      # file logger: descriptors kept open at a time
JOURNAL = "complete.log"
UNIVERSAL = "universal.log"
_LOG_NAME = re.compile(r"^(f-\d+|t-\d+|universal|complete)\.log$")
_FILE_LOG = re.compile(r"^f-(\d+)\.log$")

STATUS_ACTIVE = 0
STATUS_COMPLETE = 1
STATUS_RESETTING = 2

_index = operator.index


def _full(nobjects):
    return bitmap.Bitmap(nobjects, b"\xff" * ((nobjects + 7) >> 3))


class _ObjectSet:
    """Objects recorded for one file by an append method: a set while
    small, a bytearray bitmap once that is smaller (so a file of 2**32
    objects costs nothing until it has many records).
    """

    __slots__ = ("nobjects", "items", "bits")

    def __init__(self, nobjects):
        self.nobjects = nobjects
        self.items = set()
        self.bits = None

    def fresh(self, indices):
        """``indices`` not yet present, without duplicates, in order."""
        if self.bits is None:
            items = self.items
            return [i for i in dict.fromkeys(indices) if i not in items]
        bits = self.bits
        return [i for i in dict.fromkeys(indices)
                if not bits[i >> 3] & (1 << (i & 7))]

    def update(self, indices):
        bits = self.bits
        if bits is None:
            items = self.items
            if (len(items) + len(indices)) * 40 < (self.nobjects >> 3):
                items.update(indices)
                return
            bits = self.bits = bytearray((self.nobjects + 7) >> 3)
            self.items = None
            for i in items:
                bits[i >> 3] |= 1 << (i & 7)
        for i in indices:
            bits[i >> 3] |= 1 << (i & 7)

    def __bool__(self):
        return self.bits is not None or bool(self.items)

    def to_bitmap(self):
        if self.bits is not None:
            return bitmap.Bitmap(self.nobjects, self.bits)
        result = bitmap.Bitmap(self.nobjects)
        for i in self.items:
            result.add(i)
        return result


class _AppendUnit:
    """Files (slots) logged in one append log file."""

    def __init__(self, path, dirstate, method, nobjects, slots, shared):
        self.file = records.AppendFile(path, dirstate)
        self.slots = slots
        self.method = method
        self.nobjects = nobjects        # the log's list, indexed by slot
        self.shared = shared            # DONE/RESET groups live here
        self.sets = {}
        self.complete = set()

    def _check(self, slot, entries):
        indices = self.method.decode(entries)
        if min(indices) < 0 or max(indices) >= self.nobjects[slot]:
            raise ValueError("object index out of range")

    def load(self):
        buf = self.file.read()
        if buf is None:
            return
        slots = self.slots
        args = (buf, slots.start, slots.stop, True, self.shared)
        valid, chunks, complete = records.scan(*args)
        try:
            self._replay(chunks, complete)
        except ValueError:
            # A checksummed frame with bad entries (only a bug writes
            # one): find it the slow way and drop the log from there.
            valid, chunks, complete = records.scan(*args, check=self._check)
            self._replay(chunks, complete)
        self.file.keep(valid)

    def _replay(self, chunks, complete):
        """Rebuild the state from scanned entries, decoding the entries
        of each file in one go.
        """
        sets = {}
        method = self.method
        for slot, parts in chunks.items():
            entries = b"".join(parts)
            nobjects = self.nobjects[slot]
            state = sets[slot] = _ObjectSet(nobjects)
            if len(entries) // method.max_entry * 40 >= nobjects >> 3:
                # So many entries that the state will be a bitmap anyway.
                state.items = None
                state.bits = method.decode_bits(entries, nobjects)
                continue
            indices = method.decode(entries)
            if min(indices) < 0 or max(indices) >= nobjects:
                raise ValueError("object index out of range")
            state.update(indices)
        self.sets = sets
        self.complete = complete

    def record(self, batch):
        parts = []
        added = []
        encode = self.method.encode
        sets = self.sets
        for slot, indices in batch.items():
            if slot in self.complete:
                continue
            state = sets.get(slot)
            if state is not None:
                fresh = state.fresh(indices)
                if not fresh:
                    continue
            elif len(indices) == 1:
                fresh = indices
            else:
                fresh = list(dict.fromkeys(indices))
            parts.extend(records.add_group_parts(slot, encode(fresh)))
            added.append((slot, state, fresh))
        if not parts:
            return False
        self.file.append(records.frame(b"".join(parts)))
        for slot, state, fresh in added:
            if state is None:
                state = sets[slot] = _ObjectSet(self.nobjects[slot])
            state.update(fresh)
        return True

    def set_complete(self, slot):
        if slot in self.complete:
            return False
        self.file.append(records.frame(records.op_group(records.OP_DONE,
                                                        slot)))
        self.complete.add(slot)
        self.sets.pop(slot, None)
        return True

    def reset(self, slot):
        if slot not in self.complete and not self.sets.get(slot):
            return False
        self.file.append(records.frame(records.op_group(records.OP_RESET,
                                                        slot)))
        self.complete.discard(slot)
        self.sets.pop(slot, None)
        return True

    def is_complete(self, slot):
        return slot in self.complete

    def done(self, slot):
        if slot in self.complete:
            return _full(self.nobjects[slot])
        state = self.sets.get(slot)
        if state is None:
            return bitmap.Bitmap(self.nobjects[slot])
        return state.to_bitmap()


class _BitmapUnit:
    """Files (slots) logged as bitmap regions of one paged log file."""

    def __init__(self, path, dirstate, method, nobjects, slots, shared):
        self.method = method
        self.nobjects = nobjects
        self.lo = slots.start
        self.slots = slots
        self.shared = shared
        if shared:
            word = method.word
            offset = (len(slots) + word - 1) // word * word
        else:
            offset = 0
        self.offsets = {}
        self.lengths = {}
        for slot in slots:
            self.offsets[slot] = offset
            self.lengths[slot] = method.region_len(nobjects[slot])
            offset += self.lengths[slot]
        self.file = records.PagedFile(path, dirstate, offset)

    def load(self):
        if not self.file.load() or not self.shared:
            return
        data = self.file.data
        for slot in self.offsets:
            if data[slot - self.lo] == STATUS_RESETTING:
                self._finish_reset(slot)

    def record(self, batch):
        data = self.file.ensure()
        shared = self.shared
        lo = self.lo
        changed = []
        for slot, indices in batch.items():
            if shared and data[slot - lo] == STATUS_COMPLETE:
                continue
            base = self.offsets[slot]
            for i in indices:
                pos = base + (i >> 3)
                mask = 1 << (i & 7)
                byte = data[pos]
                if not byte & mask:
                    data[pos] = byte | mask
                    changed.append((pos, mask))
        if not changed:
            return False
        page_data = records.PAGE_DATA
        try:
            self.file.write_pages({pos // page_data for pos, _ in changed})
        except OSError:
            for pos, mask in changed:
                data[pos] &= ~mask
            raise
        return True

    def _write_status(self, slot, status):
        data = self.file.ensure()
        k = slot - self.lo
        old = data[k]
        data[k] = status
        try:
            self.file.write_pages((k // records.PAGE_DATA,))
        except OSError:
            data[k] = old
            raise

    def set_complete(self, slot):
        data = self.file.ensure()
        if data[slot - self.lo] == STATUS_COMPLETE:
            return False
        self._write_status(slot, STATUS_COMPLETE)
        return True

    def reset(self, slot):
        data = self.file.data
        if data is None:
            return False
        start = self.offsets[slot]
        length = self.lengths[slot]
        if (data[slot - self.lo] == STATUS_ACTIVE
                and data.count(0, start, start + length) == length):
            return False
        # Persist "resetting" first: a crash while the region is being
        # cleared page by page then finishes the reset on the next load.
        self._write_status(slot, STATUS_RESETTING)
        self._finish_reset(slot)
        return True

    def _finish_reset(self, slot):
        data = self.file.data
        start = self.offsets[slot]
        length = self.lengths[slot]
        data[start:start + length] = bytes(length)
        self.file.write_pages(self.file.pages_of(start, length))
        self._write_status(slot, STATUS_ACTIVE)

    def is_complete(self, slot):
        data = self.file.data
        return (self.shared and data is not None
                and data[slot - self.lo] == STATUS_COMPLETE)

    def done(self, slot):
        nobjects = self.nobjects[slot]
        data = self.file.data
        if data is None:
            return bitmap.Bitmap(nobjects)
        if self.shared and data[slot - self.lo] == STATUS_COMPLETE:
            return _full(nobjects)
        start = self.offsets[slot]
        return bitmap.Bitmap(nobjects, data[start:start + ((nobjects + 7)
                                                           >> 3)])


class NullLog:
    """mechanism 'none': fault tolerance off, nothing is recorded."""

    mechanism = "none"

    def __init__(self, files):
        self._nobjects = {f.file_id: f.nobjects for f in files}

    def done(self, file_id):
        return bitmap.Bitmap(self._nobjects[file_id])

    def record(self, items):
        pass

    def complete(self, file_id):
        pass

    def is_complete(self, file_id):
        return False

    def reset(self, file_id):
        pass

    def sync(self):
        pass

    def space(self):
        return 0

    def close(self):
        pass

    def destroy(self):
        pass


class ObjectLog:
    """Common part of the file, transaction and universal loggers.

    Public methods are serialized by an internal lock.  Files are
    addressed by ``file_id`` and stored by *slot* (dataset position).
    """

    def __init__(self, directory, mechanism, method, files,
                 transaction_size):
        self.directory = directory
        self.mechanism = mechanism
        self.method = methods_mod.get(method)
        self.transaction_size = transaction_size
        self.files = list(files)
        self._slots = {f.file_id: n for n, f in enumerate(self.files)}
        self._nobjects = [f.nobjects for f in self.files]
        self._lock = threading.Lock()
        self._dirstate = records.DirState(directory)
        self._dirty = set()
        self._open_files = collections.OrderedDict()
        self._closed = False

    # Opening.

    def _index(self):
        header = {"format": records.FORMAT, "version": records.VERSION,
                  "mechanism": self.mechanism, "method": self.method.name,
                  "transaction_size": None, "files": len(self.files)}
        return header, [self._index_row(n) for n in range(len(self.files))]

    def _index_row(self, slot):
        raise NotImplementedError

    def _region(self, slot):
        """(Offset, Data_Length) of ``slot`` in its log (None for append
        methods).
        """
        if not self.method.bitmap:
            return None, None
        unit = self._unit_for(slot)
        return unit.offsets[slot], unit.lengths[slot]

    def _open(self):
        directory = self.directory
        if not os.path.isdir(directory):
            os.makedirs(directory, exist_ok=True)
            durable.fsync_dir(os.path.dirname(os.path.abspath(directory)))
        try:
            os.unlink(os.path.join(directory, records.INDEX_TMP))
        except FileNotFoundError:
            pass
        header, rows = self._index()
        try:
            stored_header, stored_rows = records.read_index(directory)
        except FileNotFoundError:
            strays = [name for name in os.listdir(directory)
                      if _LOG_NAME.match(name)]
            if strays:
                raise records.LogMismatch(
                    "object log %s has log files but no index: %s"
                    % (directory, ", ".join(sorted(strays)[:5])))
            records.write_index(directory, header, rows)
        else:
            self._compare(header, rows, stored_header, stored_rows)
        self._load()

    def _compare(self, header, rows, stored_header, stored_rows):
        for key in ("mechanism", "method", "transaction_size", "files"):
            if stored_header.get(key) != header[key]:
                raise records.LogMismatch(
                    "object log %s has %s %r, expected %r"
                    % (self.directory, key, stored_header.get(key),
                       header[key]))
        if len(stored_rows) != len(rows):
            raise records.LogMismatch("object log %s indexes %d files, "
                                      "expected %d" % (self.directory,
                                                       len(stored_rows),
                                                       len(rows)))
        for n, (stored, row) in enumerate(zip(stored_rows, rows)):
            if stored != row:
                raise records.LogMismatch(
                    "object log %s file %d is %r, expected %r"
                    % (self.directory, n, stored, row))

    def _load(self):
        raise NotImplementedError

    # Helpers.

    def _slot(self, file_id):
        try:
            return self._slots[file_id]
        except KeyError:
            raise KeyError("file %r is not in the object log" % (file_id,))

    def _check_open(self):
        if self._closed:
            raise ValueError("object log %s is closed" % self.directory)

    def _unit_for(self, slot):
        raise NotImplementedError

    def _touch(self, logfile):
        """``logfile`` was written: remember to sync it, and keep at most
        MAX_OPEN_FILES descriptors open.
        """
        self._dirty.add(logfile)
        open_files = self._open_files
        open_files[logfile] = None
        open_files.move_to_end(logfile)
        if len(open_files) > MAX_OPEN_FILES:
            old, _ = open_files.popitem(last=False)
            old.close_fd()

    def _forget(self, logfile):
        """``logfile`` was removed."""
        self._dirty.discard(logfile)
        self._open_files.pop(logfile, None)

    # API.

    def record(self, items):
        """Log ``items`` ((file_id, index) pairs) as durable at the sink.

        The whole batch is validated before anything is written; then at
        most one frame (append methods) or one write per changed page
        (bitmap methods) goes to each log file touched.
        """
        slots = self._slots
        nobjects = self._nobjects
        batch = {}
        for file_id, index in items:
            slot = slots.get(file_id)
            if slot is None:
                slot = self._slot(file_id)
            index = _index(index)
            if not 0 <= index < nobjects[slot]:
                raise IndexError("object %d outside file %r of %d objects"
                                 % (index, file_id, nobjects[slot]))
            indices = batch.get(slot)
            if indices is None:
                batch[slot] = [index]
            else:
                indices.append(index)
        with self._lock:
            self._check_open()
            if batch:
                self._record(batch)

    def done(self, file_id):
        """A copy of the objects recorded as durable for ``file_id``."""
        slot = self._slot(file_id)
        with self._lock:
            self._check_open()
            return self._done(slot)

    def complete(self, file_id):
        """``file_id`` is finished and verified: done() is all set."""
        slot = self._slot(file_id)
        with self._lock:
            self._check_open()
            self._complete(slot)

    def is_complete(self, file_id):
        slot = self._slot(file_id)
        with self._lock:
            self._check_open()
            return self._is_complete(slot)

    def reset(self, file_id):
        """Forget every object of ``file_id`` (and its completion)."""
        slot = self._slot(file_id)
        with self._lock:
            self._check_open()
            self._reset(slot)

    def sync(self):
        """fdatasync every log file written since the last sync, and the
        directory if files were created or deleted.
        """
        with self._lock:
            self._check_open()
            for logfile in list(self._dirty):
                logfile.datasync()
                self._dirty.discard(logfile)
            self._dirstate.sync()

    def space(self):
        """Bytes (apparent file sizes) of all files in the log directory:
        index, logs and, for bitmap methods, the slot headers and the
        second slot of every page.
        """
        with self._lock:
            total = 0
            try:
                entries = list(os.scandir(self.directory))
            except FileNotFoundError:
                return 0
            for entry in entries:
                try:
                    if entry.is_file(follow_symlinks=False):
                        total += entry.stat(follow_symlinks=False).st_size
                except FileNotFoundError:
                    pass
            return total

    def close(self):
        with self._lock:
            if not self._closed:
                self._closed = True
                for logfile in self._logfiles():
                    logfile.close_fd()

    def destroy(self):
        """Close the log and remove its directory."""
        self.close()
        with self._lock:
            shutil.rmtree(self.directory, ignore_errors=True)
            parent = os.path.dirname(os.path.abspath(self.directory))
            try:
                durable.fsync_dir(parent)
            except OSError:
                pass

    def _logfiles(self):
        raise NotImplementedError


class FileLogger(ObjectLog):
    """One log file per transferred file (the paper's File Logger)."""

    def __init__(self, *args):
        super().__init__(*args)
        self._units = {}
        self._complete_slots = set()
        self._journal = records.AppendFile(
            os.path.join(self.directory, JOURNAL), self._dirstate)

    def _path(self, slot):
        return os.path.join(self.directory, "f-%d.log" % slot)

    def _index_row(self, slot):
        f = self.files[slot]
        if self.method.bitmap:
            offset, length = 0, self.method.region_len(f.nobjects)
        else:
            offset = length = None
        return ["f-%d.log" % slot, f.name, f.nobjects, offset, length]

    def _unit_for(self, slot):
        unit = self._units.get(slot)
        if unit is not None:
            return unit
        if self.method.bitmap:
            return _BitmapUnit(self._path(slot), self._dirstate, self.method,
                               self._nobjects, range(slot, slot + 1), False)
        return _AppendUnit(self._path(slot), self._dirstate, self.method,
                           self._nobjects, range(slot, slot + 1), False)

    def _load(self):
        buf = self._journal.read()
        if buf is not None:
            valid, _, complete = records.scan(buf, 0, len(self.files),
                                              False, True)
            self._complete_slots = complete
            self._journal.keep(valid)
        nslots = len(self.files)
        for name in os.listdir(self.directory):
            match = _FILE_LOG.match(name)
            if not match:
                continue
            slot = int(match.group(1))
            if slot >= nslots or name != "f-%d.log" % slot:
                continue
            unit = self._unit_for(slot)
            if slot in self._complete_slots:
                # Killed between the journal's DONE and the unlink.
                unit.file.exists = True
                unit.file.remove()
                continue
            unit.load()
            self._units[slot] = unit

    def _record(self, batch):
        complete = self._complete_slots
        units = self._units
        for slot, indices in batch.items():
            if slot in complete:
                continue
            unit = units.get(slot)
            if unit is None:
                unit = units[slot] = self._unit_for(slot)
            if unit.record({slot: indices}):
                self._touch(unit.file)

    def _drop_unit(self, slot):
        unit = self._units.pop(slot, None)
        if unit is not None:
            self._forget(unit.file)
            unit.file.remove()

    def _complete(self, slot):
        if slot in self._complete_slots:
            return
        self._journal.append(records.frame(
            records.op_group(records.OP_DONE, slot)))
        self._touch(self._journal)
        self._complete_slots.add(slot)
        self._drop_unit(slot)

    def _reset(self, slot):
        if slot in self._complete_slots:
            self._journal.append(records.frame(
                records.op_group(records.OP_RESET, slot)))
            self._touch(self._journal)
            self._complete_slots.discard(slot)
        self._drop_unit(slot)

    def _is_complete(self, slot):
        return slot in self._complete_slots

    def _done(self, slot):
        if slot in self._complete_slots:
            return _full(self._nobjects[slot])
        unit = self._units.get(slot)
        if unit is None:
            return bitmap.Bitmap(self._nobjects[slot])
        return unit.done(slot)

    def _logfiles(self):
        yield self._journal
        for unit in self._units.values():
            yield unit.file


class SharedLogger(ObjectLog):
    """Transaction logger (one log per ``transaction_size`` consecutive
    files) or universal logger (one log for the dataset).
    """

    def __init__(self, *args):
        super().__init__(*args)
        nslots = len(self.files)
        if self.mechanism == "universal":
            self._per_unit = max(nslots, 1)
        else:
            self._per_unit = self.transaction_size
        self._units = []
        for k in range((nslots + self._per_unit - 1) // self._per_unit):
            lo = k * self._per_unit
            slots = range(lo, min(lo + self._per_unit, nslots))
            path = os.path.join(self.directory, self._log_name(k))
            if self.method.bitmap:
                unit = _BitmapUnit(path, self._dirstate, self.method,
                                   self._nobjects, slots, True)
            else:
                unit = _AppendUnit(path, self._dirstate, self.method,
                                   self._nobjects, slots, True)
            self._units.append(unit)

    def _log_name(self, k):
        if self.mechanism == "universal":
            return UNIVERSAL
        return "t-%d.log" % k

    def _index(self):
        header, rows = super()._index()
        if self.mechanism == "transaction":
            header["transaction_size"] = self.transaction_size
        return header, rows

    def _index_row(self, slot):
        f = self.files[slot]
        offset, length = self._region(slot)
        if self.mechanism == "universal":
            return [f.name, f.nobjects, offset, length]
        return [self._log_name(slot // self._per_unit), f.name, f.nobjects,
                offset, length]

    def _unit_for(self, slot):
        return self._units[slot // self._per_unit]

    def _load(self):
        for unit in self._units:
            unit.load()

    def _record(self, batch):
        if len(self._units) == 1:
            unit = self._units[0]
            if unit.record(batch):
                self._touch(unit.file)
            return
        per_unit = self._per_unit
        split = {}
        for slot, indices in batch.items():
            split.setdefault(slot // per_unit, {})[slot] = indices
        for k, part in split.items():
            unit = self._units[k]
            if unit.record(part):
                self._touch(unit.file)

    def _complete(self, slot):
        unit = self._unit_for(slot)
        if unit.set_complete(slot):
            self._touch(unit.file)

    def _reset(self, slot):
        unit = self._unit_for(slot)
        if unit.reset(slot):
            self._touch(unit.file)

    def _is_complete(self, slot):
        return self._unit_for(slot).is_complete(slot)

    def _done(self, slot):
        return self._unit_for(slot).done(slot)

    def _logfiles(self):
        for unit in self._units:
            yield unit.file


def _check_files(files):
    files = [f if isinstance(f, LogFile) else LogFile(*f) for f in files]
    seen = set()
    for f in files:
        if _index(f.file_id) < 0 or f.file_id in seen:
            raise ValueError("file_id %r is negative or not unique"
                             % (f.file_id,))
        seen.add(f.file_id)
        if not 1 <= _index(f.nobjects) <= MAX_OBJECTS:
            raise ValueError("file %r has %r objects (1 .. 2**32-1 allowed)"
                             % (f.name, f.nobjects))
        if not isinstance(f.name, str):
            raise ValueError("file name %r is not a string" % (f.name,))
    return files


def open_log(directory, mechanism, method, files, transaction_size=4):
    """Open (resume) or create the object log in ``directory``.

    ``files`` lists the dataset's LogFile tuples in dataset order.  Raise
    LogMismatch if the directory holds a log of another dataset or
    configuration, ValueError for bad arguments.
    """
    if mechanism not in MECHANISMS:
        raise ValueError("unknown object log mechanism %r (expected one of "
                         "%s)" % (mechanism, ", ".join(MECHANISMS)))
    methods_mod.get(method)
    files = _check_files(files)
    if mechanism == "none":
        return NullLog(files)
    if mechanism == "transaction" and _index(transaction_size) < 1:
        raise ValueError("transaction_size must be at least 1")
    cls = FileLogger if mechanism == "file" else SharedLogger
    log = cls(directory, mechanism, method, files, transaction_size)
    log._open()
    return log


def destroy_log(directory):
    """Remove a log directory without opening it (e.g. after LogMismatch).
    """
    shutil.rmtree(directory, ignore_errors=True)
