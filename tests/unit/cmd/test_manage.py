"""dtn-migrate-manage: the nfs commands (no bus) and bus set-up."""

import io
import json
import os
import subprocess
import sys
import tempfile
from unittest import mock

import testtools

from dtn_migrate.cmd import manage
from dtn_migrate import config

MiB = 1 << 20

GOOD = ("rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,hard,"
        "proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=10.20.0.5,"
        "local_lock=none,addr=10.20.0.9")
MOUNTINFO = (
    "22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n"
    "40 22 0:52 / /mnt/dtn-staging rw,relatime shared:30 - nfs4 "
    "dtn1:/export/staging " + GOOD + "\n"
    "41 22 0:53 / /mnt/small rw,relatime shared:31 - nfs dtn2:/export/v3 "
    "rw,sync,vers=3,rsize=1048576,wsize=262144,namlen=255,hard,proto=tcp,"
    "timeo=600,retrans=2,sec=sys,mountaddr=10.20.0.10,mountvers=3,"
    "mountport=20048,mountproto=udp,local_lock=none,addr=10.20.0.10\n")


class ManageTestCase(testtools.TestCase):
    def setUp(self):
        super().setUp()
        self.addCleanup(config.CONF.reset)
        self.mountinfo = self.write(MOUNTINFO)

    def write(self, text):
        f = tempfile.NamedTemporaryFile("w", delete=False)
        f.write(text)
        f.close()
        self.addCleanup(os.unlink, f.name)
        return f.name

    def run_main(self, *args, conf=""):
        argv = ["dtn-migrate-manage", "--config-file", self.write(conf)]
        out, err = io.StringIO(), io.StringIO()
        with mock.patch.object(sys, "argv", argv + list(args)), \
                mock.patch.object(sys, "stdout", out), \
                mock.patch.object(sys, "stderr", err), \
                mock.patch.object(manage.rpc, "init") as init:
            e = self.assertRaises(SystemExit, manage.main)
        config.CONF.reset()
        self.rpc_init = init
        return e.code, out.getvalue(), err.getvalue()


class TestNfsAdvise(ManageTestCase):
    def test_text(self):
        rc, out, _ = self.run_main(
            "nfs", "advise", "--link", "10gbit", "--server", "dtn1",
            "--export", "/export/staging", "--client", "controller1",
            "--mount-point", "/mnt/dtn-staging")
        self.assertEqual(0, rc)
        self.assertIn(
            "mount -t nfs -o vers=4.2,proto=tcp,rsize=1048576,"
            "wsize=1048576,async,hard,timeo=600,retrans=2,nconnect=2 "
            "dtn1:/export/staging /mnt/dtn-staging\n", out)
        self.assertIn("/export/staging controller1(rw,async,"
                      "no_subtree_check,root_squash,sec=sys)\n", out)
        self.assertIn("MaxWrite = 1048576;", out)
        self.assertIn("NFS_Commit = false;", out)
        self.assertIn("net.ipv4.tcp_wmem", out)
        self.assertFalse(self.rpc_init.called)

    def test_json_and_options(self):
        rc, out, _ = self.run_main(
            "nfs", "advise", "--link", "1gbit", "--rtt", "40",
            "--nfs-version", "3", "--server-sync", "--client", "c1",
            "--json")
        self.assertEqual(0, rc)
        d = json.loads(out)
        self.assertEqual(10 ** 9, d["link_rate"])
        self.assertEqual(5000000, d["bdp_bytes"])
        self.assertEqual(16 * MiB, d["tcp_buffer_bytes"])
        self.assertIn("vers=3", d["mount_options"])
        self.assertEqual("/export/staging c1(rw,sync,no_subtree_check,"
                         "root_squash,sec=sys)", d["exports_line"])

    def test_defaults_from_the_configuration(self):
        rc, out, _ = self.run_main(
            "nfs", "advise", "--link", "25gbit", "--json",
            conf="[staging]\npath = /srv/staging\n"
                 "url = nfs://dtn7.example.org/export/images"
                 "?nfsport=2049&mountport=20048\n")
        self.assertEqual(0, rc)
        d = json.loads(out)
        self.assertEqual(("dtn7.example.org", "/export/images",
                          "/srv/staging"),
                         (d["server"], d["export"], d["mount_point"]))
        self.assertTrue(d["mount_command"].endswith(
            " dtn7.example.org:/export/images /srv/staging"))
        self.assertEqual(5, d["nconnect"])

    def test_builtin_defaults(self):
        rc, out, _ = self.run_main("nfs", "advise", "--link", "1e9",
                                   "--json")
        d = json.loads(out)
        self.assertEqual(("dtn", "/export/staging", "/mnt/dtn-staging"),
                         (d["server"], d["export"], d["mount_point"]))

    def test_bad_link(self):
        for link in ("10GB", "fast", "0"):
            rc, out, err = self.run_main("nfs", "advise", "--link", link)
            self.assertEqual(2, rc, link)
            self.assertIn("link rate", err)
            self.assertEqual("", out)

    def test_bad_rtt(self):
        rc, _, err = self.run_main("nfs", "advise", "--link", "1gbit",
                                   "--rtt", "-1")
        self.assertEqual(2, rc)
        self.assertIn("round-trip", err)

    def test_link_is_required(self):
        rc, _, _ = self.run_main("nfs", "advise")
        self.assertEqual(2, rc)


