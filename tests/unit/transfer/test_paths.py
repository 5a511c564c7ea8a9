"""Tests of dtn_migrate.transfer.paths: names confined to a root."""

import os
import socket
import stat
import threading

import fixtures

from dtn_migrate.transfer import errors
from dtn_migrate.transfer import paths
from dtn_migrate.transfer.wire import protocol

from tests.unit import testcase


class CheckNameTest(testcase.TestCase):

    def test_accepts(self):
        cases = {
            "a": ["a"],
            "image.qcow2": ["image.qcow2"],
            "dir/sub/file": ["dir", "sub", "file"],
            "\u00fcn\u00efc\u00f8d\u00e9/\u6587\u4ef6": [
                "\u00fcn\u00efc\u00f8d\u00e9", "\u6587\u4ef6"],
            "with space/x y ": ["with space", "x y "],
            ".hidden": [".hidden"],
            "...": ["..."],
            "a..b/..c": ["a..b", "..c"],
            "a/.dtn-partial/x": ["a", ".dtn-partial", "x"],
            ".dtn-partialx": [".dtn-partialx"],
            "back\\slash": ["back\\slash"],
        }
        for name, parts in cases.items():
            self.assertEqual(parts, paths.check_name(name))

    def refuse(self, name):
        self.assertRaises(errors.BadNameError, paths.check_name, name)

    def test_empty_and_not_str(self):
        for name in ("", None, b"file", 5):
            self.refuse(name)

    def test_absolute(self):
        for name in ("/", "/etc/passwd", "//x"):
            self.refuse(name)

    def test_dotdot_anywhere(self):
        for name in ("..", "../x", "a/../b", "a/..", "a/b/../../.."):
            self.refuse(name)

    def test_dot_components(self):
        for name in (".", "./a", "a/./b", "a/."):
            self.refuse(name)

    def test_empty_components(self):
        for name in ("a//b", "a/", "a/b/", "a///"):
            self.refuse(name)

    def test_control_characters(self):
        for ch in ("\x00", "\x01", "\n", "\r", "\t", "\x1b", "\x1f",
                   "\x7f"):
            self.refuse("a%sb" % ch)
            self.refuse("dir/%s" % ch)

    def test_name_length(self):
        comp = "a" * 200
        name = "/".join([comp] * 20)  # 4019 bytes
        name += "/" + "b" * (protocol.MAX_NAME - len(name) - 1)
        self.assertEqual(protocol.MAX_NAME, len(name))
        self.assertEqual(21, len(paths.check_name(name)))
        self.refuse(name + "b")

    def test_name_length_counts_bytes(self):
        name = "/".join(["\u00e9" * 100] * 21)  # 200 bytes each
        self.assertLess(len(name), protocol.MAX_NAME)
        self.assertGreater(len(name.encode("utf-8")), protocol.MAX_NAME)
        self.refuse(name)

    def test_component_length(self):
        paths.check_name("d/" + "c" * protocol.MAX_COMPONENT)
        self.refuse("d/" + "c" * (protocol.MAX_COMPONENT + 1))
        self.refuse("c" * (protocol.MAX_COMPONENT + 1) + "/d")
        # 128 two-byte characters: 256 bytes.
        self.refuse("\u00e9" * 128)

    def test_reserved_partial_dir(self):
        for name in (".dtn-partial", ".dtn-partial/x",
                     ".dtn-partial/abc/f.part"):
            exc = self.assertRaises(errors.BadNameError, paths.check_name,
                                    name)
            self.assertIn(".dtn-partial", str(exc))
            self.assertEqual(errors.Code.BAD_NAME, exc.code)


