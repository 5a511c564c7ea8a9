"""On-disk formats: append frames, two-slot pages, the index."""

import json
import os
import struct
import zlib

import fixtures

from dtn_migrate.transfer.objectlog import methods
from dtn_migrate.transfer.objectlog import records

from tests.unit import testcase

CHAR = methods.get("char")


def add_frame(slot, indices, method=CHAR):
    return records.frame(b"".join(records.add_group_parts(
        slot, method.encode(indices))))


class TestFrames(testcase.TestCase):

    def test_layout(self):
        body = b"".join(records.add_group_parts(3, b"7\n"))
        self.assertEqual(b"\x01\x03\x02" + b"7\n", body)
        frame = records.frame(body)
        self.assertEqual(b"\xb7\x05" + body, frame[:-4])
        self.assertEqual(zlib.crc32(frame[:-4]),
                         struct.unpack("<I", frame[-4:])[0])
        self.assertEqual(b"\x02\x81\x01", records.op_group(records.OP_DONE,
                                                           129))

    def test_scan_replays_in_order(self):
        buf = b"".join([
            add_frame(0, [1, 2]),
            add_frame(1, [5]),
            records.frame(records.op_group(records.OP_RESET, 0)),
            add_frame(0, [3]),
            records.frame(records.op_group(records.OP_DONE, 1)),
            add_frame(2, list(range(200))),     # two-byte lengths
        ])
        valid, chunks, complete = records.scan(buf, 0, 3, True, True)
        self.assertEqual(len(buf), valid)
        self.assertEqual({0: [b"3\n"], 2: [CHAR.encode(list(range(200)))]},
                         chunks)
        self.assertEqual({1}, complete)

    def test_scan_large_slots_and_lengths(self):
        entries = CHAR.encode(list(range(5000)))      # 3-byte length
        buf = add_frame(300, [1]) + add_frame(70000, list(range(5000)))
        valid, chunks, _ = records.scan(buf, 0, 100000, True, True)
        self.assertEqual(len(buf), valid)
        self.assertEqual({300: [b"1\n"], 70000: [entries]}, chunks)

    def test_scan_stops_at_damage(self):
        good = add_frame(0, [1]) + add_frame(0, [2])
        tail = add_frame(0, [3])
        for cut in range(len(tail)):
            valid, chunks, _ = records.scan(good + tail[:cut], 0, 1, True,
                                            True)
            self.assertEqual(len(good), valid)
            self.assertEqual({0: [b"1\n", b"2\n"]}, chunks)
        for i in range(len(tail)):
            flipped = bytearray(tail)
            flipped[i] ^= 0x10
            valid, chunks, _ = records.scan(good + bytes(flipped) + tail, 0,
                                            1, True, True)
            self.assertEqual(len(good), valid)
            self.assertEqual({0: [b"1\n", b"2\n"]}, chunks)

    def test_scan_rejects_foreign_groups(self):
        good = add_frame(4, [1])
        cases = [
            (add_frame(9, [1]), 4, 5, True, True),   # slot out of range
            (records.frame(records.op_group(records.OP_DONE, 4)), 4, 5,
             True, False),                           # no DONE allowed
            (add_frame(4, [2]), 4, 5, False, True),  # no ADD allowed
            (records.frame(b"\x07\x04"), 4, 5, True, True),
        ]
        for bad, lo, hi, adds, ops in cases:
            valid, chunks, complete = records.scan(good + bad + good, lo, hi,
                                                   adds, ops)
            if adds:
                self.assertEqual(len(good), valid)
                self.assertEqual({4: [b"1\n"]}, chunks)
            else:
                self.assertEqual(0, valid)
                self.assertEqual({}, chunks)
            self.assertEqual(set(), complete)

    def test_scan_bad_second_group_drops_whole_frame(self):
        body = (b"".join(records.add_group_parts(0, b"5\n"))
                + records.op_group(9, 0))
        buf = add_frame(0, [1]) + records.frame(body)
        valid, chunks, _ = records.scan(buf, 0, 1, True, True)
        self.assertEqual(len(add_frame(0, [1])), valid)
        self.assertEqual({0: [b"1\n"]}, chunks)

    def test_scan_check(self):
        buf = add_frame(0, [1]) + add_frame(0, [99]) + add_frame(0, [2])

        def check(slot, entries):
            if max(CHAR.decode(entries)) >= 10:
                raise ValueError("out of range")

        valid, chunks, _ = records.scan(buf, 0, 1, True, True, check)
        self.assertEqual(len(add_frame(0, [1])), valid)
        self.assertEqual({0: [b"1\n"]}, chunks)

    def test_scan_garbage(self):
        for garbage in (b"", b"\x00" * 100, b"\xb7", b"\xb7\xff\xff\xff",
                        os.urandom(4096)):
            valid, chunks, complete = records.scan(garbage, 0, 10, True,
                                                   True)
            self.assertEqual((0, {}, set()), (valid, chunks, complete))


