"""Crash safety: torn tails, torn page slots, crashes at every syscall.

A process killed with SIGKILL leaves the page cache as it was after its
last completed system call (plus, at worst, part of the write it was in).
The tests here reproduce such states deterministically: by cutting or
corrupting log files, and by stopping an operation at each of its
mutating system calls, optionally after writing only part of the data,
then opening the directory again as a restarted process would.
"""

import os
import random
import shutil


from dtn_migrate.transfer import objectlog
from dtn_migrate.transfer.objectlog import records
from tests.unit.transfer.objectlog import base
from tests.unit import testcase

FILES = base.FILES


class Crash(BaseException):
    """Stands for SIGKILL: no except/finally clause of the log runs it."""


class CrashAt:
    """Patch the mutating os calls; raise Crash at call number ``at``.

    With ``tear`` (a fraction), the write at the crash point first writes
    that part of its data.  With ``at=None`` only count the calls.
    """

    CALLS = ("write", "pwritev", "unlink", "rename", "truncate",
             "ftruncate", "open")

    def __init__(self, at=None, tear=None):
        self.at = at
        self.tear = tear
        self.calls = 0
        self.saved = {}

    def __enter__(self):
        for name in self.CALLS:
            real = getattr(os, name)
            self.saved[name] = real
            setattr(os, name, self._wrap(name, real))
        return self

    def __exit__(self, *exc):
        for name, real in self.saved.items():
            setattr(os, name, real)
        return False

    def _wrap(self, name, real):
        def call(*args, **kwargs):
            if name == "open":
                flags = args[1] if len(args) > 1 else kwargs.get("flags", 0)
                if not flags & os.O_CREAT:
                    return real(*args, **kwargs)
            n = self.calls
            self.calls += 1
            if n != self.at:
                return real(*args, **kwargs)
            if self.tear is not None and name in ("write", "pwritev"):
                if name == "write":
                    fd, data = args
                    offset = None
                else:
                    fd, buffers, offset = args
                    data = b"".join(bytes(b) for b in buffers)
                part = bytes(data)[:int(len(data) * self.tear)]
                if part:
                    if offset is None:
                        self.saved["write"](fd, part)
                    else:
                        os.pwrite(fd, part, offset)
            raise Crash()
        return call


