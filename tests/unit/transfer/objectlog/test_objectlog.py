"""The object log API for every mechanism x method."""

import json
import os
import random
import shutil


from dtn_migrate.transfer import bitmap
from dtn_migrate.transfer import objectlog
from dtn_migrate.transfer.objectlog import records
from tests.unit.transfer.objectlog import base
from tests.unit import testcase

FILES = base.FILES
LogFile = objectlog.LogFile


def random_batches(seed, count, files=FILES, size=(1, 40)):
    rng = random.Random(seed)
    batches = []
    for _ in range(count):
        batch = []
        for _ in range(rng.randint(*size)):
            f = rng.choice(files)
            batch.append((f.file_id, rng.randrange(f.nobjects)))
        batches.append(batch)
    return batches


def model_of(batches, files=FILES):
    model = {f.file_id: set() for f in files}
    for batch in batches:
        for file_id, index in batch:
            model[file_id].add(index)
    return {k: (frozenset(v), False) for k, v in model.items()}


class MatrixTests:
    """Behaviour every mechanism x method combination must have."""

    def test_fresh_log_is_empty(self):
        log = self.open()
        self.assertEqual(base.empty_state(), base.state(log))
        self.assertTrue(os.path.isfile(self.path(records.INDEX)))
        self.assertEqual([], base.log_files(self.dir))
        for f in FILES:
            done = log.done(f.file_id)
            self.assertIsInstance(done, bitmap.Bitmap)
            self.assertEqual(f.nobjects, done.nbits)
        log = self.reopen(log)
        self.assertEqual(base.empty_state(), base.state(log))

    def test_round_trip(self):
        log = self.open()
        batches = random_batches(1, 200)
        for batch in batches:
            log.record(batch)
        expect = model_of(batches)
        self.assertEqual(expect, base.state(log))
        log = self.reopen(log)
        self.assertEqual(expect, base.state(log))
        # Records after a reopen go to the same logs and survive another.
        more = random_batches(2, 50)
        for batch in more:
            log.record(batch)
        expect = model_of(batches + more)
        self.assertEqual(expect, base.state(log))
        log.sync()
        log = self.reopen(log)
        self.assertEqual(expect, base.state(log))

    def test_edges_of_files(self):
        log = self.open()
        batch = [(f.file_id, i) for f in FILES for i in {0, f.nobjects - 1}]
        log.record(batch)
        log = self.reopen(log)
        self.assertEqual(model_of([batch]), base.state(log))

    def test_done_is_a_copy(self):
        log = self.open()
        log.record([(12, 5)])
        done = log.done(12)
        done.add(6)
        self.assertEqual([5], list(log.done(12).present()))

    def test_empty_and_duplicate_records_write_nothing(self):
        log = self.open()
        log.record([(12, 5), (12, 5), (13, 1)])
        space = log.space()
        log.record([])
        log.record(iter([]))
        log.record([(12, 5), (13, 1), (13, 1)])
        self.assertEqual(space, log.space())
        log = self.reopen(log)
        self.assertEqual({5}, set(log.done(12).present()))

    def test_bad_items_write_nothing(self):
        log = self.open()
        log.record([(12, 5)])
        space = log.space()
        self.assertRaises(KeyError, log.record, [(12, 6), (99, 0)])
        self.assertRaises(IndexError, log.record, [(12, 6), (12, 5000)])
        self.assertRaises(IndexError, log.record, [(12, 6), (12, -1)])
        self.assertRaises(TypeError, log.record, [(12, 1.5)])
        self.assertRaises(KeyError, log.done, 99)
        self.assertRaises(KeyError, log.complete, 99)
        self.assertRaises(KeyError, log.reset, 99)
        self.assertRaises(KeyError, log.is_complete, 99)
        self.assertEqual(space, log.space())
        self.assertEqual({5}, set(log.done(12).present()))

    def test_complete(self):
        log = self.open()
        log.record([(12, 1), (12, 2), (13, 3), (11, 4)])
        log.complete(12)
        log.complete(10)                    # nothing recorded before
        self.assertTrue(log.is_complete(12))
        self.assertTrue(log.is_complete(10))
        self.assertFalse(log.is_complete(13))
        self.assertTrue(log.done(12).full)
        self.assertEqual(5000, len(log.done(12)))
        space = log.space()
        log.complete(12)                    # idempotent
        log.record([(12, 7)])               # ignored: already all set
        self.assertEqual(space, log.space())
        log = self.reopen(log)
        self.assertTrue(log.is_complete(12))
        self.assertTrue(log.is_complete(10))
        self.assertTrue(log.done(12).full)
        self.assertTrue(log.done(10).full)
        self.assertEqual({3}, set(log.done(13).present()))
        self.assertEqual({4}, set(log.done(11).present()))
        self.assertFalse(log.is_complete(11))

    def test_reset(self):
        log = self.open()
        log.record([(13, 1), (13, 69999), (13, 30000), (12, 2)])
        log.reset(13)
        self.assertEqual(0, len(log.done(13)))
        log.record([(13, 5)])
        log = self.reopen(log)
        self.assertEqual({5}, set(log.done(13).present()))
        self.assertEqual({2}, set(log.done(12).present()))
        log.reset(13)
        log.reset(13)                       # idempotent
        log.reset(11)                       # nothing recorded
        log = self.reopen(log)
        self.assertEqual(base.empty_state([FILES[1], FILES[3]]),
                         base.state(log, [FILES[1], FILES[3]]))
        self.assertEqual({2}, set(log.done(12).present()))

    def test_reset_after_complete(self):
        log = self.open()
        log.record([(12, 1)])
        log.complete(12)
        log.reset(12)
        self.assertFalse(log.is_complete(12))
        self.assertEqual(0, len(log.done(12)))
        log = self.reopen(log)
        self.assertFalse(log.is_complete(12))
        self.assertEqual(0, len(log.done(12)))
        log.record([(12, 9)])
        log.complete(12)
        log.reset(12)
        log.record([(12, 10)])
        log = self.reopen(log)
        self.assertEqual(({10}, False), (set(log.done(12).present()),
                                         log.is_complete(12)))

    def test_space(self):
        log = self.open()
        index = os.path.getsize(self.path(records.INDEX))
        self.assertEqual(index, log.space())
        log.record([(12, 1)])
        first = log.space()
        self.assertGreater(first, index)
        log.record([(12, i) for i in range(2, 2000)])
        self.assertGreater(log.space(), first)
        log.record([(13, i) for i in range(0, 70000, 7)])
        total = sum(os.path.getsize(self.path(name))
                    for name in os.listdir(self.dir))
        self.assertEqual(total, log.space())

    def test_sync(self):
        log = self.open()
        log.sync()
        log.record([(12, 1), (13, 2), (30, 64)])
        log.complete(20)
        log.sync()
        log.sync()
        log = self.reopen(log)
        self.assertTrue(log.is_complete(20))
        self.assertEqual({64}, set(log.done(30).present()))

    def test_close(self):
        log = self.open()
        log.record([(12, 1)])
        log.close()
        log.close()
        for call, args in ((log.record, ([(12, 2)],)), (log.done, (12,)),
                           (log.complete, (12,)), (log.reset, (12,)),
                           (log.is_complete, (12,)), (log.sync, ())):
            self.assertRaises(ValueError, call, *args)
        self.assertGreater(log.space(), 0)

    def test_destroy(self):
        log = self.open()
        log.record([(12, 1)])
        log.destroy()
        self.assertFalse(os.path.exists(self.dir))
        self.assertTrue(os.path.isdir(self.tmp))
        self.assertEqual(0, log.space())
        log.destroy()                       # already gone: no error

    def test_creates_nested_directory(self):
        self.dir = os.path.join(self.tmp, "a", "b", "log")
        log = self.open()
        log.record([(12, 1)])
        log = self.reopen(log)
        self.assertEqual({1}, set(log.done(12).present()))

    def test_mismatch(self):
        log = self.open()
        log.record([(12, 1)])
        log.close()
        other = "file" if self.mechanism != "file" else "universal"
        other_method = "char" if self.method != "char" else "bit8"
        renamed = list(FILES)
        renamed[2] = renamed[2]._replace(name="other")
        resized = list(FILES)
        resized[2] = resized[2]._replace(nobjects=5001)
        cases = [
            dict(files=renamed),
            dict(files=resized),
            dict(files=FILES[:-1]),
            dict(files=FILES + [LogFile(40, "j", 3)]),
            dict(files=FILES[1:] + FILES[:1]),
            dict(mechanism=other),
            dict(method=other_method),
        ]
        if self.mechanism == "transaction":
            cases.append(dict(transaction_size=3))
        for kwargs in cases:
            self.assertRaises(objectlog.LogMismatch, self.open, **kwargs)
        # The log itself is untouched.
        log = self.open()
        self.assertEqual({1}, set(log.done(12).present()))

    def test_file_ids_may_change_between_runs(self):
        log = self.open()
        log.record([(12, 1)])
        log.close()
        renumbered = [f._replace(file_id=f.file_id + 100) for f in FILES]
        log = self.open(renumbered)
        self.assertEqual({1}, set(log.done(112).present()))

    def test_index_names(self):
        self.open()
        header, rows = self.read_index()
        self.assertEqual(self.mechanism, header["mechanism"])
        self.assertEqual(self.method, header["method"])
        names = [row[0] if self.mechanism == "universal" else row[1]
                 for row in rows]
        self.assertEqual([f.name for f in FILES], names)
        with open(self.path(records.INDEX), "rb") as f:
            raw = f.read()
        raw.decode("ascii")                 # names are escaped
        self.assertEqual(len(FILES) + 2, raw.count(b"\n"))

    def test_tricky_names(self):
        names = ["with space", "comma,here", 'quote"d', "single'q",
                 "back\\slash", "\u65e5\u672c\u8a9e/\u00e9\u00e8",
                 "emoji \U0001f600", "[1, 2]", "{\"a\": 1}", "tab\tname",
                 "lone \udcff surrogate"]
        files = [LogFile(n, name, 10 + n) for n, name in enumerate(names)]
        log = self.open(files)
        log.record([(n, n) for n in range(len(names))])
        log = self.reopen(log, files)
        for n in range(len(names)):
            self.assertEqual({n}, set(log.done(n).present()))
        _, rows = self.read_index()
        col = 0 if self.mechanism == "universal" else 1
        self.assertEqual(names, [row[col] for row in rows])

    def test_garbage_appended_is_ignored(self):
        log = self.open()
        batches = random_batches(3, 60)
        for batch in batches:
            log.record(batch)
        log.complete(20)
        expect = model_of(batches)
        expect[20] = (frozenset(range(8)), True)
        log.close()
        rng = random.Random(5)
        for name in base.log_files(self.dir):
            with open(self.path(name), "ab") as f:
                f.write(bytes(rng.randrange(256) for _ in range(777)))
        log = self.open()
        self.assertEqual(expect, base.state(log))
        log.record([(21, 63)])
        log = self.reopen(log)
        expect[21] = (expect[21][0] | {63}, False)
        self.assertEqual(expect, base.state(log))

    def test_empty_and_garbage_log_files(self):
        log = self.open()
        log.record([(f.file_id, 0) for f in FILES])
        names = base.log_files(self.dir)
        log.close()
        rng = random.Random(6)
        garbage = bytes(rng.randrange(256) for _ in range(9000))
        for content in (b"", garbage, bytes(20000)):
            for name in names:
                with open(self.path(name), "wb") as f:
                    f.write(content)
            log = self.open()
            self.assertEqual(base.empty_state(), base.state(log))
            log.record([(12, 3)])
            log = self.reopen(log)
            self.assertEqual({3}, set(log.done(12).present()))
            log.close()

    def test_missing_index(self):
        log = self.open()
        log.close()
        os.unlink(self.path(records.INDEX))
        # No log files: a fresh log.
        log = self.open()
        log.record([(12, 1)])
        log.close()
        os.unlink(self.path(records.INDEX))
        self.assertRaises(objectlog.LogMismatch, self.open)

    def test_leftover_index_tmp(self):
        os.makedirs(self.dir)
        with open(self.path(records.INDEX_TMP), "w") as f:
            f.write("half an ind")
        log = self.open()
        self.assertFalse(os.path.exists(self.path(records.INDEX_TMP)))
        log.record([(12, 1)])
        with open(self.path(records.INDEX_TMP), "w") as f:
            f.write("{}")
        log = self.reopen(log)
        self.assertEqual({1}, set(log.done(12).present()))

    def test_damaged_index(self):
        self.open().close()
        with open(self.path(records.INDEX), "r+b") as f:
            f.seek(30)
            byte = f.read(1)
            f.seek(30)
            f.write(bytes([byte[0] ^ 1]))
        self.assertRaises(objectlog.LogMismatch, self.open)

    def test_many_files(self):
        files = [LogFile(n, "f%d" % n, 1 + n % 300) for n in range(1000)]
        log = self.open(files)
        batches = random_batches(7, 300, files, size=(1, 16))
        for batch in batches:
            log.record(batch)
        for n in range(0, 1000, 7):
            log.complete(n)
        expect = model_of(batches, files)
        for n in range(0, 1000, 7):
            expect[n] = (frozenset(range(files[n].nobjects)), True)
        log = self.reopen(log, files)
        self.assertEqual(expect, base.state(log, files))

    def test_concurrent_threads(self):
        import threading
        log = self.open()
        batches = random_batches(8, 400, size=(1, 8))

        def worker(part):
            for batch in part:
                log.record(batch)

        threads = [threading.Thread(target=worker, args=(batches[n::4],))
                   for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        expect = model_of(batches)
        self.assertEqual(expect, base.state(log))
        log = self.reopen(log)
        self.assertEqual(expect, base.state(log))


for _mechanism in base.LOGGERS:
    for _method in base.APPEND_METHODS + base.BITMAP_METHODS:
        _name = "Test%s%s" % (_mechanism.capitalize(), _method.capitalize())
        _doc = "The object log API, %s x %s." % (_mechanism, _method)
        globals()[_name] = type(_name, (MatrixTests, base.LogTestCase), {
            "mechanism": _mechanism, "method": _method, "__doc__": _doc})


class TestFileLogger(base.LogTestCase):
    """The file logger's lazily created, deleted-on-complete log files."""

    mechanism = "file"

    def test_lazy_create_and_delete(self):
        for method in objectlog.METHODS:
            self.dir = os.path.join(self.tmp, method)
            log = self.open(method=method)
            self.assertEqual([], base.log_files(self.dir))
            log.record([(12, 1), (13, 2)])
            self.assertEqual(["f-2.log", "f-3.log"],
                             base.log_files(self.dir))
            log.complete(12)
            self.assertEqual(["complete.log", "f-3.log"],
                             base.log_files(self.dir))
            log.reset(13)
            self.assertEqual(["complete.log"], base.log_files(self.dir))
            log.record([(12, 1)])           # complete: no new log file
            self.assertEqual(["complete.log"], base.log_files(self.dir))
            log = self.reopen(log, method=method)
            self.assertTrue(log.is_complete(12))
            log.reset(12)
            log.record([(12, 4)])
            self.assertEqual(["complete.log", "f-2.log"],
                             base.log_files(self.dir))
            log.close()

    def test_stale_log_of_completed_file_removed(self):
        log = self.open(method="char")
        log.record([(12, 1)])
        with open(self.path("f-2.log"), "rb") as f:
            saved = f.read()
        log.complete(12)
        log.close()
        # As if killed between the journal's DONE and the unlink.
        with open(self.path("f-2.log"), "wb") as f:
            f.write(saved)
        log = self.open(method="char")
        self.assertTrue(log.is_complete(12))
        self.assertFalse(os.path.exists(self.path("f-2.log")))

    def test_many_open_files(self):
        from dtn_migrate.transfer.objectlog import mechanisms
        self.patch(mechanisms, "MAX_OPEN_FILES", 5)
        files = [LogFile(n, "f%d" % n, 100) for n in range(30)]
        for method in ("varint", "bit8"):
            self.dir = os.path.join(self.tmp, method)
            log = self.open(files, method=method)
            batches = random_batches(9, 300, files, size=(1, 6))
            for batch in batches:
                log.record(batch)
            self.assertLessEqual(len(log._open_files), 5)
            open_fds = [u.file.fd for u in log._units.values()
                        if u.file.fd is not None]
            self.assertLessEqual(len(open_fds), 5)
            log.sync()
            log = self.reopen(log, files, method=method)
            self.assertEqual(model_of(batches, files),
                             base.state(log, files))
            log.close()


class TestSharedLoggers(base.LogTestCase):

    def test_transaction_grouping(self):
        for size, logs in ((1, 7), (4, 2), (3, 3), (7, 1), (100, 1)):
            self.dir = os.path.join(self.tmp, "t%d" % size)
            log = self.open(mechanism="transaction", method="varint",
                            transaction_size=size)
            log.record([(f.file_id, 0) for f in FILES])
            self.assertEqual(["t-%d.log" % k for k in range(logs)],
                             base.log_files(self.dir))
            header, rows = self.read_index()
            self.assertEqual(size, header["transaction_size"])
            self.assertEqual(["t-%d.log" % (n // size)
                              for n in range(len(FILES))],
                             [row[0] for row in rows])
            log.close()

    def test_transaction_logs_created_lazily(self):
        log = self.open(mechanism="transaction", method="bit8")
        self.assertEqual([], base.log_files(self.dir))
        log.record([(20, 1)])
        self.assertEqual(["t-1.log"], base.log_files(self.dir))

    def test_bitmap_index_regions(self):
        for mechanism, method in (("universal", "bit8"),
                                  ("universal", "bit64"),
                                  ("transaction", "bit64"),
                                  ("file", "bit8")):
            self.dir = os.path.join(self.tmp, mechanism + method)
            self.open(mechanism=mechanism, method=method).close()
            _, rows = self.read_index()
            offsets = [row[-2] for row in rows]
            lengths = [row[-1] for row in rows]
            word = 8 if method == "bit64" else 1
            self.assertEqual(
                [objectlog.methods.get(method).region_len(f.nobjects)
                 for f in FILES], lengths)
            if mechanism == "universal":
                # Status area of 7 bytes (padded to the word size) first.
                status = 8 if word == 8 else 7
                expect = [status]
                for length in lengths[:-1]:
                    expect.append(expect[-1] + length)
                self.assertEqual(expect, offsets)
            elif mechanism == "file":
                self.assertEqual([0] * len(FILES), offsets)
            for offset in offsets:
                self.assertEqual(0, offset % word)

    def test_append_index_has_no_regions(self):
        self.open(mechanism="universal", method="char").close()
        header, rows = self.read_index()
        self.assertEqual(["a.img", 1, None, None], rows[0])
        self.assertIsNone(header["transaction_size"])


class TestSpaceComparison(base.LogTestCase):
    """Bitmap methods take the least space once many objects are logged
    (the paper's Fig. 7); binary takes the most.
    """

    def test_bit_methods_smallest(self):
        files = [LogFile(n, "f%d" % n, 3000) for n in range(6)]
        rng = random.Random(10)
        items = [(f.file_id, i) for f in files for i in range(f.nobjects)
                 if rng.random() < 0.7]
        rng.shuffle(items)
        for mechanism in base.LOGGERS:
            space = {}
            for method in objectlog.METHODS:
                self.dir = os.path.join(self.tmp, mechanism + method)
                log = self.open(files, mechanism=mechanism, method=method)
                for k in range(0, len(items), 16):
                    log.record(items[k:k + 16])
                space[method] = log.space()
                log.close()
            bit = max(space["bit8"], space["bit64"])
            self.assertLess(bit, min(space[m] for m in base.APPEND_METHODS),
                            (mechanism, space))
            self.assertEqual(max(space.values()), space["binary"])
            self.assertLess(space["varint"], space["char"])
            self.assertLessEqual(space["bit8"], space["bit64"])


class TestHugeFiles(base.LogTestCase):

    def test_append_methods_do_not_allocate_per_object(self):
        huge = 2 ** 32 - 1
        files = [LogFile(0, "huge", huge), LogFile(1, "small", 10)]
        picks = {0, 1, 12345, huge - 1}
        for mechanism in base.LOGGERS:
            for method in base.APPEND_METHODS:
                self.dir = os.path.join(self.tmp, mechanism + method)
                log = self.open(files, mechanism=mechanism, method=method)
                log.record([(0, i) for i in picks] + [(1, 9)])
                log = self.reopen(log, files, mechanism=mechanism,
                                  method=method)
                unit = log._unit_for(0)
                self.assertIsNone(unit.sets[0].bits)
                self.assertEqual(picks, unit.sets[0].items)
                log.close()


class TestNullLog(testcase.TestCase):

    def test_records_nothing(self):
        tmp = self.useFixture(__import__("fixtures").TempDir()).path
        directory = os.path.join(tmp, "log")
        for method in objectlog.METHODS:
            log = objectlog.open_log(directory, "none", method, FILES)
            self.assertIsInstance(log, objectlog.NullLog)
            log.record([(12, 1)])
            log.complete(13)
            log.reset(12)
            log.sync()
            self.assertEqual(0, len(log.done(12)))
            self.assertEqual(5000, log.done(12).nbits)
            self.assertFalse(log.is_complete(13))
            self.assertEqual(0, log.space())
            self.assertRaises(KeyError, log.done, 99)
            log.close()
            log.destroy()
        self.assertFalse(os.path.exists(directory))


class TestOpenLog(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = os.path.join(
            self.useFixture(__import__("fixtures").TempDir()).path, "log")

    def test_constants(self):
        self.assertEqual(("none", "file", "transaction", "universal"),
                         objectlog.MECHANISMS)
        self.assertEqual(("char", "int", "binary", "varint", "bit8",
                          "bit64"), objectlog.METHODS)
        self.assertEqual(("file_id", "name", "nobjects"),
                         objectlog.LogFile._fields)

    def test_bad_arguments(self):
        cases = [
            ("bogus", "char", FILES, {}),
            ("file", "bogus", FILES, {}),
            ("file", "char", [LogFile(1, "a", 1), LogFile(1, "b", 1)], {}),
            ("file", "char", [LogFile(-1, "a", 1)], {}),
            ("file", "char", [LogFile(1, "a", 0)], {}),
            ("file", "char", [LogFile(1, "a", 2 ** 32)], {}),
            ("file", "char", [LogFile(1, b"a", 1)], {}),
            ("transaction", "char", FILES, {"transaction_size": 0}),
        ]
        for mechanism, method, files, kwargs in cases:
            self.assertRaises(ValueError, objectlog.open_log, self.dir,
                              mechanism, method, files, **kwargs)
        self.assertFalse(os.path.exists(self.dir))

    def test_plain_tuples_accepted(self):
        log = objectlog.open_log(self.dir, "universal", "int",
                                 [(1, "a", 5), (2, "b", 6)])
        self.addCleanup(log.close)
        log.record([(2, 5)])
        self.assertEqual({5}, set(log.done(2).present()))

    def test_empty_dataset(self):
        for mechanism in base.LOGGERS:
            directory = os.path.join(self.dir, mechanism)
            log = objectlog.open_log(directory, mechanism, "bit64", [])
            log.record([])
            log.sync()
            log.close()
            log = objectlog.open_log(directory, mechanism, "bit64", [])
            log.destroy()

    def test_destroy_log(self):
        objectlog.open_log(self.dir, "file", "char", FILES).close()
        objectlog.destroy_log(self.dir)
        self.assertFalse(os.path.exists(self.dir))

    def test_foreign_index(self):
        os.makedirs(self.dir)
        with open(os.path.join(self.dir, records.INDEX), "w") as f:
            body = json.dumps({"format": "x"}) + "\n"
            f.write(body)
        self.assertRaises(objectlog.LogMismatch, objectlog.open_log,
                          self.dir, "file", "char", FILES)
        shutil.rmtree(self.dir)
