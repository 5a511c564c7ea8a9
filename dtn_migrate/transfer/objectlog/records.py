"""On-disk formats of the object log, and the files that hold them.

All integers are little-endian; "varint" is unsigned LEB128; crc32 is
zlib's.  A *slot* is the position of a file in the dataset (0-based, the
order of the ``files`` list and of the index lines).

Append log (methods char, int, binary, varint; also the file logger's
completion journal)::

    frame := 0xB7 | body_len: varint | body | crc32(0xB7 .. body): u32
    body  := group+
    group := 0x01 (ADD)   | slot: varint | nbytes: varint | entries[nbytes]
           | 0x02 (DONE)  | slot: varint       file complete, all set
           | 0x03 (RESET) | slot: varint       forget the file

Each record() call appends one frame per log file with a single
``write`` on an ``O_APPEND`` descriptor.  Loading replays frames up to the
first one that is short, fails its checksum or does not parse, and
truncates the file there, so a torn or garbage tail is dropped and later
appends stay reachable.

Paged log (methods bit8, bit64).  The log's *logical* bytes (regions,
see ``mechanisms``) are cut into pages of ``PAGE_DATA`` = 4080 bytes (the
last one may be shorter, ``plen`` bytes).  Page ``p`` has two slots, at
file offsets ``p * 8192`` and ``p * 8192 + 16 + plen``, so a full slot is
one aligned 4 KiB block::

    slot := crc32: u32 | page: u32 | generation: u64 | data[plen]
            crc32 covers page, generation and data

A page is updated with one ``pwritev`` of the whole slot into the slot
*not* holding its newest valid copy, with generation + 1.  Loading takes,
per page, the valid slot (crc matches, page number matches, generation
> 0) of highest generation; a page with no valid slot (never written, or
its only write torn) reads as zeros.  A torn write therefore loses at
most the update it carried.  Fully written, the file is twice the
logical size plus 16 bytes per slot; never written pages are holes.

Index (``index.jsonl``): JSON lines, ASCII (``ensure_ascii``), written
once to ``index.jsonl.tmp``, fsync'ed, renamed and the directory
fsync'ed::

    {"format": "dtn-objectlog", "version": 1, "mechanism": ..,
     "method": .., "transaction_size": .., "files": N}
    one JSON array per file, in dataset order (see mechanisms)
    {"crc32": <crc32 of all bytes above>, "lines": N}
"""

import errno
import json
import os
import struct
import zlib

from dtn_migrate.transfer import durable
from dtn_migrate.transfer import errors
from dtn_migrate.transfer import varint

MAGIC = 0xB7
OP_ADD = 1
OP_DONE = 2
OP_RESET = 3

SLOT_SIZE = 4096
SLOT_HEADER = struct.Struct("<IIQ")  # crc32, page, generation
PAGE_DATA = SLOT_SIZE - SLOT_HEADER.size
_HEAD = struct.Struct("<IQ")         # the part of the header under crc32

INDEX = "index.jsonl"
INDEX_TMP = INDEX + ".tmp"
FORMAT = "dtn-objectlog"
VERSION = 1

_FILE_MODE = 0o600
_MAGIC_BYTE = bytes([MAGIC])
_CRC = struct.Struct("<I")


class LogMismatch(errors.TransferError):
    """The directory holds a log of another dataset, or an unusable one."""


# Append log frames.

_SMALL = [bytes([n]) for n in range(0x80)]
_ADD = bytes([OP_ADD])


def uvarint(value):
    """varint.encode with a fast path for values below 128."""
    if value < 0x80:
        return _SMALL[value]
    return varint.encode(value)


def add_group_parts(slot, entries):
    """The pieces of an ADD group (to be joined into a frame body)."""
    return (_ADD, uvarint(slot), uvarint(len(entries)), entries)


def op_group(op, slot):
    return bytes([op]) + varint.encode(slot)


def frame(body):
    head = _MAGIC_BYTE + uvarint(len(body))
    crc = zlib.crc32(body, zlib.crc32(head))
    return head + body + _CRC.pack(crc)