class CrashTests:
    """Every operation, crashed at every mutating system call."""

    def snapshot(self):
        snap = os.path.join(self.tmp, "snap")
        shutil.rmtree(snap, ignore_errors=True)
        shutil.copytree(self.dir, snap)
        return snap

    def restore(self, snap):
        shutil.rmtree(self.dir)
        shutil.copytree(snap, self.dir)

    def prepare(self):
        log = self.open()
        log.record([(12, 1), (12, 4999), (13, 5), (13, 69999), (11, 3)])
        log.record([(13, 40000), (21, 7), (30, 64)])
        log.complete(20)
        return log

    def crash_each_call(self, op, allowed):
        """Run ``op(log)`` crashing at each call (whole and torn writes);
        after each crash the reopened state must be one of ``allowed``
        (a function of the state before the operation).
        """
        self.prepare().close()
        snap = self.snapshot()
        log = self.open()
        before = base.state(log)
        with CrashAt() as counter:
            op(log)
        after = base.state(log)
        log.close()
        self.assertGreater(counter.calls, 0)
        outcomes = set()
        for at in range(counter.calls):
            for tear in (None, 0.0, 0.3, 0.999):
                self.restore(snap)
                log = self.open()
                with CrashAt(at, tear):
                    self.assertRaises(Crash, op, log)
                log.close()
                log = self.open()
                got = base.state(log)
                self.assertTrue(allowed(before, after, got),
                                "crash at call %d tear %s: %r" % (at, tear,
                                                                  got))
                outcomes.add(got == after)
                # The log keeps working after the crash.
                log.record([(21, 1)])
                log = self.reopen(log)
                self.assertIn(1, log.done(21))
                log.close()
        return outcomes

    @staticmethod
    def _between(before, after, got):
        for file_id, (done, complete) in got.items():
            low, low_complete = before[file_id]
            high, _ = after[file_id]
            if complete != low_complete or not low <= done <= high:
                return False
        return True

    @staticmethod
    def _atomic(before, after, got):
        return got in (before, after)

    def test_crash_in_record(self):
        batch = [(12, 2), (12, 4000), (13, 0), (13, 33000), (13, 69998),
                 (10, 0), (11, 36), (21, 63), (30, 0), (20, 1)]
        self.crash_each_call(lambda log: log.record(batch), self._between)

    def test_crash_in_complete(self):
        self.crash_each_call(lambda log: log.complete(13), self._atomic)

    def test_crash_in_reset(self):
        self.crash_each_call(lambda log: log.reset(13), self._atomic)

    def test_crash_in_reset_of_complete_file(self):
        self.crash_each_call(lambda log: log.reset(20), self._atomic)

    def test_crash_in_first_record(self):
        def op(log):
            log.record([(f.file_id, f.nobjects - 1) for f in FILES])

        log = self.open()
        log.close()
        snap = self.snapshot()
        log = self.open()
        with CrashAt() as counter:
            op(log)
        log.close()
        self.assertGreater(counter.calls, 0)
        for at in range(counter.calls):
            self.restore(snap)
            log = self.open()
            with CrashAt(at, 0.5):
                self.assertRaises(Crash, op, log)
            log.close()
            got = base.state(self.open())
            for f in FILES:
                self.assertLessEqual(got[f.file_id][0], {f.nobjects - 1})

    def test_crash_while_creating(self):
        with CrashAt() as counter:
            self.open().close()
        shutil.rmtree(self.dir)
        for at in range(counter.calls):
            for tear in (None, 0.5):
                shutil.rmtree(self.dir, ignore_errors=True)
                with CrashAt(at, tear):
                    self.assertRaises(Crash, self.open)
                log = self.open()
                self.assertEqual(base.empty_state(), base.state(log))
                log.record([(12, 3)])
                log = self.reopen(log)
                self.assertEqual({3}, set(log.done(12).present()))
                log.close()


for _mechanism in base.LOGGERS:
    for _method in base.APPEND_METHODS + base.BITMAP_METHODS:
        _name = "TestCrash%s%s" % (_mechanism.capitalize(),
                                   _method.capitalize())
        globals()[_name] = type(_name, (CrashTests, base.LogTestCase), {
            "mechanism": _mechanism, "method": _method,
            "__doc__": "Crash safety, %s x %s." % (_mechanism, _method)})


