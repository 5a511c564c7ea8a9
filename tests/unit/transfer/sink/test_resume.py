"""The sink never resumes a hash checkpoint of other content."""

import hashlib
import os
import shutil
import tempfile


from dtn_migrate.transfer import bitmap
from dtn_migrate.transfer import checksum
from dtn_migrate.transfer import config
from dtn_migrate.transfer.sink import session as sinksession
from dtn_migrate.transfer.wire import protocol as P

from tests.unit import testcase

MiB = 1 << 20
KEY = hashlib.sha256(b"a").hexdigest()[:40]


class TestHashCheckpoint(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="dtnm-sinkresume-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.s = sinksession.SinkSession.__new__(sinksession.SinkSession)
        self.s.pdir = os.open(self.tmp, os.O_RDONLY | os.O_DIRECTORY)
        self.addCleanup(os.close, self.s.pdir)
        self.s.cfg = config.TransferConfig(min_free_bytes=0,
                                           object_size=1 * MiB)
        self.s.preallocate = False
        self.sidecar = os.path.join(self.tmp, KEY + ".sha")

    def old_copy(self):
        """A partial copy of the old content, and its hash checkpoint."""
        with open(os.path.join(self.tmp, KEY + ".part"), "wb") as f:
            f.write(b"o" * 4 * MiB)
        h = checksum.ResumableSha512()
        h.update(b"o" * 2 * MiB)
        with open(self.sidecar, "wb") as f:
            f.write(h.save())

    def new_file(self, flags, done=()):
        bits = bitmap.Bitmap(4)
        for i in done:
            bits.add(i)
        return P.NewFile(0, flags, 4 * MiB, 1, 0o644, 1 * MiB, bytes(64),
                         "a", bits.encode_runs())

    def test_restart_drops_the_checkpoint_before_the_copy(self):
        create = self.s._create
        crashing = []

        def crash_once(*args):
            if crashing:
                crashing.pop()
                raise OSError(5, "crashed while recreating the copy")
            return create(*args)
        self.patch(self.s, "_create", crash_once)
        for _ in range(3):
            self.old_copy()
            crashing.append(True)
            self.assertRaises(OSError, self.s._prepare,
                              self.new_file(P.FileFlags.RESTART), ["a"],
                              P.FileFlags.RESTART)
            self.assertFalse(os.path.exists(self.sidecar))
            # The crash came before the sink answered: a done set
            # announced now is the old content's, so the copy starts
            # again, and is hashed from 0.
            f, status = self.s._prepare(self.new_file(0, done=(0, 1)),
                                        ["a"], P.FileFlags(0))
            os.close(f.fd)
            self.assertEqual(P.FileStatus.RESET, status)
            self.assertEqual(0, f.hasher.offset)