class TestNfsCheck(ManageTestCase):
    def check(self, *args, conf=""):
        rc, out, err = self.run_main("nfs", "check", "--mountinfo",
                                     self.mountinfo, *args, conf=conf)
        self.assertFalse(self.rpc_init.called)
        return rc, json.loads(out)

    def test_on_profile(self):
        rc, d = self.check("/mnt/dtn-staging/images")
        self.assertEqual(0, rc)
        self.assertEqual("ok", d["status"])
        self.assertEqual([], d["deviations"])
        self.assertEqual("dtn1:/export/staging", d["mount"]["source"])
        self.assertEqual(MiB, d["mount"]["wsize"])
        self.assertEqual(MiB, d["profile"]["min_wsize"])
        self.assertTrue(any("not visible" in n for n in d["notes"]))

    def test_default_path_is_the_staging_path(self):
        rc, d = self.check()
        self.assertEqual(("/mnt/dtn-staging", 0), (d["path"], rc))
        rc, d = self.check(conf="[staging]\npath = /mnt/small/x\n")
        self.assertEqual(("/mnt/small/x", 1), (d["path"], rc))

    def test_deviations(self):
        rc, d = self.check("/mnt/small")
        self.assertEqual(1, rc)
        self.assertEqual("deviations", d["status"])
        self.assertEqual(2, len(d["deviations"]))
        self.assertTrue(d["mount"]["sync"])
        self.assertTrue(any("mount_check=warn" in n for n in d["notes"]))

    def test_profile_from_the_configuration(self):
        rc, d = self.check("/mnt/small", conf="[staging]\nmin_wsize = 0\n"
                                              "require_async = false\n"
                                              "mount_check = refuse\n")
        self.assertEqual((0, []), (rc, d["deviations"]))
        self.assertEqual(0, d["profile"]["min_wsize"])

    def test_not_nfs(self):
        rc, d = self.check("/var/tmp/x")
        self.assertEqual(3, rc)
        self.assertEqual("not_nfs", d["status"])
        self.assertIsNone(d["mount"])
        self.assertIn("is not on NFS", d["error"])
        self.assertEqual([], d["notes"])
        rc, d = self.check("/var/tmp/x",
                           conf="[staging]\nallow_local = true\n")
        self.assertEqual(3, rc)
        self.assertIn("allow_local", d["notes"][0])

    def test_this_machine(self):
        rc, out, _ = self.run_main("nfs", "check", tempfile.gettempdir())
        self.assertEqual(3, rc)
        self.assertEqual("not_nfs", json.loads(out)["status"])


class TestBus(ManageTestCase):
    def test_transfer_commands_still_use_the_bus(self):
        api = mock.Mock()
        api.list_transfers.return_value = [{"transfer_id": "t1"}]
        with mock.patch.object(manage, "_api", return_value=api), \
                mock.patch.object(manage.rpc, "cleanup") as cleanup:
            rc, out, _ = self.run_main("transfer", "list", "--host", "dtn1")
        self.assertEqual(0, rc)
        self.assertTrue(self.rpc_init.called)
        self.assertTrue(cleanup.called)
        api.list_transfers.assert_called_once_with({}, "dtn1")
        self.assertEqual([{"transfer_id": "t1"}], json.loads(out))


class TestSubprocess(testtools.TestCase):
    def test_entry_point_without_a_bus(self):
        # An unreachable bus: the nfs commands must not touch it.
        conf = tempfile.NamedTemporaryFile("w", delete=False)
        conf.write("[DEFAULT]\ntransport_url = rabbit://u:p@192.0.2.1:1/\n")
        conf.close()
        self.addCleanup(os.unlink, conf.name)
        code = ("import sys; from dtn_migrate.cmd import manage; "
                "sys.argv[0] = 'dtn-migrate-manage'; manage.main()")
        proc = subprocess.run(
            [sys.executable, "-c", code, "--config-file", conf.name, "nfs",
             "advise", "--link", "10gbit", "--json"],
            capture_output=True, text=True, timeout=60)
        self.assertEqual(0, proc.returncode, proc.stderr)
        self.assertEqual(2, json.loads(proc.stdout)["nconnect"])