class TestTornTail(base.LogTestCase):
    """Append methods: cut the last frame at every byte."""

    def check_cuts(self, mechanism, method, last):
        self.dir = os.path.join(self.tmp, mechanism + method)
        log = self.open(mechanism=mechanism, method=method)
        rng = random.Random(11)
        for _ in range(20):
            log.record([(f.file_id, rng.randrange(f.nobjects))
                        for f in rng.sample(FILES, 3)])
        log.complete(21)
        before = base.state(log)
        target = base.append_file(log, last[0][0])
        start = os.path.getsize(target.path)
        log.record(last)
        end = os.path.getsize(target.path)
        self.assertGreater(end, start)
        log.close()
        snap = os.path.join(self.tmp, "snap")
        shutil.rmtree(snap, ignore_errors=True)
        shutil.copytree(self.dir, snap)
        name = os.path.basename(target.path)
        for cut in range(start, end):
            shutil.rmtree(self.dir)
            shutil.copytree(snap, self.dir)
            os.truncate(self.path(name), cut)
            log = self.open(mechanism=mechanism, method=method)
            self.assertEqual(before, base.state(log), (method, cut))
            self.assertEqual(start, os.path.getsize(self.path(name)))
            log.record([(12, 4321)])
            log = self.reopen(log, mechanism=mechanism, method=method)
            self.assertIn(4321, log.done(12))
            log.close()
        return end - start

    def test_every_byte_of_last_frame(self):
        last = [(13, 69999), (13, 12), (13, 300), (13, 70000 - 2 ** 7)]
        for mechanism in base.LOGGERS:
            for method in base.APPEND_METHODS:
                self.check_cuts(mechanism, method, last)

    def test_every_byte_of_multi_file_frame(self):
        # Files of one transaction (slots 0-3), so one log holds them.
        last = [(12, 7), (13, 69999), (11, 36), (10, 0)]
        for mechanism in ("universal", "transaction"):
            for method in base.APPEND_METHODS:
                self.check_cuts(mechanism, method, last)

    def test_every_byte_of_journal_frame(self):
        log = self.open(mechanism="file", method="char")
        log.record([(12, 1)])
        log.complete(13)
        before = base.state(log)
        journal = self.path("complete.log")
        start = os.path.getsize(journal)
        log.complete(12)
        end = os.path.getsize(journal)
        log.close()
        with open(journal, "rb") as f:
            data = f.read()
        for cut in range(start, end):
            with open(journal, "wb") as f:
                f.write(data[:cut])
            log = self.open(mechanism="file", method="char")
            got = base.state(log)
            # The DONE was torn: 12 is not complete.  (Its log file was
            # unlinked by complete() here, so its objects are gone: a real
            # crash cannot unlink before the DONE is written.)
            self.assertFalse(got[12][1])
            self.assertEqual(before[13], got[13])
            log.close()


class TestTornSlots(base.LogTestCase):
    """Bitmap methods: damage the newest slot of a page."""

    def newest_slot(self, log, file_id, index):
        paged = base.paged_file(log, file_id)
        slot = log._slot(file_id)
        unit = log._unit_for(slot)
        page = (unit.offsets[slot] + (index >> 3)) // records.PAGE_DATA
        plen = min(records.PAGE_DATA, paged.size - page * records.PAGE_DATA)
        offset = (page * 2 * records.SLOT_SIZE
                  + paged.cur[page] * (records.SLOT_HEADER.size + plen))
        return paged.path, offset, records.SLOT_HEADER.size + plen

    def test_fallback_to_older_slot(self):
        for mechanism in base.LOGGERS:
            for method in base.BITMAP_METHODS:
                for writes in (2, 3):       # newest slot is 1, then 0
                    self.check_fallback(mechanism, method, writes)

    def check_fallback(self, mechanism, method, writes):
        self.dir = os.path.join(self.tmp, "%s%s%d" % (mechanism, method,
                                                      writes))
        log = self.open(mechanism=mechanism, method=method)
        for k in range(writes - 1):
            log.record([(13, 40000 + k), (12, k)])
        older = base.state(log)
        path = base.paged_file(log, 13).path
        with open(path, "rb") as f:
            previous = f.read()
        log.record([(13, 40100), (12, 100)])
        newer = base.state(log)
        path, offset, length = self.newest_slot(log, 13, 40100)
        log.close()
        with open(path, "rb") as f:
            original = f.read()
        new = original[offset:offset + length]
        old = previous[offset:offset + length].ljust(length, b"\0")
        self.assertNotEqual(new, old)
        cases = [("header flipped", bytes([new[0] ^ 0xFF]) + new[1:]),
                 ("payload flipped", new[:-1] + bytes([new[-1] ^ 1]))]
        # A write torn at byte ``cut``: new bytes before, old ones after.
        cuts = set(range(1, 40)) | set(range(40, length, 61)) | {length - 1}
        for cut in sorted(cuts):
            cases.append(("torn at %d" % cut, new[:cut] + old[cut:]))
        for label, slot in cases:
            with open(path, "wb") as f:
                f.write(original[:offset] + slot + original[offset + length:])
            log = self.open(mechanism=mechanism, method=method)
            got = base.state(log)
            if slot == new:
                # Torn where old and new bytes agree: the write is whole.
                self.assertEqual(newer[13], got[13], label)
            else:
                self.assertEqual(older[13], got[13], label)
            if mechanism == "file":
                self.assertEqual(newer[12], got[12], label)
            log.close()
        # Undamaged, the newest slot wins.
        with open(path, "wb") as f:
            f.write(original)
        log = self.open(mechanism=mechanism, method=method)
        self.assertEqual(newer, base.state(log))
        log.close()

    def test_both_slots_damaged_reads_as_empty_page(self):
        log = self.open(mechanism="file", method="bit8")
        log.record([(13, 100)])
        log.record([(13, 101)])
        log.record([(13, 69999)])           # another page
        paged = base.paged_file(log, 13)
        log.close()
        with open(paged.path, "r+b") as f:
            for offset in (0, records.SLOT_SIZE):
                f.seek(offset + 20)
                f.write(b"\x55")
        log = self.open(mechanism="file", method="bit8")
        self.assertEqual({69999}, set(log.done(13).present()))

    def test_interrupted_reset_is_finished_on_load(self):
        # A shared bitmap log whose status says "resetting" (the crash
        # came while the region was being cleared) finishes the reset.
        for method in base.BITMAP_METHODS:
            self.dir = os.path.join(self.tmp, method)
            log = self.open(mechanism="universal", method=method)
            log.record([(13, 5), (13, 69999), (12, 3)])
            unit = log._unit_for(log._slot(13))
            unit._write_status(log._slot(13), 2)
            log.close()
            log = self.open(mechanism="universal", method=method)
            self.assertEqual(0, len(log.done(13)))
            self.assertFalse(log.is_complete(13))
            self.assertEqual({3}, set(log.done(12).present()))
            log.close()
            log = self.open(mechanism="universal", method=method)
            self.assertEqual(0, len(log.done(13)))
            log.close()


