"""Tests of dtn_migrate.transfer.dataset."""

import json
import os
import uuid

import fixtures

from dtn_migrate.transfer import dataset
from dtn_migrate.transfer import errors

from tests.unit import testcase


def spec(**kw):
    fields = dict(name="d/f", path="/src/d/f", size=100)
    fields.update(kw)
    return dataset.FileSpec(**fields)


class FileSpecTest(testcase.TestCase):

    def test_defaults(self):
        s = spec()
        self.assertIsNone(s.sha512)
        self.assertFalse(s.growing)
        self.assertEqual(0o644, s.mode)

    def test_dict_round_trip(self):
        s = spec(sha512="ab" * 64, mtime_ns=123, mode=0o600, growing=True,
                 watermark_file="/src/d/f.wm")
        d = s.to_dict()
        self.assertEqual("d/f", d["name"])
        self.assertEqual(s, dataset.FileSpec.from_dict(d))
        self.assertEqual(s, dataset.FileSpec.from_dict(
            json.loads(json.dumps(d))))

    def test_from_dict_ignores_unknown_keys(self):
        d = spec().to_dict()
        d["future_field"] = 1
        self.assertEqual(spec(), dataset.FileSpec.from_dict(d))

    def test_from_dict_fills_defaults(self):
        s = dataset.FileSpec.from_dict({"name": "a", "path": "/a",
                                        "size": 1})
        self.assertEqual(dataset.FileSpec("a", "/a", 1), s)