def scan(buf, lo, hi, adds, ops, check=None):
    """Replay the valid frames at the start of ``buf``.

    Return (valid, chunks, complete): the length of the valid prefix;
    per slot, the entries of its ADD groups since its last DONE or RESET
    (a list of bytes); the slots whose last DONE/RESET was a DONE.  A
    frame is valid if it is complete, its crc matches, it parses, every
    slot is in [lo, hi), ADD groups appear only if ``adds`` and
    DONE/RESET only if ``ops``, and ``check(slot, entries)`` (if given)
    does not raise ValueError for any of its ADD groups.  Replay stops at
    the first invalid frame.
    """
    chunks = {}
    complete = set()
    view = memoryview(buf)
    size = len(buf)
    crc32 = zlib.crc32
    unpack = _CRC.unpack_from
    decode = varint.decode
    pos = 0
    try:
        while pos < size:
            if buf[pos] != MAGIC:
                break
            length = buf[pos + 1]
            if length < 0x80:
                start = pos + 2
            elif buf[pos + 2] < 0x80:
                length = (length & 0x7F) | (buf[pos + 2] << 7)
                start = pos + 3
            else:
                length, start = decode(buf, pos + 1)
            stop = start + length
            end = stop + 4
            if end > size or not length:
                break
            if crc32(view[pos:stop]) != unpack(buf, stop)[0]:
                break
            # Groups are applied as they are parsed; a frame that passed
            # its crc but does not parse (only a bug writes one) makes
            # the except clause replay the prefix before it again.
            p = start
            while p < stop:
                op = buf[p]
                slot = buf[p + 1]
                if slot < 0x80:
                    p += 2
                elif buf[p + 2] < 0x80:
                    slot = (slot & 0x7F) | (buf[p + 2] << 7)
                    p += 3
                else:
                    slot, p = decode(buf, p + 1)
                if not lo <= slot < hi:
                    raise ValueError("slot out of range")
                if op == OP_ADD and adds:
                    count = buf[p]
                    if count < 0x80:
                        p += 1
                    elif buf[p + 1] < 0x80:
                        count = (count & 0x7F) | (buf[p + 1] << 7)
                        p += 2
                    else:
                        count, p = decode(buf, p)
                    q = p + count
                    if not count or q > stop:
                        raise ValueError("bad ADD length")
                    entries = buf[p:q]
                    p = q
                    if check is not None:
                        check(slot, entries)
                    parts = chunks.get(slot)
                    if parts is not None:
                        parts.append(entries)
                    elif slot not in complete:
                        chunks[slot] = [entries]
                elif op == OP_DONE and ops:
                    complete.add(slot)
                    chunks.pop(slot, None)
                elif op == OP_RESET and ops:
                    complete.discard(slot)
                    chunks.pop(slot, None)
                else:
                    raise ValueError("unexpected group type %d" % op)
            if p != stop:
                raise ValueError("group overruns its frame")
            pos = end
    except (IndexError, ValueError):
        if not pos:
            return 0, {}, set()
        return scan(buf[:pos], lo, hi, adds, ops, check)
    return pos, chunks, complete


def _read_all(path):
    """Contents of ``path``, or None if it does not exist."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


class DirState:
    """Whether directory entries changed since the directory was synced."""

    __slots__ = ("path", "dirty")

    def __init__(self, path):
        self.path = path
        self.dirty = False

    def sync(self):
        if self.dirty:
            durable.fsync_dir(self.path)
            self.dirty = False


class _LogFile:
    """A log file opened lazily for writing, created on first write."""

    def __init__(self, path, dirstate, flags):
        self.path = path
        self.dirstate = dirstate
        self.flags = flags
        self.fd = None
        self.exists = False
        self.dirty = False      # written since the last datasync()

    def _fd(self):
        if self.fd is None:
            self.fd = os.open(self.path, self.flags | os.O_CREAT
                              | os.O_CLOEXEC, _FILE_MODE)
            if not self.exists:
                self.exists = True
                self.dirstate.dirty = True
        return self.fd

    def close_fd(self):
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)

    def datasync(self):
        if not self.dirty:
            return
        if self.fd is not None:
            os.fdatasync(self.fd)
        elif self.exists:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                os.fdatasync(fd)
            finally:
                os.close(fd)
        self.dirty = False

    def remove(self):
        """Close and unlink the file (atomic: it is there or it is not)."""
        self.close_fd()
        self.dirty = False
        if self.exists:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            self.exists = False
            self.dirstate.dirty = True


class AppendFile(_LogFile):
    """An append log: checksummed frames written with one write each."""

    def __init__(self, path, dirstate):
        super().__init__(path, dirstate, os.O_WRONLY | os.O_APPEND)
        self.size = 0

    def read(self):
        """The file's bytes, or None if it does not exist."""
        buf = _read_all(self.path)
        if buf is not None:
            self.exists = True
            self.size = len(buf)
        return buf

    def keep(self, valid):
        """Truncate the file to its first ``valid`` bytes."""
        if valid < self.size:
            os.truncate(self.path, valid)
            self.size = valid

    def append(self, data):
        """Append ``data`` (one frame) with a single write."""
        fd = self._fd()
        try:
            written = os.write(fd, data)
        except OSError:
            self._undo(fd)
            raise
        if written != len(data):
            self._undo(fd)
            raise OSError(errno.ENOSPC, "short write to object log %s"
                          % self.path)
        self.size += written
        self.dirty = True

    def _undo(self, fd):
        # Drop a partly written frame so later frames stay reachable.
        try:
            os.ftruncate(fd, self.size)
        except OSError:
            pass


