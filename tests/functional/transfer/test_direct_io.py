"""Agents in separate processes on a disk file system: whole objects are
read and written with O_DIRECT, so a received file is bit-identical and
almost none of it stays in the page cache; with ``direct_io = false``
the same transfer leaves it cached (the measure of the first assertion).
"""

import os
import shutil
import subprocess
import tempfile

from tests.functional import base

MiB = base.MiB
OBJECT = 4 * MiB


def resident_bytes(path):
    """Bytes of ``path`` in the page cache (util-linux ``fincore``)."""
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output",
                          "RES", path], check=True, capture_output=True,
                         text=True, timeout=60).stdout
    return int(out.split()[0])


class TestDirectIO(base.FunctionalTestCase):

    def setUp(self):
        super().setUp()
        # A disk file system (tmpfs keeps every page resident anyway).
        self.disk = tempfile.mkdtemp(prefix="dtnm-direct-", dir="/var/tmp")
        self.addCleanup(shutil.rmtree, self.disk, True)

    def move(self, direct_io):
        tag = "on" if direct_io else "off"
        conf = dict(self.transfer_conf, direct_io=str(direct_io).lower())
        src, dst = self.pair(
            {"staging": os.path.join(self.disk, "src-" + tag),
             "transfer": conf},
            {"staging": os.path.join(self.disk, "dst-" + tag),
             "transfer": conf})
        sizes = {"aligned.raw": 64 * MiB, "tail.raw": 96 * MiB + 777}
        for i, (name, size) in enumerate(sorted(sizes.items())):
            base.make_file(os.path.join(src.staging, name), size, seed=i + 7)
        tid = self.start_transfer(src, dst, sorted(sizes))
        status = self.wait_for(src, tid)
        self.assertEqual("complete", status["state"], status.get("error"))
        received = {n: os.path.join(dst.staging, n) for n in sizes}
        # Before anything reads the copies back.
        resident = {n: resident_bytes(p) for n, p in received.items()}
        for name, path in received.items():
            self.assertSame(os.path.join(src.staging, name), path)
        return sizes, resident

    def test_received_files_bypass_the_page_cache(self):
        sizes, resident = self.move(True)
        for name, size in sizes.items():
            # At most the short last object, which goes through the
            # page cache, and a page or two of the hash's read-backs.
            self.assertLessEqual(resident[name], OBJECT + 2 * 4096,
                                 "%s: %d of %d bytes cached"
                                 % (name, resident[name], size))

    def test_off_leaves_them_cached(self):
        sizes, resident = self.move(False)
        for name, size in sizes.items():
            self.assertGreater(resident[name], size // 2,
                               "%s: %d of %d bytes cached"
                               % (name, resident[name], size))