class ManifestTest(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def test_new(self):
        m = dataset.Manifest.new("peer-a", iter([spec()]), {"x": 1})
        self.assertEqual(32, len(m.transfer_id))
        self.assertEqual(uuid.UUID(hex=m.transfer_id).bytes, m.id_bytes)
        self.assertEqual([spec()], m.files)
        self.assertEqual({"x": 1}, m.options)
        other = dataset.Manifest.new("peer-a", [])
        self.assertNotEqual(m.transfer_id, other.transfer_id)
        self.assertEqual({}, other.options)

    def test_new_with_id(self):
        tid = uuid.uuid4().hex
        m = dataset.Manifest.new("p", [], transfer_id=tid)
        self.assertEqual(tid, m.transfer_id)
        self.assertEqual(16, len(m.id_bytes))

    def test_save_load_round_trip(self):
        files = [spec(), spec(name="e/\u00fc", path="/src/e/\u00fc",
                              size=0, sha512="cd" * 64, growing=True)]
        m = dataset.Manifest.new("peer-b", files, {"object_size": 4096})
        state = os.path.join(self.tmp, "state", m.transfer_id)
        m.save(state)
        loaded = dataset.Manifest.load(state)
        self.assertEqual(m, loaded)
        self.assertEqual(["manifest.json"], os.listdir(state))

    def test_saved_format(self):
        m = dataset.Manifest.new("peer-b", [spec()])
        m.save(self.tmp)
        with open(os.path.join(self.tmp, "manifest.json")) as f:
            d = json.load(f)
        self.assertEqual(1, d["version"])
        self.assertEqual(m.transfer_id, d["transfer_id"])
        self.assertEqual("peer-b", d["peer"])
        self.assertEqual([spec().to_dict()], d["files"])

    def test_save_replaces(self):
        m = dataset.Manifest.new("p", [spec()])
        m.save(self.tmp)
        m.files.append(spec(name="g"))
        m.save(self.tmp)
        self.assertEqual(2, len(dataset.Manifest.load(self.tmp).files))
        self.assertEqual(["manifest.json"], os.listdir(self.tmp))

    def test_load_missing(self):
        self.assertRaises(FileNotFoundError, dataset.Manifest.load,
                          self.tmp)

    def test_write_json_atomic(self):
        path = os.path.join(self.tmp, "x.json")
        dataset.write_json_atomic(path, {"b": 1, "a": [1, 2]})
        with open(path) as f:
            self.assertEqual({"b": 1, "a": [1, 2]}, json.load(f))
        self.assertEqual(["x.json"], os.listdir(self.tmp))


class ExpandTest(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.root = os.path.join(self.tmp, "root")
        os.mkdir(self.root)

    def write(self, rel, data=b"x"):
        full = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)
        return full

    def names(self, specs):
        return [s.name for s in specs]

    def test_nested_directory(self):
        self.write("d/b", b"bb")
        self.write("d/a", b"a")
        self.write("d/sub/c", b"ccc")
        self.write("d/sub/deeper/e", b"")
        specs = dataset.expand(self.root, ["d"])
        self.assertEqual(["d/a", "d/b", "d/sub/c", "d/sub/deeper/e"],
                         self.names(specs))
        self.assertEqual([1, 2, 3, 0], [s.size for s in specs])
        for s in specs:
            self.assertEqual(os.path.join(self.root, s.name), s.path)
            self.assertTrue(os.path.isabs(s.path))
            self.assertFalse(s.growing)

    def test_subdirectories_sorted(self):
        for d in ("z", "m", "a"):
            self.write("top/%s/f" % d)
        self.assertEqual(["top/a/f", "top/m/f", "top/z/f"],
                         self.names(dataset.expand(self.root, ["top"])))

    def test_deterministic(self):
        for rel in ("d/q", "d/p/1", "d/p/0", "d/k"):
            self.write(rel)
        first = dataset.expand(self.root, ["d"])
        self.assertEqual(first, dataset.expand(self.root, ["d"]))

    def test_file_items_keep_order(self):
        self.write("b")
        self.write("a")
        self.assertEqual(["b", "a"],
                         self.names(dataset.expand(self.root, ["b", "a"])))

    def test_absolute_item(self):
        full = self.write("d/f", b"1234")
        specs = dataset.expand(self.root, [full])
        self.assertEqual(["d/f"], self.names(specs))
        self.assertEqual(4, specs[0].size)

    def test_metadata_and_hashes(self):
        full = self.write("d/f", b"1234")
        os.chmod(full, 0o640)
        os.utime(full, ns=(1, 1_600_000_000_123_456_789))
        specs = dataset.expand(self.root, ["d"], {"d/f": "ef" * 64})
        self.assertEqual("ef" * 64, specs[0].sha512)
        self.assertEqual(0o640, specs[0].mode)
        self.assertEqual(1_600_000_000_123_456_789, specs[0].mtime_ns)

    def test_root_given_through_symlink(self):
        self.write("f")
        alias = os.path.join(self.tmp, "alias")
        os.symlink(self.root, alias)
        self.assertEqual(["f"], self.names(dataset.expand(alias, ["f"])))

    def test_refuses_symlink_item(self):
        self.write("real")
        os.symlink("real", os.path.join(self.root, "ln"))
        self.assertRaises(errors.BadNameError, dataset.expand, self.root,
                          ["ln"])

    def test_refuses_symlink_in_tree(self):
        self.write("d/real")
        os.symlink("real", os.path.join(self.root, "d", "ln"))
        self.assertRaises(errors.BadNameError, dataset.expand, self.root,
                          ["d"])

    def test_refuses_symlinked_directory_item(self):
        self.write("d/f")
        os.symlink("d", os.path.join(self.root, "dl"))
        self.assertRaises(errors.BadNameError, dataset.expand, self.root,
                          ["dl"])

    def test_refuses_symlinked_directory_in_tree(self):
        # A symlink to a directory inside the tree must be refused like
        # a symlink to a file, not silently left out of the dataset.
        self.write("d/f")
        self.write("elsewhere/data")
        os.symlink(os.path.join(self.root, "elsewhere"),
                   os.path.join(self.root, "d", "dirlink"))
        self.assertRaises(errors.BadNameError, dataset.expand, self.root,
                          ["d"])

    def test_refuses_fifo(self):
        os.makedirs(os.path.join(self.root, "d"))
        os.mkfifo(os.path.join(self.root, "d", "fifo"))
        self.assertRaises(errors.BadNameError, dataset.expand, self.root,
                          ["d"])
        self.assertRaises(errors.BadNameError, dataset.expand, self.root,
                          ["d/fifo"])

    def test_refuses_missing(self):
        self.assertRaises(errors.BadNameError, dataset.expand, self.root,
                          ["nope"])

    def test_refuses_outside_root(self):
        outside = os.path.join(self.tmp, "outside")
        with open(outside, "wb") as f:
            f.write(b"x")
        self.assertRaises(errors.BadNameError, dataset.expand, self.root,
                          [outside])
        self.assertRaises(errors.BadNameError, dataset.expand, self.root,
                          ["../outside"])

    def test_refuses_reserved_dir(self):
        self.write(".dtn-partial/x")
        self.assertRaises(errors.BadNameError, dataset.expand, self.root,
                          [".dtn-partial"])

    def test_spec_for_path(self):
        full = self.write("f", b"abc")
        s = dataset.spec_for_path(full)
        self.assertEqual("f", s.name)
        self.assertEqual(3, s.size)
        self.assertEqual(full, s.path)
        self.assertEqual("named", dataset.spec_for_path(full, "named").name)


class WatermarkTest(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.wm = os.path.join(self.tmp, "f.wm")

    def put(self, text):
        with open(self.wm, "wb") as f:
            f.write(text)

    def test_missing_file(self):
        self.assertEqual((0, False), dataset.read_watermark_file(self.wm))

    def test_values(self):
        cases = [(b"", (0, False)), (b"\n", (0, False)),
                 (b"123\n", (123, False)), (b"  77  ", (77, False)),
                 (b"123 failed\n", (123, True)),
                 (b"0 failed", (0, True)),
                 (b"123 other", (123, False)),
                 (b"garbage", (0, False)), (b"\xff\xfe", (0, False)),
                 (b"12.5", (0, False)), (b"-5", (0, False)),
                 (b"-5 failed", (0, True))]
        for raw, want in cases:
            self.put(raw)
            self.assertEqual(want, dataset.read_watermark_file(self.wm),
                             raw)

    def test_write_read(self):
        dataset.write_watermark_file(self.wm, 4096)
        self.assertEqual((4096, False), dataset.read_watermark_file(self.wm))
        dataset.write_watermark_file(self.wm, 8192, failed=True)
        self.assertEqual((8192, True), dataset.read_watermark_file(self.wm))
        self.assertEqual(["f.wm"], os.listdir(self.tmp))

    def test_available_bytes_not_growing(self):
        self.put(b"5")
        s = spec(size=100, watermark_file=self.wm)
        self.assertEqual(100, dataset.available_bytes(s))

    def test_available_bytes_growing_without_source(self):
        self.assertEqual(100, dataset.available_bytes(
            spec(size=100, growing=True)))

    def test_available_bytes_from_file(self):
        s = spec(size=100, growing=True, watermark_file=self.wm)
        self.assertEqual(0, dataset.available_bytes(s))
        dataset.write_watermark_file(self.wm, 40)
        self.assertEqual(40, dataset.available_bytes(s))
        dataset.write_watermark_file(self.wm, 100)
        self.assertEqual(100, dataset.available_bytes(s))
        dataset.write_watermark_file(self.wm, 1000)
        self.assertEqual(100, dataset.available_bytes(s))
        self.put(b"garbage")
        self.assertEqual(0, dataset.available_bytes(s))

    def test_available_bytes_failed(self):
        s = spec(size=100, growing=True, watermark_file=self.wm)
        dataset.write_watermark_file(self.wm, 40, failed=True)
        exc = self.assertRaises(dataset.GrowingFileFailed,
                                dataset.available_bytes, s)
        self.assertEqual(errors.Code.SOURCE_CHANGED, exc.code)
        self.assertIsInstance(exc, errors.TransferError)
        self.assertIn("d/f", str(exc))

    def test_available_bytes_provider(self):
        s = spec(size=100, growing=True, watermark_file=self.wm)
        dataset.write_watermark_file(self.wm, 10, failed=True)
        self.assertEqual(60, dataset.available_bytes(s, lambda: 60))
        self.assertEqual(100, dataset.available_bytes(s, lambda: 500))
        self.assertEqual(0, dataset.available_bytes(s, lambda: 0))

    def test_provider_ignored_when_not_growing(self):
        self.assertEqual(100, dataset.available_bytes(spec(size=100),
                                                      lambda: 3))


class SourceIdentityTest(testcase.TestCase):
    """open_source opens only the file that was defined; changes names
    what may have changed in it since.
    """

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(self.dir, "f")
        self.secret = os.path.join(self.dir, "secret")
        for p, data in ((self.path, b"defined"), (self.secret, b"secret!")):
            with open(p, "wb") as f:
                f.write(data)
        self.spec = dataset.spec_for_path(self.path, "f")

    def read_source(self):
        fd, st = dataset.open_source(self.spec)
        try:
            return os.read(fd, 100), st
        finally:
            os.close(fd)

    def test_spec_records_identity(self):
        st = os.stat(self.path)
        self.assertEqual((st.st_dev, st.st_ino, st.st_ctime_ns,
                          st.st_mtime_ns),
                         (self.spec.dev, self.spec.ino, self.spec.ctime_ns,
                          self.spec.mtime_ns))
        again = dataset.FileSpec.from_dict(json.loads(json.dumps(
            self.spec.to_dict())))
        self.assertEqual(self.spec, again)

    def test_opens_the_defined_file(self):
        data, st = self.read_source()
        self.assertEqual(b"defined", data)
        self.assertEqual([], dataset.changes(self.spec, st))

    def test_symlink_is_refused(self):
        for _ in range(3):
            os.unlink(self.path)
            os.symlink(self.secret, self.path)
            e = self.assertRaises(errors.BadNameError, self.read_source)
            self.assertIn("is a symlink", str(e))
            self.assertEqual(errors.Code.BAD_NAME, e.code)

    def test_other_file_is_refused(self):
        # A hard link to another file, or a copy renamed over it.
        os.unlink(self.path)
        os.link(self.secret, self.path)
        e = self.assertRaises(dataset.SourceChanged, self.read_source)
        self.assertIn("replaced by another file", str(e))
        self.assertEqual(errors.Code.SOURCE_CHANGED, e.code)

    def test_swapped_directory_is_refused(self):
        moved = os.path.join(self.dir, "moved")
        sub = os.path.join(self.dir, "sub")
        os.makedirs(sub)
        os.rename(self.path, os.path.join(sub, "f"))
        self.spec = dataset.spec_for_path(os.path.join(sub, "f"), "f")
        os.rename(sub, moved)
        other = os.path.join(self.dir, "other")
        os.makedirs(other)
        os.link(self.secret, os.path.join(other, "f"))
        os.symlink(other, sub)
        self.assertRaises(dataset.SourceChanged, self.read_source)

    def test_not_a_regular_file(self):
        os.unlink(self.path)
        os.mkfifo(self.path)
        e = self.assertRaises(errors.BadNameError, self.read_source)
        self.assertIn("not a regular file", str(e))

    def test_changes(self):
        with open(self.path, "r+b") as f:
            f.write(b"D")
        os.utime(self.path, ns=(self.spec.mtime_ns, self.spec.mtime_ns))
        st = os.stat(self.path)
        # Same size and mtime, but ctime moved: the content may differ.
        self.assertEqual(["ctime"], dataset.changes(self.spec, st))
        os.utime(self.path, ns=(1, 1))
        self.assertEqual(["mtime", "ctime"],
                         dataset.changes(self.spec, os.stat(self.path)))
        with open(self.path, "ab") as f:
            f.write(b"more")
        self.assertEqual(["size", "mtime", "ctime"],
                         dataset.changes(self.spec, os.stat(self.path)))
        dataset.bind(self.spec, os.stat(self.path))
        self.assertEqual(["size"], dataset.changes(self.spec,
                                                   os.stat(self.path)))

    def test_growing_file_pins_identity_only(self):
        st = os.stat(self.path)
        g = dataset.growing_spec(self.path, "f", 100, st=st)
        with open(self.path, "ab") as f:
            f.write(b"grown")
        fd, st2 = dataset.open_source(g)
        os.close(fd)
        self.assertEqual(st.st_size + 5, st2.st_size)
        self.assertEqual([], dataset.changes(g, st2))
        os.unlink(self.path)
        os.link(self.secret, self.path)
        self.assertRaises(dataset.SourceChanged, dataset.open_source, g)