class StagingRootTest(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.root = paths.StagingRoot(os.path.join(self.tmp, "root"))
        self.outside = os.path.join(self.tmp, "outside")
        os.mkdir(self.outside)

    def rpath(self, *parts):
        return os.path.join(self.root.path, *parts)

    def write(self, rel, data=b"data"):
        full = self.rpath(rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)
        return full

    def walk_outside(self):
        found = []
        for dirpath, dirnames, filenames in os.walk(self.outside):
            found.extend(dirnames + filenames)
        return found

    def test_root_created_and_resolved(self):
        os.symlink(self.tmp, os.path.join(self.tmp, "alias"))
        root = paths.StagingRoot(os.path.join(self.tmp, "alias", "r2"))
        self.assertTrue(os.path.isdir(os.path.join(self.tmp, "r2")))
        self.assertEqual(os.path.realpath(os.path.join(self.tmp, "r2")),
                         root.path)

    def test_open_dir_creates_nested(self):
        fd = self.root.open_dir(["a", "b", "c", "file"], create=True)
        try:
            self.assertEqual(os.stat(self.rpath("a", "b", "c")).st_ino,
                             os.fstat(fd).st_ino)
        finally:
            os.close(fd)
        self.assertFalse(os.path.exists(self.rpath("a", "b", "c", "file")))

    def test_open_dir_existing(self):
        os.makedirs(self.rpath("x", "y"))
        fd = self.root.open_dir(["x", "y", "f"], create=False)
        try:
            self.assertEqual(os.stat(self.rpath("x", "y")).st_ino,
                             os.fstat(fd).st_ino)
        finally:
            os.close(fd)

    def test_open_dir_single_component_is_root(self):
        fd = self.root.open_dir(["f"], create=False)
        try:
            self.assertEqual(os.stat(self.root.path).st_ino,
                             os.fstat(fd).st_ino)
        finally:
            os.close(fd)

    def test_open_dir_missing_without_create(self):
        self.assertRaises(FileNotFoundError, self.root.open_dir,
                          ["nope", "f"], False)
        self.assertFalse(os.path.exists(self.rpath("nope")))

    def test_symlink_to_outside_refused(self):
        os.symlink(self.outside, self.rpath("ln"))
        for create in (True, False):
            self.assertRaises(errors.BadNameError, self.root.open_dir,
                              ["ln", "sub", "f"], create)
            self.assertRaises(errors.BadNameError, self.root.open_dir,
                              ["ln", "f"], create)
        self.assertEqual([], self.walk_outside())

    def test_nested_symlink_to_outside_refused(self):
        os.makedirs(self.rpath("a", "b"))
        os.symlink(self.outside, self.rpath("a", "b", "ln"))
        self.assertRaises(errors.BadNameError, self.root.open_dir,
                          ["a", "b", "ln", "c", "f"], True)
        self.assertEqual([], self.walk_outside())

    def test_symlink_to_inside_refused(self):
        os.mkdir(self.rpath("real"))
        os.symlink(self.rpath("real"), self.rpath("ln"))
        os.symlink("real", self.rpath("rel"))
        for link in ("ln", "rel"):
            self.assertRaises(errors.BadNameError, self.root.open_dir,
                              [link, "sub", "f"], True)
        self.assertEqual([], os.listdir(self.rpath("real")))

    def test_dangling_symlink_not_followed(self):
        target = os.path.join(self.outside, "made")
        os.symlink(target, self.rpath("dang"))
        self.assertRaises(errors.BadNameError, self.root.open_dir,
                          ["dang", "f"], True)
        self.assertFalse(os.path.lexists(target))

    def test_file_component_refused(self):
        self.write("plain")
        self.assertRaises(errors.BadNameError, self.root.open_dir,
                          ["plain", "f"], True)

    def test_check_dirs(self):
        os.makedirs(self.rpath("real", "sub"))
        os.symlink(self.outside, self.rpath("ln"))
        self.root.check_dirs(["real", "sub", "f"])
        self.root.check_dirs(["missing", "sub", "f"])
        self.root.check_dirs(["f"])
        self.assertRaises(errors.BadNameError, self.root.check_dirs,
                          ["ln", "f"])
        self.assertRaises(errors.BadNameError, self.root.check_dirs,
                          ["ln", "missing", "f"])
        self.assertFalse(os.path.exists(self.rpath("missing")))
        self.assertEqual([], self.walk_outside())

    def test_open_read_regular(self):
        self.write("d/f", b"hello")
        fd = self.root.open_read("d/f")
        try:
            self.assertEqual(b"hello", os.read(fd, 100))
        finally:
            os.close(fd)

    def test_open_read_refuses_symlinks(self):
        self.write("real", b"in")
        secret = os.path.join(self.outside, "secret")
        with open(secret, "wb") as f:
            f.write(b"out")
        os.symlink(secret, self.rpath("out"))
        os.symlink("real", self.rpath("in"))
        os.symlink(self.outside, self.rpath("dirlink"))
        for name in ("out", "in", "dirlink/secret"):
            self.assertRaises(errors.BadNameError, self.root.open_read,
                              name)

    def test_open_read_refuses_directory(self):
        os.mkdir(self.rpath("dir"))
        self.assertRaises(errors.BadNameError, self.root.open_read, "dir")

    def test_open_read_refuses_fifo_without_blocking(self):
        fifo = self.rpath("fifo")
        os.mkfifo(fifo)
        result = []

        def run():
            try:
                result.append(self.root.open_read("fifo"))
            except Exception as exc:  # noqa: B902 - checked below
                result.append(exc)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        t.join(0.5)
        blocked = t.is_alive()
        if blocked:
            # Release the reader stuck in open(2).
            fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
            t.join(5)
            os.close(fd)
        for item in result:
            if isinstance(item, int):
                os.close(item)
        self.assertFalse(blocked, "open_read blocked on a FIFO")
        self.assertEqual(1, len(result))
        self.assertIsInstance(result[0], errors.BadNameError)

    def test_open_read_refuses_socket(self):
        sock = socket.socket(socket.AF_UNIX)
        self.addCleanup(sock.close)
        sock.bind(self.rpath("sock"))
        self.assertRaises((errors.BadNameError, OSError),
                          self.root.open_read, "sock")

    def test_open_read_missing(self):
        self.assertRaises(FileNotFoundError, self.root.open_read, "nope")
        self.assertRaises(FileNotFoundError, self.root.open_read, "no/pe")

    def test_open_read_bad_name(self):
        for name in ("../etc/passwd", "/etc/passwd", ".dtn-partial/x"):
            self.assertRaises(errors.BadNameError, self.root.open_read,
                              name)

    def test_stat(self):
        self.write("d/f", b"12345")
        st = self.root.stat("d/f")
        self.assertEqual(5, st.st_size)
        self.assertTrue(stat.S_ISREG(st.st_mode))
        self.assertTrue(stat.S_ISDIR(self.root.stat("d").st_mode))

    def test_stat_missing(self):
        self.assertIsNone(self.root.stat("nope"))
        self.assertIsNone(self.root.stat("no/pe"))
        self.write("file")
        self.assertIsNone(self.root.stat("file/under"))

    def test_stat_does_not_follow(self):
        with open(os.path.join(self.outside, "f"), "wb") as f:
            f.write(b"x" * 10)
        os.symlink(os.path.join(self.outside, "f"), self.rpath("ln"))
        os.symlink(self.outside, self.rpath("dirlink"))
        self.assertTrue(stat.S_ISLNK(self.root.stat("ln").st_mode))
        self.assertIsNone(self.root.stat("dirlink/f"))

    def test_stat_bad_name(self):
        self.assertRaises(errors.BadNameError, self.root.stat, "../x")

    def test_partial_dir(self):
        fd = self.root.partial_dir("ab12")
        try:
            path = self.rpath(paths.PARTIAL_DIR, "ab12")
            st = os.stat(path)
            self.assertEqual(st.st_ino, os.fstat(fd).st_ino)
            self.assertEqual(0, stat.S_IMODE(st.st_mode) & 0o077)
        finally:
            os.close(fd)
        fd = self.root.partial_dir("ab12")  # already there
        os.close(fd)

    def test_partial_dir_symlink_not_followed(self):
        os.symlink(self.outside, self.rpath(paths.PARTIAL_DIR))
        self.assertRaises((OSError, errors.BadNameError),
                          self.root.partial_dir, "ab12")
        self.assertEqual([], self.walk_outside())

    def test_remove_partial_dir(self):
        os.close(self.root.partial_dir("t1"))
        os.close(self.root.partial_dir("t2"))
        with open(self.rpath(paths.PARTIAL_DIR, "t2", "x.part"), "wb"):
            pass
        self.root.remove_partial_dir("t1")
        self.root.remove_partial_dir("t2")
        self.root.remove_partial_dir("never")
        self.assertEqual(["t2"],
                         os.listdir(self.rpath(paths.PARTIAL_DIR)))

    def test_remove_partial_dir_without_partial_root(self):
        self.root.remove_partial_dir("t1")
        self.assertFalse(os.path.exists(self.rpath(paths.PARTIAL_DIR)))


class ResolveSourceTest(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.root = paths.StagingRoot(os.path.join(self.tmp, "root"))
        os.makedirs(os.path.join(self.root.path, "d", "e"))
        self.outside = os.path.join(self.tmp, "outside")
        os.mkdir(self.outside)

    def test_relative_inside(self):
        self.assertEqual("d/f", paths.resolve_source(self.root, "d/f"))
        self.assertEqual("d/e/f",
                         paths.resolve_source(self.root, "d/./e/../e/f"))

    def test_absolute_inside(self):
        full = os.path.join(self.root.path, "d", "f")
        self.assertEqual("d/f", paths.resolve_source(self.root, full))

    def refuse(self, path):
        self.assertRaises(errors.BadNameError, paths.resolve_source,
                          self.root, path)

    def test_absolute_elsewhere(self):
        self.refuse("/etc/passwd")
        self.refuse(os.path.join(self.outside, "f"))

    def test_dotdot_escape(self):
        self.refuse("../outside/f")
        self.refuse("d/../../outside/f")
        self.refuse("..")

    def test_sibling_with_common_prefix(self):
        os.mkdir(self.root.path + "2")
        self.refuse(self.root.path + "2/f")
        self.refuse("../root2/f")

    def test_root_itself(self):
        self.refuse(".")
        self.refuse(self.root.path)
        self.refuse("d/..")

    def test_symlink_escaping(self):
        os.symlink(self.outside, os.path.join(self.root.path, "esc"))
        self.refuse("esc/f")
        os.symlink(os.path.join(self.outside, "f"),
                   os.path.join(self.root.path, "d", "fl"))
        self.refuse("d/fl")

    def test_symlink_inside_maps_to_target(self):
        os.symlink("d/e", os.path.join(self.root.path, "alias"))
        self.assertEqual("d/e/f", paths.resolve_source(self.root,
                                                       "alias/f"))

    def test_reserved_dir(self):
        self.refuse(".dtn-partial/x")


TID = "0123456789abcdef0123456789abcdef"
OTHER = "fedcba9876543210fedcba9876543210"
LEAVES = ("image.json", "image.data")


class ConfineTest(testcase.TestCase):
    """A session's names held to its own transfer (issue 36, item 5)."""

    def refuse(self, name, mode):
        self.assertRaises(errors.BadNameError, paths.confine, name, TID,
                          mode, LEAVES)

    def test_migration(self):
        for leaf in LEAVES:
            self.assertEqual([TID, leaf], paths.confine(
                "%s/%s" % (TID, leaf), TID, paths.MIGRATION, LEAVES))
        for name in ("%s/image.json" % OTHER, "%s/image.data" % OTHER,
                     "%s/other" % TID, "%s/d/image.json" % TID, TID,
                     "image.json", "../%s/image.json" % TID,
                     "/%s/image.json" % TID, "%s/../%s/image.json"
                     % (TID, OTHER), "%s/./image.json" % TID,
                     ".dtn-partial/%s/image.json" % TID,
                     "%s/image.json" % TID.upper()):
            self.refuse(name, paths.MIGRATION)

    def test_transfer(self):
        self.assertEqual([TID, "a", "b"], paths.confine(
            "%s/a/b" % TID, TID, paths.TRANSFER))
        for name in ("%s/image.json" % OTHER, TID, "a/b", "../x"):
            self.refuse(name, paths.TRANSFER)

    def test_any(self):
        for name in ("a/b", "%s/x" % TID, "%s/x" % TID[:31], "A" * 32):
            self.assertEqual(name.split("/"),
                             paths.confine(name, TID, paths.ANY))
        for name in ("%s/image.json" % OTHER, OTHER, "../x"):
            self.refuse(name, paths.ANY)


class PartialSweepTest(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.root = paths.StagingRoot(self.tmp)

    def test_usage_counts_files_and_partial_copies(self):
        os.makedirs(os.path.join(self.tmp, TID, "d"))
        for rel, size in (("%s/image.json" % TID, 10),
                          ("%s/d/x" % TID, 5), ("%s/y" % OTHER, 99)):
            os.makedirs(os.path.dirname(os.path.join(self.tmp, rel)),
                        exist_ok=True)
            with open(os.path.join(self.tmp, rel), "wb") as f:
                f.write(b"z" * size)
        pfd = self.root.partial_dir(TID)
        os.close(pfd)
        pdir = os.path.join(self.tmp, paths.PARTIAL_DIR, TID)
        with open(os.path.join(pdir, "k.part"), "wb") as f:
            f.truncate(1000)
        with open(os.path.join(pdir, "k.sha"), "wb") as f:
            f.write(b"s" * 50)
        os.symlink("/etc/passwd", os.path.join(self.tmp, TID, "link"))
        self.assertEqual((1015, 3), self.root.usage(TID))
        self.assertEqual((0, 0), self.root.usage("0" * 32))

    def test_remove_partial_only_touches_its_directory(self):
        os.close(self.root.partial_dir(TID))
        os.close(self.root.partial_dir(OTHER))
        pdir = os.path.join(self.tmp, paths.PARTIAL_DIR, TID)
        for name in ("a.part", "a.sha", "a.new"):
            open(os.path.join(pdir, name), "wb").close()
        os.makedirs(os.path.join(self.tmp, TID))
        final = os.path.join(self.tmp, TID, "image.data")
        open(final, "wb").close()
        self.assertEqual([TID, OTHER], self.root.partial_transfers())
        self.assertIsNotNone(self.root.partial_mtime(TID))
        self.assertEqual(3, self.root.remove_partial(TID))
        self.assertFalse(os.path.exists(pdir))
        self.assertTrue(os.path.exists(final))
        self.assertEqual([OTHER], self.root.partial_transfers())
        self.assertIsNone(self.root.partial_mtime(TID))
        self.assertEqual(0, self.root.remove_partial(TID))
