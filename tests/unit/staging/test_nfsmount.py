"""NFS mount inspection, the profile check and the mount advice.

The kernel of the test machines has no NFS client, so mounts come from
mountinfo samples written the way Linux prints them: per-mount options
before " - ", then the file system type, the source and the super
options (the NFS client's show_options, with a leading "sync" from the
superblock flags for a sync mount).
"""

import json
import logging
import os
import tempfile

import fixtures

from dtn_migrate.staging import backend
from dtn_migrate.staging import nfsmount

from tests.unit import testcase

MiB = 1 << 20

V42 = ("rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,"
       "nconnect=4,timeo=600,retrans=2,sec=sys,clientaddr=10.20.0.5,"
       "local_lock=none,addr=10.20.0.9")

MOUNTINFO = "\n".join([
    "22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 "
    "rw,discard,errors=remount-ro",
    "25 22 0:23 / /dev/shm rw,nosuid,nodev shared:3 - tmpfs tmpfs "
    "rw,size=8151220k,inode64",
    # Tuned NFSv4.2, as advised.
    "40 22 0:52 / /mnt/dtn-staging rw,relatime shared:30 - nfs4 "
    "dtn1:/export/staging " + V42,
    # NFSv3, sync client, wsize capped by the server.
    "41 22 0:53 / /mnt/v3-sync rw,relatime shared:31 - nfs "
    "dtn2:/export/v3 rw,sync,vers=3,rsize=1048576,wsize=262144,namlen=255,"
    "hard,proto=tcp,timeo=600,retrans=2,sec=sys,mountaddr=10.20.0.10,"
    "mountvers=3,mountport=20048,mountproto=udp,local_lock=none,"
    "addr=10.20.0.10",
    # NFSv3 over UDP, soft.
    "42 22 0:54 / /mnt/udp rw,relatime shared:32 - nfs dtn3:/export/old "
    "rw,vers=3,rsize=32768,wsize=32768,namlen=255,soft,proto=udp,timeo=11,"
    "retrans=3,sec=sys,mountaddr=10.20.0.11,mountvers=3,mountport=20048,"
    "mountproto=udp,local_lock=none,addr=10.20.0.11",
    # NFSv4.1 on a path with a space, IPv6 server, noac.
    "43 22 0:55 / /srv/dtn\\040staging rw,noatime shared:33 - nfs4 "
    "[fd00::9]:/export/with\\040space rw,vers=4.1,rsize=524288,"
    "wsize=524288,namlen=255,acregmin=0,acregmax=0,acdirmin=0,acdirmax=0,"
    "hard,noac,proto=tcp6,timeo=600,retrans=2,sec=sys,clientaddr=fd00::5,"
    "lookupcache=none,local_lock=none,addr=fd00::9",
    # A bind mount of a subdirectory of the tuned export.
    "44 22 0:52 /images /var/lib/glance/dtn rw,relatime shared:30 - nfs4 "
    "dtn1:/export/staging " + V42,
    # An NFS mount with a tmpfs and a same-server NFS mount below it.
    "45 22 0:56 / /mnt/nested rw,relatime shared:34 - nfs4 "
    "dtn1:/export/nested " + V42,
    "46 45 0:60 / /mnt/nested/scratch rw,relatime shared:40 - tmpfs tmpfs "
    "rw,size=1048576k,inode64",
    "47 45 0:57 / /mnt/nested/archive rw,relatime shared:41 - nfs4 "
    "dtn1:/export/archive " + V42,
    # A local disk mounted over an NFS mount point.
    "48 22 0:58 / /mnt/over rw,relatime shared:35 - nfs4 dtn1:/export/over "
    + V42,
    "49 48 253:2 / /mnt/over rw,relatime shared:36 - xfs /dev/vdb "
    "rw,attr2,inode64,logbufs=8,logbsize=32k,noquota",
    # Read-only NFS over RDMA.
    "50 22 0:59 / /mnt/rdma ro,relatime shared:37 - nfs4 dtn1:/export/ro "
    "ro,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,hard,proto=rdma,"
    "port=20049,timeo=600,retrans=2,sec=sys,clientaddr=10.30.0.5,"
    "local_lock=none,addr=10.30.0.9",
    # Older kernels: version from minorversion, or not shown at all.
    "51 22 0:61 / /mnt/old4 rw,relatime shared:38 - nfs4 dtn1:/export/o4 "
    "rw,vers=4,minorversion=1,rsize=1048576,wsize=1048576,hard,proto=tcp,"
    "timeo=600,retrans=2,sec=sys,addr=10.20.0.9",
    "52 22 0:62 / /mnt/novers rw,relatime shared:39 - nfs dtn1:/export/nv "
    "rw,rsize=1048576,wsize=1048576,hard,proto=tcp,timeo=600,retrans=2,"
    "addr=10.20.0.9",
    "53 22 0:63 / /mnt/novers4 rw,relatime shared:42 - nfs4 dtn1:/ "
    "rw,rsize=1048576,wsize=1048576,hard,proto=tcp,timeo=600,retrans=2,"
    "addr=10.20.0.9",
    "54 22 0:64 / /net rw,relatime shared:43 - autofs /etc/auto.net "
    "rw,fd=7,pgrp=1,timeout=300,minproto=5,maxproto=5,indirect",
    # actimeo as some kernels print it, softerr.
    "55 22 0:65 / /mnt/softerr rw,relatime shared:44 - nfs4 "
    "dtn1:/export/se rw,vers=4.2,rsize=1048576,wsize=1048576,softerr,"
    "proto=tcp,timeo=50,retrans=2,actimeo=30,addr=10.20.0.9",
]) + "\n"


