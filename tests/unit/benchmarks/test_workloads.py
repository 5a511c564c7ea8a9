"""benchmarks.workloads: the data of datasets and images."""

import hashlib
import os
import shutil
import tempfile

from benchmarks import workloads

from tests.unit import testcase

MiB = 1 << 20


class DataTest(testcase.TestCase):
    def test_an_image_holds_what_a_dataset_file_holds(self):
        d = tempfile.mkdtemp(prefix="dtnm-bt-")
        self.addCleanup(shutil.rmtree, d, True)
        path = os.path.join(d, "f")
        size = 3 * MiB + 17
        workloads.write_file(path, size, 0)
        with open(path, "rb") as f:
            data = f.read()
        self.assertEqual(data, b"".join(workloads.image_chunks(size)))
        h = hashlib.sha512()
        self.assertEqual(data, b"".join(workloads.chunks(size, 0, hasher=h)))
        self.assertEqual(hashlib.sha512(data).hexdigest(), h.hexdigest())
        # Every MiB differs, and from another file's.
        mibs = [data[i:i + MiB] for i in range(0, 3 * MiB, MiB)]
        other = b"".join(workloads.chunks(MiB, 1))
        self.assertEqual(4, len(set(mibs + [other])))

    def test_a_sparse_image_has_its_pieces_and_zeros_elsewhere(self):
        layout = [(0, MiB + 5), (3 * MiB, 100), (8 * MiB - 50, 50)]
        h = hashlib.sha512()
        chunks = list(workloads.image_chunks(8 * MiB, layout, hasher=h))
        self.assertLessEqual(max(len(c) for c in chunks), MiB)
        image = b"".join(chunks)
        self.assertEqual(8 * MiB, len(image))
        self.assertEqual(hashlib.sha512(image).hexdigest(), h.hexdigest())
        for i, (off, n) in enumerate(layout):
            self.assertEqual(b"".join(workloads.chunks(n, i + 1)),
                             image[off:off + n])
        self.assertEqual(bytes(3 * MiB - MiB - 5), image[MiB + 5:3 * MiB])
