"""The source reads only the files that were defined, and never stitches
a file together from old and new content (source and sink in one
process, over loopback TCP).
"""

import os
import threading
import time

from dtn_migrate.transfer import checksum
from dtn_migrate.transfer import dataset
from dtn_migrate.transfer.source import transfer as source
from tests.unit.transfer import test_engine as base
from tests.unit import utils as test_utils

KEY = base.KEY
MiB = base.MiB
MARK = b"SECRET-MARK-0123456789"


class SourceFilesTestCase(base.EngineTestCase):
    def setUp(self):
        super().setUp()
        self.secret = os.path.join(self.tmp, "secret")

    def write_secret(self, size):
        with open(self.secret, "wb") as f:
            f.write((MARK * (size // len(MARK) + 1))[:size])

    def assertNoSecretAtSink(self):
        for dirpath, _, names in os.walk(self.dst):
            for n in names:
                with open(os.path.join(dirpath, n), "rb") as f:
                    self.assertNotIn(MARK, f.read(), n)

    def resume(self, t, cfg=None):
        """The transfer as a new process would build it."""
        t.close()
        manifest = dataset.Manifest.load(os.path.join(self.state,
                                                      t.transfer_id))
        t2 = source.SourceTransfer(manifest, t.peer, cfg or t.cfg,
                                   self.state, "source")
        self.addCleanup(t2.close)
        return t2

    def run_until(self, t, percent):
        """Run ``t`` and cancel it once ``percent`` of it is done."""
        result = {}
        th = threading.Thread(target=lambda: result.update(t.run()))
        th.start()
        test_utils.wait_until(
            lambda: t.progress.snapshot()["percent"] >= percent or
            not th.is_alive(), 30, interval=0.01)
        t.cancel()
        th.join(30)
        self.assertEqual("cancelled", result["state"], result)
        return result

    def rewrite(self, name, seed):
        """New content of the same size, in place (same inode)."""
        path = os.path.join(self.src, name)
        size = os.path.getsize(path)
        base.write_file(path + ".new", size, seed)
        with open(path + ".new", "rb") as src, open(path, "r+b") as dst:
            dst.write(src.read())
        os.unlink(path + ".new")


class TestSwappedFiles(SourceFilesTestCase):
    def test_symlink_swapped_in_before_sending_is_refused(self):
        self.write_secret(1 * MiB)
        names = ["a%d" % i for i in range(5)] + ["ok"]
        for i, name in enumerate(names):
            base.write_file(os.path.join(self.src, name), 1 * MiB, i)
        server = self.start_sink()
        t = self.transfer(server.port, names)
        for name in names[:-1]:
            os.unlink(os.path.join(self.src, name))
            os.symlink(self.secret, os.path.join(self.src, name))
        status = self.run_transfer(t)
        self.assertEqual("failed", status["state"])
        self.assertEqual(1, status["files_done"])
        self.assertEqual(5, status["files_failed"])
        for f in status["files"][:-1]:
            self.assertIn("is a symlink", f["error"])
        self.assertSameFile("ok")
        self.assertNoSecretAtSink()

    def test_file_replaced_by_another_is_refused(self):
        self.write_secret(1 * MiB)
        base.write_file(os.path.join(self.src, "a"), 1 * MiB, 1)
        server = self.start_sink()
        t = self.transfer(server.port, ["a"])
        os.link(self.secret, os.path.join(self.src, "a.tmp"))
        os.replace(os.path.join(self.src, "a.tmp"),
                   os.path.join(self.src, "a"))
        status = self.run_transfer(t)
        self.assertEqual("failed", status["state"])
        self.assertIn("replaced by another file", status["error"])
        self.assertNoSecretAtSink()

    def test_symlink_swapped_in_between_runs_is_refused(self):
        self.write_secret(16 * MiB)
        base.write_file(os.path.join(self.src, "a"), 16 * MiB, 1)
        server = self.start_sink()
        t = self.transfer(server.port, ["a"],
                          cfg=self.cfg(rate_limit=16 * MiB))
        self.run_until(t, 30)
        os.rename(os.path.join(self.src, "a"), os.path.join(self.src, "b"))
        os.symlink(self.secret, os.path.join(self.src, "a"))
        status = self.run_transfer(self.resume(t))
        self.assertEqual("failed", status["state"])
        self.assertIn("is a symlink", status["error"])
        self.assertNoSecretAtSink()

    def growing(self, server, name, size, pin):
        """A transfer of a growing file; ``pin``: its device and inode
        are recorded when it is defined (else on its first open).
        """
        path = os.path.join(self.src, name)
        base.write_file(path, size, 3)
        if pin:
            fd = os.open(path, os.O_RDONLY)
            st = os.fstat(fd)
            os.close(fd)
            spec = dataset.growing_spec(path, name, size, st=st)
        else:
            spec = dataset.FileSpec(name, path, size, growing=True)
        t = source.SourceTransfer(
            dataset.Manifest.new("sink", [spec]),
            source.Peer("sink", "127.0.0.1", server.port, KEY),
            self.cfg(), self.state, "source")
        self.addCleanup(t.close)
        return path, t

    def assertGrowingSwapRefused(self, pin, swap, error):
        """A growing file swapped with ``swap(secret, path)`` after the
        transfer was defined fails with ``error``.
        """
        self.write_secret(1 * MiB)
        server = self.start_sink()
        path, t = self.growing(server, "grow", 1 * MiB, pin)
        os.unlink(path)
        swap(self.secret, path)
        status = self.run_transfer(t, timeout=20)
        self.assertEqual("failed", status["state"])
        self.assertIn(error, status["error"])
        self.assertNoSecretAtSink()

    def test_growing_file_swapped_for_a_symlink_is_refused(self):
        self.assertGrowingSwapRefused(False, os.symlink, "is a symlink")

    def test_growing_file_replaced_by_another_is_refused(self):
        self.assertGrowingSwapRefused(True, os.link,
                                      "replaced by another file")


class TestChangedFiles(SourceFilesTestCase):
    def cfg(self, **kw):
        kw.setdefault("rate_limit", 16 * MiB)
        kw.setdefault("hash_checkpoint_bytes", 1 * MiB)
        return super().cfg(**kw)

    def test_hash_checkpoint_of_old_content_is_not_resumed(self):
        base.write_file(os.path.join(self.src, "a"), 8 * MiB, 1)
        server = self.start_sink()
        t = self.transfer(server.port, ["a"], cfg=self.cfg(rate_limit=0))
        # A checkpoint of the first 4 MiB of the content as defined.
        h = checksum.ResumableSha512()
        with open(os.path.join(self.src, "a"), "rb") as f:
            h.update(f.read(4 * MiB))
        with open(os.path.join(t.hash_dir, "0.sha"), "wb") as f:
            f.write(h.save())
        self.rewrite("a", 2)
        status = self.run_transfer(t)
        self.assertEqual("complete", status["state"], status["error"])
        self.assertEqual(8 * MiB, status["bytes_sent"])
        self.assertSameFile("a")

    def test_changed_between_runs_is_sent_again_whole(self):
        # sha512 computed by the source (no hash given), once in the same
        # process and once in a new one.
        base.write_file(os.path.join(self.src, "a"), 16 * MiB, 1)
        server = self.start_sink()
        t = self.transfer(server.port, ["a"])
        self.run_until(t, 40)
        self.rewrite("a", 2)
        self.run_until(t, 30)        # same process, restarted cleanly
        self.rewrite("a", 3)
        t2 = self.resume(t)
        status = self.run_transfer(t2)
        self.assertEqual("complete", status["state"], status["error"])
        # Whole, once: no resume of old objects, no sha512 mismatch.
        self.assertEqual(16 * MiB, status["bytes_sent"])
        self.assertSameFile("a")

    def test_xxh3_only_is_never_stitched(self):
        cfg = self.cfg(verify_sha512=False)
        names = ["a", "b", "c"]
        for i, name in enumerate(names):
            base.write_file(os.path.join(self.src, name), 8 * MiB, i)
        server = self.start_sink()
        t = self.transfer(server.port, names, cfg=cfg)
        self.run_until(t, 50)
        for i, name in enumerate(names):
            self.rewrite(name, 10 + i)
        # Restarted during the recovery, then changed again.
        t = self.resume(t)
        self.run_until(t, 30)
        for i, name in enumerate(names):
            self.rewrite(name, 20 + i)
        status = self.run_transfer(self.resume(t))
        self.assertEqual("complete", status["state"], status["error"])
        for name in names:
            self.assertSameFile(name)

    def test_changed_while_being_sent_fails_then_restarts(self):
        for i, verify in enumerate((False, True, False)):
            name = "a%d" % i
            base.write_file(os.path.join(self.src, name), 16 * MiB, i)
            server = self.start_sink()
            t = self.transfer(server.port, [name],
                              cfg=self.cfg(verify_sha512=verify))
            result = {}
            th = threading.Thread(target=lambda: result.update(t.run()))
            th.start()
            while t.progress.snapshot()["percent"] < 30 and th.is_alive():
                time.sleep(0.01)
            self.rewrite(name, 10 + i)
            th.join(60)
            self.assertEqual("failed", result["state"])
            self.assertIn("changed while it was being sent",
                          result["error"])
            # The next run (as a resume builds it) sends it again whole.
            status = self.run_transfer(self.resume(t))
            self.assertEqual("complete", status["state"], status["error"])
            self.assertSameFile(name)

    def test_changed_file_with_a_given_hash_fails_after_one_send(self):
        base.write_file(os.path.join(self.src, "a"), 8 * MiB, 1)
        server = self.start_sink()
        t = self.transfer(server.port, ["a"], hashes={
            "a": base.sha512(os.path.join(self.src, "a"))})
        self.run_until(t, 40)
        self.rewrite("a", 2)
        status = self.run_transfer(self.resume(t))
        self.assertEqual("failed", status["state"])
        self.assertIn("no longer matches the sha512 given", status["error"])
        self.assertLessEqual(status["bytes_sent"], 8 * MiB)
        self.assertFalse(os.path.exists(os.path.join(self.dst, "a")))