class PagedFile(_LogFile):
    """Logical bytes kept in two-slot checksummed pages (bitmap methods).

    ``data`` is the logical content (None until loaded or touched);
    ``gens[p]`` the generation of page ``p``'s newest valid slot and
    ``cur[p]`` that slot (-1 if the page has none).
    """

    def __init__(self, path, dirstate, size):
        super().__init__(path, dirstate, os.O_RDWR)
        self.size = size
        self.npages = (size + PAGE_DATA - 1) // PAGE_DATA
        self.data = None
        self.gens = None
        self.cur = None
        self._view = None

    def _page_len(self, page):
        return min(PAGE_DATA, self.size - page * PAGE_DATA)

    def _slot_offset(self, page, slot):
        return page * 2 * SLOT_SIZE + slot * (SLOT_HEADER.size
                                              + self._page_len(page))

    def physical_size(self):
        last = self.npages - 1
        return self._slot_offset(last, 2)

    def ensure(self):
        """The logical bytes, allocating them (all zero) if needed."""
        if self.data is None:
            self.data = bytearray(self.size)
            self._view = memoryview(self.data)
            self.gens = [0] * self.npages
            self.cur = [-1] * self.npages
        return self.data

    def load(self):
        """Read the newest valid slot of every page; return True if the
        file exists.
        """
        buf = _read_all(self.path)
        if buf is None:
            return False
        self.exists = True
        data = self.ensure()
        view = memoryview(buf)
        have = len(buf)
        hsize = SLOT_HEADER.size
        unpack = SLOT_HEADER.unpack_from
        crc32 = zlib.crc32
        for page in range(self.npages):
            plen = self._page_len(page)
            base = page * 2 * SLOT_SIZE
            if base >= have:
                break
            best = -1
            best_gen = 0
            for slot in (0, 1):
                off = base + slot * (hsize + plen)
                end = off + hsize + plen
                if end > have:
                    break
                crc, number, gen = unpack(buf, off)
                if number != page or gen <= best_gen:
                    continue
                if crc32(view[off + 4:end]) != crc:
                    continue
                best, best_gen = slot, gen
            if best >= 0:
                off = base + best * (hsize + plen) + hsize
                start = page * PAGE_DATA
                data[start:start + plen] = view[off:off + plen]
                self.gens[page] = best_gen
                self.cur[page] = best
        if have > self.physical_size():
            os.truncate(self.path, self.physical_size())
        return True

    def write_pages(self, pages):
        """Write the current content of ``pages`` (an iterable of page
        numbers), one pwritev per page into its older slot.
        """
        fd = self._fd()
        view = self._view
        gens = self.gens
        cur = self.cur
        size = self.size
        crc32 = zlib.crc32
        pack = _HEAD.pack
        for page in sorted(pages):
            start = page * PAGE_DATA
            plen = min(PAGE_DATA, size - start)
            gen = gens[page] + 1
            slot = 1 if cur[page] == 0 else 0
            head = pack(page, gen)
            payload = view[start:start + plen]
            crc = crc32(payload, crc32(head))
            written = os.pwritev(fd, [_CRC.pack(crc) + head, payload],
                                 2 * SLOT_SIZE * page
                                 + slot * (SLOT_HEADER.size + plen))
            self.dirty = True
            if written != SLOT_HEADER.size + plen:
                raise OSError(errno.ENOSPC, "short write to object log %s"
                              % self.path)
            gens[page] = gen
            cur[page] = slot

    def pages_of(self, start, length):
        """Page numbers covering logical bytes [start, start + length)."""
        return range(start // PAGE_DATA, (start + length - 1) // PAGE_DATA + 1)


# Index file.

def write_index(directory, header, rows):
    """Write the index atomically (temp file, fsync, rename, dir fsync)."""
    lines = [json.dumps(header, sort_keys=True)]
    lines.extend(json.dumps(row) for row in rows)
    body = ("\n".join(lines) + "\n").encode("ascii")
    trailer = json.dumps({"crc32": zlib.crc32(body), "lines": len(rows)})
    data = body + trailer.encode("ascii") + b"\n"
    durable.write_atomic(os.path.join(directory, INDEX), data, _FILE_MODE,
                         tmp=os.path.join(directory, INDEX_TMP))


def read_index(directory):
    """(header, rows) of the index; FileNotFoundError if there is none,
    LogMismatch if it is damaged.
    """
    with open(os.path.join(directory, INDEX), "rb") as f:
        data = f.read()
    try:
        body, sep, trailer = data.rstrip(b"\n").rpartition(b"\n")
        if not sep:
            raise ValueError("no trailer")
        body += b"\n"
        check = json.loads(trailer)
        if check.get("crc32") != zlib.crc32(body):
            raise ValueError("checksum mismatch")
        lines = body.decode("ascii").splitlines()
        if check.get("lines") != len(lines) - 1:
            raise ValueError("line count mismatch")
        header = json.loads(lines[0])
        rows = [json.loads(line) for line in lines[1:]]
    except (ValueError, AttributeError, UnicodeDecodeError) as exc:
        raise LogMismatch("damaged object log index in %s: %s"
                          % (directory, exc))
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise LogMismatch("%s does not hold an object log index" % directory)
    if header.get("version") != VERSION:
        raise LogMismatch("object log index version %r is not supported"
                          % header.get("version"))
    return header, rows
