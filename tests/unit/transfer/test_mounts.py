import tempfile


from dtn_migrate.transfer import mounts

from tests.unit import testcase

SAMPLE = """\
22 1 253:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard
25 22 0:21 / /dev/shm rw,nosuid,nodev shared:3 - tmpfs tmpfs rw,size=24684096k
30 22 0:40 / /srv/dtn\\040staging rw,relatime shared:9 - nfs4 dtn:/export \
rw,vers=4.2,rsize=1048576,wsize=1048576,proto=tcp
31 30 0:41 / /srv/dtn\\040staging/ram rw - tmpfs tmpfs rw
"""


class TestMountinfo(testcase.TestCase):
    def setUp(self):
        super().setUp()
        f = tempfile.NamedTemporaryFile("w", delete=False)
        f.write(SAMPLE)
        f.close()
        self.path = f.name

    def test_parse(self):
        ms = mounts.parse_mountinfo(SAMPLE)
        self.assertEqual(["/", "/dev/shm", "/srv/dtn staging",
                          "/srv/dtn staging/ram"],
                         [m.mount_point for m in ms])
        nfs = ms[2]
        self.assertEqual("nfs4", nfs.fstype)
        self.assertEqual("dtn:/export", nfs.source)
        self.assertIn("rsize=1048576", nfs.options)
        self.assertIn("relatime", nfs.options)

    def test_longest_prefix_wins(self):
        def fs(p):
            return mounts.mount_of(p, self.path).fstype
        self.assertEqual("ext4", fs("/srv"))
        self.assertEqual("nfs4", fs("/srv/dtn staging/images/a"))
        self.assertEqual("tmpfs", fs("/srv/dtn staging/ram/x"))
        self.assertEqual("ext4", fs("/srv/dtn stagingX"))
        self.assertEqual("tmpfs", fs("/dev/shm"))

    def test_this_machine(self):
        self.assertTrue(mounts.is_memory_fs("/dev/shm"))
        self.assertIsNone(mounts.mount_of("/", "/nonexistent/mountinfo"))
