"""All-zero blocks staged over a real NFS server (nfs-ganesha, libnfs)
are not written: the file is sized with SETATTR and reads zeros there,
also after a resumed copy over a file holding other bytes.
"""

import os

from dtn_migrate.staging import copy
from dtn_migrate.staging import stream as staging_stream
from tests.functional.staging import test_libnfs
from tests.functional.staging.test_copy import (
    MiB, chunks, local_bytes, options, sha)


def holey(pattern):
    """1 MiB per letter: 'D' random, '0' zeros."""
    return b"".join(os.urandom(MiB) if c == "D" else bytes(MiB)
                    for c in pattern)


class TestZerosOverLibnfs(test_libnfs.LibnfsTestCase):

    def test_zero_blocks_are_holes_and_read_back_as_zeros(self):
        srv = self.server()
        be = self.backend(srv)
        data = holey("D000000000D0000000000000000000D0")
        result = copy.stage(be, "img", chunks(data, 64 * 1024), len(data),
                            expected_sha512=sha(data), options=options())
        self.assertEqual(sha(data), result.sha512)
        self.assertEqual((3 * MiB, 29 * MiB),
                         (result.bytes_copied, result.zero_bytes))
        self.assertEqual(sha(data), sha(local_bytes(srv, "img")))
        st = os.stat(srv.local("img"))
        self.assertEqual(len(data), st.st_size)
        # Only the data blocks are allocated on the server's disk.
        self.assertLessEqual(st.st_blocks * 512, 4 * MiB)
        with staging_stream.open_staged(be, "img", len(data), sha(data),
                                        options=options()) as stream:
            self.assertEqual(sha(data), sha(b"".join(stream)))

    def test_resume_over_older_bytes_reads_zeros(self):
        srv = self.server()
        be = self.backend(srv)
        data = holey("DDDD0000DD000000")

        def broken():
            yield from chunks(data[:4 * MiB], MiB)
            raise IOError("cut")
        self.assertRaises(IOError, copy.stage, be, "img", broken(),
                          len(data), options=options())
        committed = copy.committed_bytes(be, "img", len(data))
        self.assertEqual(4 * MiB, committed)
        # What an earlier attempt (or another image) left beyond the
        # watermark, written through NFS.
        with be.open_write("img") as w:
            w.pwrite(b"\xee" * (len(data) - committed), committed)
            w.commit()
        result = copy.stage(be, "img",
                            lambda offset: chunks(data, MiB, offset),
                            len(data), expected_sha512=sha(data),
                            options=options())
        self.assertEqual((committed, 2 * MiB, 10 * MiB),
                         (result.start, result.bytes_copied,
                          result.zero_bytes))
        self.assertEqual(sha(data), sha(local_bytes(srv, "img")))
        with staging_stream.open_staged(be, "img", len(data), sha(data),
                                        options=options()) as stream:
            self.assertEqual(sha(data), sha(b"".join(stream)))


class TestResumeHashOverLibnfs(test_libnfs.LibnfsTestCase):

    def test_resume_reads_back_only_beyond_the_saved_sha512_state(self):
        srv = self.server()
        be = self.backend(srv)
        data = os.urandom(24 * MiB)
        opts = options(hash_checkpoint=8 * MiB)

        def broken():
            yield from chunks(data[:21 * MiB], MiB)
            raise IOError("cut")
        self.assertRaises(IOError, copy.stage, be, "img", broken(),
                          len(data), options=opts)
        committed = copy.committed_bytes(be, "img", len(data))
        self.assertEqual(21 * MiB, committed)
        read = []
        open_read = be.open_read

        def counting(name):
            r = open_read(name)
            pread = r.pread

            def counted(size, offset):
                got = pread(size, offset)
                if name == "img":
                    read.append(len(got))
                return got
            r.pread = counted
            return r
        be.open_read = counting
        result = copy.stage(be, "img",
                            lambda offset: chunks(data, MiB, offset),
                            len(data), expected_sha512=sha(data),
                            options=opts)
        self.assertEqual((committed, sha(data)),
                         (result.start, result.sha512))
        # The state saved at 16 MiB: only 5 MiB are read back.
        self.assertEqual(5 * MiB, sum(read))
        self.assertEqual(sha(data), sha(local_bytes(srv, "img")))
        copy.cleanup(be, "img")
        self.assertEqual([], sorted(os.listdir(srv.local())))