def write_mountinfo(test, text=MOUNTINFO):
    f = tempfile.NamedTemporaryFile("w", suffix=".mountinfo", delete=False)
    f.write(text)
    f.close()
    test.addCleanup(os.unlink, f.name)
    return f.name


class TestInspect(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.mountinfo = write_mountinfo(self)

    def inspect(self, path):
        return nfsmount.inspect(path, self.mountinfo)

    def test_tuned_v42(self):
        m = self.inspect("/mnt/dtn-staging/images/a.qcow2")
        self.assertEqual("/mnt/dtn-staging/images/a.qcow2", m.path)
        self.assertEqual("/mnt/dtn-staging", m.mount_point)
        self.assertEqual("dtn1:/export/staging", m.source)
        self.assertEqual("dtn1", m.server)
        self.assertEqual("/export/staging", m.export)
        self.assertEqual("/", m.root)
        self.assertEqual("nfs4", m.fstype)
        self.assertEqual("4.2", m.version)
        self.assertEqual((4, 2), m.version_tuple)
        self.assertEqual((MiB, MiB), (m.rsize, m.wsize))
        self.assertFalse(m.sync)
        self.assertFalse(m.noac)
        self.assertFalse(m.read_only)
        self.assertEqual("tcp", m.proto)
        self.assertTrue(m.hard)
        self.assertEqual("hard", m.mode)
        self.assertEqual((600, 2, 4), (m.timeo, m.retrans, m.nconnect))
        self.assertIsNone(m.actimeo)
        self.assertIsNone(m.lookupcache)
        self.assertIn("clientaddr=10.20.0.5", m.options)
        self.assertIn("relatime", m.options)
        self.assertEqual((), m.submounts)
        self.assertEqual([], nfsmount.check(m))

    def test_mount_point_itself(self):
        m = self.inspect("/mnt/dtn-staging")
        self.assertEqual("/mnt/dtn-staging", m.mount_point)
        self.assertEqual([], nfsmount.check(m))

    def test_v3_sync_small_wsize(self):
        m = self.inspect("/mnt/v3-sync/x")
        self.assertEqual(("nfs", "3", "dtn2", "/export/v3"),
                         (m.fstype, m.version, m.server, m.export))
        self.assertTrue(m.sync)
        self.assertEqual((MiB, 262144), (m.rsize, m.wsize))
        deviations = nfsmount.check(m)
        self.assertEqual(2, len(deviations), deviations)
        self.assertIn("wsize=262144 is below 1048576", deviations[0])
        self.assertIn("max_block_size", deviations[0])
        self.assertIn("MaxWrite", deviations[0])
        self.assertIn("sync", deviations[1])

    def test_udp_soft(self):
        m = self.inspect("/mnt/udp/x")
        self.assertEqual(("udp", "soft", False, 11),
                         (m.proto, m.mode, m.hard, m.timeo))
        text = "\n".join(nfsmount.check(m))
        self.assertIn("proto=udp", text)
        self.assertIn("rsize=32768", text)
        self.assertIn("wsize=32768", text)
        self.assertIn("soft mount", text)
        self.assertEqual(4, len(nfsmount.check(m)))

    def test_escaped_spaces_ipv6_noac(self):
        m = self.inspect("/srv/dtn staging/images")
        self.assertEqual("/srv/dtn staging", m.mount_point)
        self.assertEqual("[fd00::9]:/export/with space", m.source)
        self.assertEqual(("fd00::9", "/export/with space"),
                         (m.server, m.export))
        self.assertEqual(("4.1", "tcp6", "none"),
                         (m.version, m.proto, m.lookupcache))
        self.assertTrue(m.noac)
        self.assertFalse(m.sync)
        deviations = nfsmount.check(m)
        self.assertEqual(3, len(deviations), deviations)
        self.assertTrue(any("noac" in d for d in deviations))

    def test_bind_mount_of_a_subdirectory(self):
        m = self.inspect("/var/lib/glance/dtn/a.raw")
        self.assertEqual("/var/lib/glance/dtn", m.mount_point)
        self.assertEqual("dtn1:/export/staging", m.source)
        self.assertEqual("/images", m.root)
        self.assertEqual([], nfsmount.check(m))

    def test_nested_mounts(self):
        m = self.inspect("/mnt/nested")
        self.assertEqual(
            (("/mnt/nested/scratch", "tmpfs", "tmpfs"),
             ("/mnt/nested/archive", "nfs4", "dtn1:/export/archive")),
            m.submounts)
        deviations = nfsmount.check(m)
        self.assertEqual(1, len(deviations), deviations)
        self.assertIn("/mnt/nested/scratch (tmpfs tmpfs)", deviations[0])
        self.assertNotIn("archive", deviations[0])
        allowed = nfsmount.Profile(allow_submounts=True)
        self.assertEqual([], nfsmount.check(m, allowed))
        # Deeper paths are on the nested file systems.
        e = self.assertRaises(backend.BadMount, self.inspect,
                              "/mnt/nested/scratch/x")
        self.assertIn("tmpfs", str(e))
        self.assertIn("is the DTN export mounted?", str(e))
        m = self.inspect("/mnt/nested/archive/x")
        self.assertEqual("/export/archive", m.export)
        self.assertEqual((), m.submounts)

    def test_sibling_with_common_prefix_is_not_below(self):
        m = self.inspect("/mnt/nested")
        self.assertNotIn("/mnt/nestedX", [s[0] for s in m.submounts])
        self.assertRaises(backend.BadMount, self.inspect, "/mnt/nestedX")

    def test_local_disk_over_nfs(self):
        e = self.assertRaises(backend.BadMount, self.inspect, "/mnt/over/x")
        self.assertIn("xfs /dev/vdb mounted at /mnt/over", str(e))

    def test_not_nfs(self):
        e = self.assertRaises(backend.BadMount, self.inspect,
                              "/home/stack/images")
        self.assertIn("/home/stack/images is not on NFS", str(e))
        self.assertIn("ext4 /dev/vda1 mounted at /", str(e))
        self.assertIn("is the DTN export mounted?", str(e))
        self.assertIsInstance(e, backend.StagingError)
        self.assertFalse(e.retryable)

    def test_unmounted_autofs(self):
        e = self.assertRaises(backend.BadMount, self.inspect, "/net/dtn1")
        self.assertIn("automount", str(e))

    def test_unreadable_mountinfo(self):
        e = self.assertRaises(backend.BadMount, nfsmount.inspect,
                              "/mnt/dtn-staging", "/nonexistent/mountinfo")
        self.assertIn("cannot read /nonexistent/mountinfo", str(e))

    def test_empty_mountinfo(self):
        path = write_mountinfo(self, "")
        self.assertRaises(backend.BadMount, nfsmount.inspect, "/x", path)

    def test_read_only_rdma(self):
        m = self.inspect("/mnt/rdma/x")
        self.assertEqual(("rdma", True), (m.proto, m.read_only))
        self.assertEqual(["mounted read-only: staging cannot write"],
                         nfsmount.check(m))
        self.assertEqual([], nfsmount.check(
            m, nfsmount.Profile(require_rw=False)))

    def test_versions_of_older_kernels(self):
        self.assertEqual("4.1", self.inspect("/mnt/old4").version)
        self.assertEqual("3", self.inspect("/mnt/novers").version)
        m = self.inspect("/mnt/novers4")
        self.assertEqual(("4.0", "dtn1", "/"), (m.version, m.server,
                                                m.export))

    def test_softerr_actimeo_timeo(self):
        m = self.inspect("/mnt/softerr")
        self.assertEqual(("softerr", False, 30, 50),
                         (m.mode, m.hard, m.actimeo, m.timeo))
        self.assertEqual(1, len(nfsmount.check(m)))
        deviations = nfsmount.check(m, nfsmount.Profile(min_timeo=600))
        self.assertEqual(2, len(deviations))
        self.assertIn("timeo=50 is below 600", deviations[1])

    def test_to_dict_is_json(self):
        d = self.inspect("/srv/dtn staging").to_dict()
        again = json.loads(json.dumps(d))
        self.assertEqual("4.1", again["version"])
        self.assertIn("noac", again["options"])
        self.assertEqual([], again["submounts"])
        d = self.inspect("/mnt/nested").to_dict()
        self.assertEqual(["/mnt/nested/scratch", "tmpfs", "tmpfs"],
                         json.loads(json.dumps(d))["submounts"][0])

    def test_this_machine(self):
        # No NFS here: whatever / is, it is refused with a reason.
        e = self.assertRaises(backend.BadMount, nfsmount.inspect,
                              tempfile.gettempdir())
        self.assertIn("is not on NFS", str(e))


class TestProfile(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.mountinfo = write_mountinfo(self)

    def test_zero_minimum_disables_the_size_check(self):
        m = nfsmount.inspect("/mnt/v3-sync", self.mountinfo)
        profile = nfsmount.Profile(min_wsize=0)
        self.assertEqual(1, len(nfsmount.check(m, profile)))
        profile = nfsmount.Profile(min_wsize=0, require_async=False)
        self.assertEqual([], nfsmount.check(m, profile))
        profile = nfsmount.Profile(min_wsize=256 * 1024,
                                   require_async=False)
        self.assertEqual([], nfsmount.check(m, profile))

    def test_sizes_missing_from_mountinfo(self):
        text = ("40 22 0:52 / /mnt/x rw - nfs4 dtn:/e "
                "rw,vers=4.2,hard,proto=tcp\n")
        m = nfsmount.inspect("/mnt/x", write_mountinfo(self, text))
        self.assertIsNone(m.rsize)
        deviations = nfsmount.check(m)
        self.assertEqual(2, len(deviations))
        self.assertIn("rsize is not shown", deviations[0])

    def test_version_two(self):
        text = ("40 22 0:52 / /mnt/x rw - nfs dtn:/e rw,vers=2,"
                "rsize=8192,wsize=8192,hard,proto=tcp\n")
        m = nfsmount.inspect("/mnt/x", write_mountinfo(self, text))
        deviations = nfsmount.check(m, nfsmount.Profile(min_rsize=0,
                                                        min_wsize=0))
        self.assertEqual(1, len(deviations))
        self.assertIn("NFS version 2 is below 3", deviations[0])
        self.assertEqual([], nfsmount.check(
            m, nfsmount.Profile(min_version="2", min_rsize=0, min_wsize=0)))

    def test_minimum_version_41(self):
        m = nfsmount.inspect("/mnt/v3-sync", self.mountinfo)
        profile = nfsmount.Profile(min_version="4.1", min_wsize=0,
                                   require_async=False)
        self.assertEqual(1, len(nfsmount.check(m, profile)))
        m = nfsmount.inspect("/srv/dtn staging", self.mountinfo)
        self.assertFalse(any("version" in d
                             for d in nfsmount.check(m, profile)))


class TestVerify(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.mountinfo = write_mountinfo(self)
        self.log = self.useFixture(fixtures.FakeLogger(
            name=nfsmount.__name__, level=logging.INFO))

    def verify(self, path, **kw):
        return nfsmount.verify(path, mountinfo=self.mountinfo, **kw)

    def test_good_mount_passes_every_policy(self):
        for policy in ("refuse", "warn", "off"):
            m = self.verify("/mnt/dtn-staging", mount_check=policy)
            self.assertEqual("dtn1", m.server)
        self.assertEqual("", self.log.output)

    def test_refuse(self):
        e = self.assertRaises(backend.BadMount, self.verify,
                              "/mnt/v3-sync", mount_check="refuse")
        self.assertIn("/mnt/v3-sync (dtn2:/export/v3) is off the NFS "
                      "profile", str(e))
        self.assertIn("wsize=262144", str(e))

    def test_warn(self):
        m = self.verify("/mnt/v3-sync", mount_check="warn")
        self.assertEqual("dtn2", m.server)
        self.assertIn("wsize=262144", self.log.output)
        self.assertEqual(2, len(self.log.output.strip().splitlines()))

    def test_off(self):
        self.assertIsNotNone(self.verify("/mnt/udp", mount_check="off"))
        self.assertEqual("", self.log.output)

    def test_custom_profile(self):
        profile = nfsmount.Profile(min_wsize=0, require_async=False)
        self.assertIsNotNone(self.verify("/mnt/v3-sync", profile=profile,
                                         mount_check="refuse"))

    def test_local_path_refused_whatever_the_policy(self):
        for policy in ("refuse", "warn", "off"):
            self.assertRaises(backend.BadMount, self.verify, "/home/x",
                              mount_check=policy)

    def test_allow_local(self):
        self.assertIsNone(self.verify("/home/x", allow_local=True))
        self.assertIn("allow_local", self.log.output)
        # An NFS path is still checked.
        self.assertRaises(backend.BadMount, self.verify, "/mnt/udp",
                          allow_local=True, mount_check="refuse")

    def test_bad_policy(self):
        self.assertRaises(ValueError, self.verify, "/mnt/dtn-staging",
                          mount_check="maybe")


class TestParseRate(testcase.TestCase):
    def test_valid(self):
        cases = {
            "1gbit": 10 ** 9, "10gbit": 10 ** 10, "10Gbit": 10 ** 10,
            "25G": 25 * 10 ** 9, "400mbit": 4 * 10 ** 8,
            "100gbps": 10 ** 11, "1.5gbit/s": 15 * 10 ** 8,
            "1000000000": 10 ** 9, "1e9": 10 ** 9, " 1 tbit ": 10 ** 12,
            "100kbit": 10 ** 5,
        }
        for text, want in cases.items():
            got = nfsmount.parse_rate(text)
            self.assertEqual(want, got, text)
            self.assertIsInstance(got, int)

    def test_invalid(self):
        for text in ("", "fast", "10GB", "10gb", "1gbyte", "-1gbit",
                     "10xbit", "gbit", "999", "0", "inf", "1e999"):
            self.assertRaises(ValueError, nfsmount.parse_rate, text)

    def test_rate_text(self):
        self.assertEqual("10 Gbit/s", nfsmount.rate_text(10 ** 10))
        self.assertEqual("1.5 Gbit/s", nfsmount.rate_text(15 * 10 ** 8))
        self.assertEqual("400 Mbit/s", nfsmount.rate_text(4 * 10 ** 8))
        self.assertEqual("999 bit/s", nfsmount.rate_text(999))


class TestAdvise(testcase.TestCase):
    def test_one_gigabit_as_in_the_paper(self):
        a = nfsmount.advise(10 ** 9, rtt=0.0005, server="dtn1",
                            export="/export/staging", client="controller1",
                            mount_point="/mnt/dtn-staging", version="3")
        self.assertEqual(
            "mount -t nfs -o vers=3,proto=tcp,rsize=1048576,wsize=1048576,"
            "async,hard,timeo=600,retrans=2 dtn1:/export/staging "
            "/mnt/dtn-staging", a.mount_command)
        self.assertEqual(
            "dtn1:/export/staging /mnt/dtn-staging nfs vers=3,proto=tcp,"
            "rsize=1048576,wsize=1048576,async,hard,timeo=600,retrans=2,"
            "_netdev 0 0", a.fstab_line)
        self.assertEqual(
            "/export/staging controller1(rw,async,no_subtree_check,"
            "root_squash,sec=sys)", a.exports_line)
        self.assertEqual(1, a.nconnect)
        self.assertEqual(62500, a.bdp_bytes)
        # Small BDP: the Linux defaults suffice and are not lowered.
        self.assertEqual(nfsmount.LINUX_TCP_RMEM_MAX, a.tcp_buffer_bytes)
        self.assertEqual(16, a.nfsd_threads)
        self.assertIn("vers3 = y", a.nfs_conf)
        self.assertTrue(any("rpcbind" in n for n in a.notes))
        self.assertTrue(any("async export" in n for n in a.notes))

    def test_ganesha_block(self):
        a = nfsmount.advise(10 ** 10, client="10.20.0.0/24")
        g = a.ganesha_export
        self.assertTrue(g.startswith("EXPORT {"))
        self.assertTrue(g.endswith("}"))
        self.assertEqual(g.count("{"), g.count("}"))
        for line in ("Path = /export/staging;", "MaxRead = 1048576;",
                     "MaxWrite = 1048576;", "PrefWrite = 1048576;",
                     "NFS_Commit = false;", "Transports = TCP;",
                     "Protocols = 4;", "Clients = 10.20.0.0/24;",
                     "Access_Type = RW;"):
            self.assertIn(line, g)
        # ganesha honours COMMIT either way: a sync export does not
        # change it.
        self.assertIn("NFS_Commit = false;", nfsmount.advise(
            10 ** 10, server_sync=True).ganesha_export)

    def test_nconnect_grows_with_the_link(self):
        def nconnect(rate, **kw):
            return nfsmount.advise(rate, **kw).nconnect
        self.assertEqual(1, nconnect(10 ** 9))
        self.assertEqual(1, nconnect(5 * 10 ** 9))
        self.assertEqual(2, nconnect(10 ** 10))
        self.assertEqual(5, nconnect(25 * 10 ** 9))
        self.assertEqual(8, nconnect(40 * 10 ** 9))
        self.assertEqual(16, nconnect(10 ** 11))
        self.assertEqual(16, nconnect(4 * 10 ** 11))
        self.assertEqual(1, nconnect(10 ** 11, proto="rdma"))
        a = nfsmount.advise(10 ** 10)
        self.assertIn("nconnect=2", a.mount_options)
        self.assertTrue(any("5.3" in n for n in a.notes))
        self.assertFalse(any(o.startswith("nconnect")
                             for o in nfsmount.advise(10 ** 9)
                             .mount_options))

    def test_tcp_buffers_from_the_bdp(self):
        # 10 Gbit/s over 50 ms: BDP 62.5 MB, twice that rounds up to
        # 128 MiB.
        a = nfsmount.advise(10 ** 10, rtt=0.05)
        self.assertEqual(62500000, a.bdp_bytes)
        self.assertEqual(128 * MiB, a.tcp_buffer_bytes)
        self.assertEqual({
            "net.core.rmem_max": str(128 * MiB),
            "net.core.wmem_max": str(128 * MiB),
            "net.ipv4.tcp_rmem": "4096 131072 %d" % (128 * MiB),
            "net.ipv4.tcp_wmem": "4096 16384 %d" % (128 * MiB),
        }, a.sysctls)
        self.assertGreaterEqual(a.tcp_buffer_bytes, 2 * a.bdp_bytes)

    def test_rdma(self):
        a = nfsmount.advise(10 ** 11, proto="rdma")
        self.assertIn("proto=rdma", a.mount_options)
        self.assertIn("port=20049", a.mount_options)
        self.assertIn("rdma = y", a.nfs_conf)
        self.assertIn("Transports = TCP, RDMA;", a.ganesha_export)

    def test_server_sync(self):
        a = nfsmount.advise(10 ** 9, server_sync=True, client="c")
        self.assertEqual("/export/staging c(rw,sync,no_subtree_check,"
                         "root_squash,sec=sys)", a.exports_line)
        self.assertFalse(any("async export" in n for n in a.notes))
        # The client stays asynchronous either way.
        self.assertIn("async", a.mount_options)

    def test_invalid(self):
        self.assertRaises(ValueError, nfsmount.advise, 10)
        self.assertRaises(ValueError, nfsmount.advise, 10 ** 9, rtt=0)
        self.assertRaises(ValueError, nfsmount.advise, 10 ** 9,
                          version="2")
        self.assertRaises(ValueError, nfsmount.advise, 10 ** 9,
                          version="4.3")
        self.assertRaises(ValueError, nfsmount.advise, 10 ** 9,
                          proto="udp")
        for size in (2048, 2 * MiB, 3 * 4096):
            self.assertRaises(ValueError, nfsmount.advise, 10 ** 9,
                              io_size=size)

    def test_advice_passes_the_check(self):
        # Mount the advice as the kernel would show it: the profile holds.
        for kw in ({"version": "3"}, {"version": "4.2"},
                   {"version": "4.1", "proto": "rdma"}):
            a = nfsmount.advise(4 * 10 ** 10, server="dtn9",
                                export="/srv/export", **kw)
            super_opts = ",".join(["rw"] + [o for o in a.mount_options
                                            if o != "async"])
            fstype = "nfs" if kw["version"] == "3" else "nfs4"
            text = ("22 1 253:1 / / rw - ext4 /dev/vda1 rw\n"
                    "40 22 0:52 / %s rw,relatime - %s dtn9:/srv/export %s\n"
                    % (a.mount_point, fstype, super_opts))
            m = nfsmount.inspect(a.mount_point, write_mountinfo(self, text))
            self.assertEqual(kw["version"], m.version)
            self.assertEqual([], nfsmount.check(m), kw)

    def test_render_and_json(self):
        a = nfsmount.advise(10 ** 10, rtt=0.002, server="dtn1",
                            client="controller1")
        text = a.render()
        for piece in (a.mount_command, a.fstab_line, a.exports_line,
                      "threads = 16", "MaxWrite = 1048576;",
                      "sysctl -w net.core.rmem_max='%d'"
                      % a.tcp_buffer_bytes, "10 Gbit/s", "2 ms RTT",
                      "# Client controller1", "# DTN dtn1 with nfs-ganesha"):
            self.assertIn(piece, text)
        for line in text.splitlines():
            if line.startswith("#"):
                self.assertLessEqual(len(line), 79, line)
        d = json.loads(json.dumps(a.to_dict()))
        self.assertEqual(a.mount_command, d["mount_command"])
        self.assertEqual(2, d["nconnect"])