class TestBadFrameContent(base.LogTestCase):
    """A frame with a valid checksum but impossible content (only a bug
    could write it) ends the log there, like a torn frame.
    """

    def test_out_of_range_index(self):
        from dtn_migrate.transfer.objectlog import methods
        for mechanism in base.LOGGERS:
            for method in base.APPEND_METHODS:
                self.dir = os.path.join(self.tmp, mechanism + method)
                log = self.open(mechanism=mechanism, method=method)
                log.record([(12, 1)])
                target = base.append_file(log, 12)
                log.close()
                codec = methods.get(method)
                slot = 2
                bad = records.frame(b"".join(records.add_group_parts(
                    slot, codec.encode([5000]))))
                good = records.frame(b"".join(records.add_group_parts(
                    slot, codec.encode([2]))))
                with open(target.path, "ab") as f:
                    f.write(bad + good)
                log = self.open(mechanism=mechanism, method=method)
                self.assertEqual({1}, set(log.done(12).present()))
                log.record([(12, 3)])
                log = self.reopen(log, mechanism=mechanism, method=method)
                self.assertEqual({1, 3}, set(log.done(12).present()))
                log.close()


class TestAtomicIndex(testcase.TestCase):

    def test_index_write_crash(self):
        import fixtures
        tmp = self.useFixture(fixtures.TempDir()).path
        directory = os.path.join(tmp, "log")
        with CrashAt() as counter:
            objectlog.open_log(directory, "universal", "char",
                               FILES).close()
        for at in range(counter.calls):
            shutil.rmtree(directory, ignore_errors=True)
            with CrashAt(at, 0.5):
                self.assertRaises(Crash, objectlog.open_log, directory,
                                  "universal", "char", FILES)
            if os.path.exists(os.path.join(directory, records.INDEX)):
                records.read_index(directory)       # never half written
            objectlog.open_log(directory, "universal", "char",
                               FILES).close()