class TestPagedFile(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(self.dir, "p.log")
        self.dirstate = records.DirState(self.dir)

    def paged(self, size):
        paged = records.PagedFile(self.path, self.dirstate, size)
        self.addCleanup(paged.close_fd)
        return paged

    def test_slot_layout(self):
        size = records.PAGE_DATA + 100
        paged = self.paged(size)
        data = paged.ensure()
        data[0] = 1
        data[records.PAGE_DATA] = 2
        paged.write_pages([1, 0])
        self.assertTrue(self.dirstate.dirty)
        with open(self.path, "rb") as f:
            raw = f.read()
        # Page 0 slot 0 at 0; page 1 slot 0 at 8192.
        self.assertEqual(2 * records.SLOT_SIZE + 16 + 100, len(raw))
        crc, page, gen = records.SLOT_HEADER.unpack_from(raw, 0)
        self.assertEqual((0, 1), (page, gen))
        self.assertEqual(zlib.crc32(raw[4:records.SLOT_SIZE]), crc)
        self.assertEqual(1, raw[16])
        crc, page, gen = records.SLOT_HEADER.unpack_from(raw, 8192)
        self.assertEqual((1, 1), (page, gen))
        self.assertEqual(2, raw[8192 + 16])
        # The second write of page 1 goes to its slot 1, after slot 0.
        data[records.PAGE_DATA + 1] = 3
        paged.write_pages([1])
        self.assertEqual(([1, 2], [0, 1]), (paged.gens, paged.cur))
        self.assertEqual(2 * records.SLOT_SIZE + 2 * (16 + 100),
                         os.path.getsize(self.path))
        self.assertEqual(2 * records.SLOT_SIZE + 2 * (16 + 100),
                         paged.physical_size())

    def test_load_newest_valid_slot(self):
        paged = self.paged(100)
        data = paged.ensure()
        for value in (1, 2, 3):          # gens 1, 2, 3 in slots 0, 1, 0
            data[5] = value
            paged.write_pages([0])
        paged.close_fd()
        loaded = self.paged(100)
        self.assertTrue(loaded.load())
        self.assertEqual((3, 3, 0), (loaded.data[5], loaded.gens[0],
                                     loaded.cur[0]))
        # Corrupt the newest slot (slot 0): fall back to generation 2.
        with open(self.path, "r+b") as f:
            f.seek(16 + 5)
            f.write(b"\xee")
        loaded = self.paged(100)
        loaded.load()
        self.assertEqual((2, 2, 1), (loaded.data[5], loaded.gens[0],
                                     loaded.cur[0]))
        # The next write goes over the damaged slot.
        loaded.data[6] = 9
        loaded.write_pages([0])
        self.assertEqual((3, 0), (loaded.gens[0], loaded.cur[0]))
        loaded.close_fd()
        again = self.paged(100)
        again.load()
        self.assertEqual((2, 9), (again.data[5], again.data[6]))

    def test_load_missing_and_garbage(self):
        paged = self.paged(5000)
        self.assertFalse(paged.load())
        self.assertIsNone(paged.data)
        with open(self.path, "wb") as f:
            f.write(os.urandom(3 * records.SLOT_SIZE + 77))
        paged = self.paged(5000)
        self.assertTrue(paged.load())
        self.assertEqual(bytes(5000), bytes(paged.data))
        self.assertEqual([-1, -1], paged.cur)
        # Garbage beyond the last slot is cut off.
        self.assertEqual(paged.physical_size(), os.path.getsize(self.path))

    def test_wrong_page_number_rejected(self):
        paged = self.paged(2 * records.PAGE_DATA)
        data = paged.ensure()
        data[0] = 7
        paged.write_pages([0])
        paged.close_fd()
        with open(self.path, "r+b") as f:
            slot = f.read(records.SLOT_SIZE)
            f.seek(2 * records.SLOT_SIZE)
            f.write(slot)                 # page 0's slot copied to page 1
        loaded = self.paged(2 * records.PAGE_DATA)
        loaded.load()
        self.assertEqual(7, loaded.data[0])
        self.assertEqual(0, loaded.data[records.PAGE_DATA])
        self.assertEqual(-1, loaded.cur[1])


class TestIndex(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.header = {"format": records.FORMAT, "version": records.VERSION,
                       "mechanism": "universal", "method": "char",
                       "transaction_size": None, "files": 2}
        self.rows = [['a "b",\nc \u00e9 \udcff', 3, None, None],
                     ["d", 4, None, None]]

    def test_round_trip(self):
        records.write_index(self.dir, self.header, self.rows)
        self.assertEqual([records.INDEX], os.listdir(self.dir))
        header, rows = records.read_index(self.dir)
        self.assertEqual(self.header, header)
        self.assertEqual(self.rows, rows)
        with open(os.path.join(self.dir, records.INDEX), "rb") as f:
            lines = f.read().split(b"\n")
        self.assertEqual(5, len(lines))         # header, 2 rows, trailer, ''
        self.assertEqual(self.rows[1], json.loads(lines[2]))

    def test_missing(self):
        self.assertRaises(FileNotFoundError, records.read_index, self.dir)

    def test_damaged(self):
        records.write_index(self.dir, self.header, self.rows)
        path = os.path.join(self.dir, records.INDEX)
        with open(path, "rb") as f:
            data = f.read()
        for damaged in (data[:-10], data[:len(data) // 2], b"", b"\n",
                        data.replace(b'"d"', b'"e"'), b"garbage\n" + data,
                        data.replace(records.FORMAT.encode(), b"other")):
            with open(path, "wb") as f:
                f.write(damaged)
            self.assertRaises(records.LogMismatch, records.read_index,
                              self.dir)
