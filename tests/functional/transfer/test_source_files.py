"""The source agent sends only the files that were defined, and a file
changed between runs is sent again whole, never stitched (real agents,
shared by the class).
"""

import os

from tests.functional import base
from tests.functional.transfer import shared

MiB = base.MiB
MARK = b"SECRET-MARK-0123456789"


class TestSourceFiles(shared.SharedPairTestCase):
    names = ("src-files", "dst-files")
    transfer_conf = {"object_size": MiB, "streams": 2,
                     "reconnect_initial_interval": 0.1}

    def make(self, name, size, seed):
        path = os.path.join(self.src.staging, name)
        base.make_file(path, size, seed=seed)
        return path

    def start_and_cancel(self, files, percent=30, options=None):
        tid = self.start_transfer(self.src, self.dst, files,
                                  options=options or {"rate_limit": 16 * MiB})
        self.wait_for(self.src, tid,
                      until=lambda s: s.get("percent", 0) >= percent)
        self.api.cancel_transfer({}, self.src.name, tid)
        status = self.wait_for(self.src, tid)
        self.assertEqual("cancelled", status["state"])
        return tid

    def resume(self, tid):
        self.api.resume_transfer({}, self.src.name, tid)
        return self.wait_for(self.src, tid, timeout=120)

    def rewrite(self, path, seed):
        """New content of the same size, in place (same inode)."""
        size = os.path.getsize(path)
        base.make_file(path + ".new", size, seed=seed)
        with open(path + ".new", "rb") as src, open(path, "r+b") as dst:
            dst.write(src.read())
        os.unlink(path + ".new")

    def test_symlinks_swapped_in_between_runs_are_refused(self):
        secret = os.path.join(self.classdir, "secret")
        with open(secret, "wb") as f:
            # The size of the files it replaces.
            f.write((MARK * (16 * MiB // len(MARK) + 1))[:16 * MiB])
        names = ["swap-%d.raw" % i for i in range(3)]
        paths = [self.make(n, 16 * MiB, i) for i, n in enumerate(names)]
        tid = self.start_and_cancel(names, percent=10)
        for p in paths:
            os.rename(p, p + ".moved")
            os.symlink(secret, p)
        status = self.resume(tid)
        self.assertEqual("failed", status["state"])
        self.assertEqual(3, status["files_failed"])
        for f in status["files"]:
            self.assertIn("is a symlink", f["error"])
        for dirpath, _, files in os.walk(self.dst.staging):
            for n in files:
                with open(os.path.join(dirpath, n), "rb") as f:
                    self.assertNotIn(MARK, f.read(), n)

    def test_files_changed_between_runs_are_sent_again_whole(self):
        names = ["change-%d.raw" % i for i in range(2)]
        paths = [self.make(n, 16 * MiB, 10 + i) for i, n in enumerate(names)]
        tid = self.start_and_cancel(names, percent=40)
        for i, p in enumerate(paths):
            self.rewrite(p, 20 + i)
        status = self.resume(tid)
        self.assertEqual("complete", status["state"], status.get("error"))
        for n, p in zip(names, paths):
            self.assertSame(p, os.path.join(self.dst.staging, n))
        # Sent again once, whole: no stitched copy failing its sha512.
        self.assertNotIn("sending it again (", self.src.log_text())
        self.assertIn("changed since it was last sent", self.src.log_text())

    def test_xxh3_only_changed_file_is_never_stitched(self):
        path = self.make("xxh3.raw", 16 * MiB, 30)
        tid = self.start_and_cancel(["xxh3.raw"], percent=40, options={
            "rate_limit": 16 * MiB, "verify_sha512": False})
        self.rewrite(path, 31)
        status = self.resume(tid)
        self.assertEqual("complete", status["state"], status.get("error"))
        self.assertSame(path, os.path.join(self.dst.staging, "xxh3.raw"))
