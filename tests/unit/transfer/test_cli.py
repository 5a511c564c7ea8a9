"""Tests of the dtn-migrate-transfer command line (parsing only)."""

import argparse
import io
import re
from unittest import mock


from dtn_migrate.transfer import cli
from dtn_migrate.transfer import config

from tests.unit import testcase

KiB, MiB, GiB, TiB = 1 << 10, 1 << 20, 1 << 30, 1 << 40


class SizeTest(testcase.TestCase):

    def test_valid(self):
        cases = {
            "100": 100, "0": 0, "4M": 4 * MiB, "4m": 4 * MiB,
            "1G": GiB, "512KiB": 512 * KiB, "512kib": 512 * KiB,
            "4MB": 4 * MiB, "4MiB": 4 * MiB, "2T": 2 * TiB,
            "100B": 100, " 8K ": 8 * KiB, "1.5K": 1536, "0.5M": MiB // 2,
            "1e3": 1000,
        }
        for text, want in cases.items():
            got = cli.size(text)
            self.assertEqual(want, got, text)
            self.assertIsInstance(got, int)

    def test_invalid(self):
        for text in ("", "abc", "M", "KiB", "4X", "4P", "4 MB extra",
                     "0x10", "4MM", "nan"):
            self.assertRaises(argparse.ArgumentTypeError, cli.size, text)

    def test_infinite(self):
        # int(float("inf")) raises OverflowError, not ValueError.
        for text in ("inf", "infinity", "1e400", "-inf"):
            self.assertRaises(argparse.ArgumentTypeError, cli.size, text)

    def test_negative(self):
        for text in ("-1", "-4M", "-0.5G"):
            self.assertRaises(argparse.ArgumentTypeError, cli.size, text)


class HostPortTest(testcase.TestCase):

    def test_valid(self):
        cases = {
            "dtn1.example.org:47100": ("dtn1.example.org", 47100),
            "10.0.0.1:0": ("10.0.0.1", 0),
            "[::1]:9000": ("::1", 9000),
            "[fe80::1]:1": ("fe80::1", 1),
            ":80": ("0.0.0.0", 80),
            "h:65535": ("h", 65535),
        }
        for text, want in cases.items():
            self.assertEqual(want, cli.host_port(text), text)

    def test_invalid(self):
        for text in ("host", "host:", "host:http", "host:-1", "host:1.5",
                     "", ":"):
            self.assertRaises(argparse.ArgumentTypeError, cli.host_port,
                              text)

    def test_port_out_of_range(self):
        for text in ("host:65536", "host:70000", "host:99999999"):
            self.assertRaises(argparse.ArgumentTypeError, cli.host_port,
                              text)


class ProgressLineTest(testcase.TestCase):

    def snap(self, **kw):
        s = {"bytes_total": MiB, "bytes_done": MiB // 2, "rate": 1024.0,
             "eta": 125.0}
        s.update(kw)
        return s

    def test_shape(self):
        line = cli.progress_line(self.snap())
        self.assertEqual("[" + "#" * 15 + "." * 15 + "]  50.0% "
                         "512.0 KiB/1.0 MiB 1.0 KiB/s ETA 02:05", line)

    def test_pattern(self):
        num = r"(\d+ B|\d+\.\d [KMGT]iB)"
        pattern = re.compile(r"^\[[#.]{30}\] +\d+\.\d%% %s/%s %s/s "
                             r"ETA (\d\d+:\d\d|--:--)$" % (num, num, num))
        for done in (0, 1, MiB // 3, MiB):
            self.assertRegex(cli.progress_line(self.snap(bytes_done=done)),
                             pattern)

    def test_unknown_eta(self):
        line = cli.progress_line(self.snap(eta=None, rate=0.0))
        self.assertTrue(line.endswith("0 B/s ETA --:--"), line)

    def test_empty_total(self):
        line = cli.progress_line(self.snap(bytes_total=0, bytes_done=0))
        self.assertTrue(line.startswith("[" + "#" * 30 + "] 100.0%"), line)

    def test_width(self):
        line = cli.progress_line(self.snap(bytes_done=MiB // 4), width=8)
        self.assertTrue(line.startswith("[##......]  25.0%"), line)


class ParserTest(testcase.TestCase):

    def parse(self, *argv):
        with mock.patch("sys.stderr", io.StringIO()), \
                mock.patch("sys.stdout", io.StringIO()):
            return cli.parser().parse_args(list(argv))

    def assertUsageError(self, *argv):
        exc = self.assertRaises(SystemExit, self.parse, *argv)
        self.assertEqual(2, exc.code)

    def test_serve_minimal(self):
        args = self.parse("serve", "--root", "/srv/in", "--key-file", "k")
        d = config.TransferConfig()
        self.assertEqual("serve", args.command)
        self.assertIs(cli.cmd_serve, args.func)
        self.assertEqual("/srv/in", args.root)
        self.assertEqual(("0.0.0.0", 47100), args.listen)
        self.assertEqual("sink", args.name)
        self.assertIsNone(args.preallocate)
        self.assertIsNone(args.min_free_bytes)
        self.assertIsNone(args.tls_cert)
        self.assertEqual(d.object_size, args.object_size)
        self.assertEqual(d.streams, args.streams)
        self.assertEqual(d.window_bytes, args.window)
        self.assertEqual(d.transport, args.transport)
        self.assertEqual(0, args.verbose)

    def test_serve_options(self):
        args = self.parse("serve", "--root", "r", "--key-file", "k",
                          "--listen", "[::]:5000", "--no-preallocate",
                          "--min-free", "1G", "--tls-cert", "c.pem",
                          "--tls-key", "c.key", "--tls-ca", "ca.pem",
                          "--object-size", "8M", "--streams", "8",
                          "--transport", "tcp", "-vv")
        self.assertEqual(("::", 5000), args.listen)
        self.assertIs(False, args.preallocate)
        self.assertEqual(GiB, args.min_free_bytes)
        self.assertEqual(("c.pem", "c.key", "ca.pem"),
                         (args.tls_cert, args.tls_key, args.tls_ca))
        self.assertEqual(8 * MiB, args.object_size)
        self.assertEqual(8, args.streams)
        self.assertEqual("tcp", args.transport)
        self.assertEqual(2, args.verbose)

    def test_serve_config(self):
        args = self.parse("serve", "--root", "r", "--key-file", "k",
                          "--no-preallocate", "--min-free", "1M",
                          "--window", "16M")
        cfg = cli._config(args)
        self.assertFalse(cfg.preallocate)
        self.assertEqual(MiB, cfg.min_free_bytes)
        self.assertEqual(16 * MiB, cfg.window_bytes)
        self.assertEqual("universal", cfg.logger)

    def test_serve_required(self):
        self.assertUsageError("serve", "--key-file", "k")
        self.assertUsageError("serve", "--root", "r")
        self.assertUsageError("serve", "--root", "r", "--key-file", "k",
                              "--listen", "nohost")
        self.assertUsageError("serve", "--root", "r", "--key-file", "k",
                              "--object-size", "big")

    def test_send_minimal(self):
        args = self.parse("send", "--peer", "dtn2:47100", "--key-file", "k",
                          "--state-dir", "/var/lib/s", "a.img", "dir")
        self.assertEqual("send", args.command)
        self.assertIs(cli.cmd_send, args.func)
        self.assertEqual(["a.img", "dir"], args.files)
        self.assertEqual(("dtn2", 47100), args.peer)
        self.assertEqual("source", args.name)
        self.assertEqual("/var/lib/s", args.state_dir)
        for name in ("peer_name", "root", "transfer_id", "manifest",
                     "logger", "log_method", "verify_sha512", "rate_limit",
                     "reconnect_deadline", "tls_ca", "server_name"):
            self.assertIsNone(getattr(args, name), name)
        self.assertFalse(args.progress)
        self.assertFalse(args.json)

    def test_send_without_files(self):
        args = self.parse("send", "--peer", "h:1", "--key-file", "k",
                          "--state-dir", "s", "--transfer-id", "abc")
        self.assertEqual([], args.files)
        self.assertEqual("abc", args.transfer_id)

    def test_send_options(self):
        args = self.parse("send", "--peer", "h:1", "--key-file", "k",
                          "--state-dir", "s", "--no-verify", "--logger",
                          "transaction", "--log-method", "varint",
                          "--rate-limit", "100M", "--reconnect-deadline",
                          "60", "--progress", "--json", "--io-threads", "2",
                          "--sync-interval", "0.5", "f")
        self.assertIs(False, args.verify_sha512)
        self.assertEqual("transaction", args.logger)
        self.assertEqual("varint", args.log_method)
        self.assertEqual(100 * MiB, args.rate_limit)
        self.assertEqual(60.0, args.reconnect_deadline)
        self.assertTrue(args.progress)
        self.assertTrue(args.json)
        cfg = cli._config(args)
        self.assertFalse(cfg.verify_sha512)
        self.assertEqual("transaction", cfg.logger)
        self.assertEqual(100 * MiB, cfg.rate_limit)
        self.assertEqual(2, cfg.io_threads)
        self.assertEqual(0.5, cfg.sync_interval)

    def test_data_path_options(self):
        for command in (("serve", "--root", "r"),
                        ("send", "--peer", "h:1", "--state-dir", "s")):
            args = self.parse(*command, "--key-file", "k",
                              "--compression", "auto",
                              "--compression-level", "3",
                              "--no-zero-extents")
            cfg = cli._config(args)
            self.assertEqual("auto", cfg.compression)
            self.assertEqual(3, cfg.compression_level)
            self.assertFalse(cfg.zero_extents)
        self.assertUsageError("send", "--peer", "h:1", "--state-dir", "s",
                              "--key-file", "k", "--compression", "max")

    def test_send_config_defaults(self):
        args = self.parse("send", "--peer", "h:1", "--key-file", "k",
                          "--state-dir", "s")
        self.assertEqual(config.TransferConfig(), cli._config(args))

    def test_send_invalid_config(self):
        args = self.parse("send", "--peer", "h:1", "--key-file", "k",
                          "--state-dir", "s", "--streams", "0")
        self.assertRaises(ValueError, cli._config, args)

    def test_send_usage_errors(self):
        base = ("send", "--key-file", "k", "--state-dir", "s")
        self.assertUsageError(*base)
        self.assertUsageError(*base, "--peer", "h")
        self.assertUsageError(*base, "--peer", "h:1", "--logger", "syslog")
        self.assertUsageError(*base, "--peer", "h:1", "--log-method", "x")
        self.assertUsageError(*base, "--peer", "h:1", "--transport", "udp")
        self.assertUsageError(*base, "--peer", "h:1", "--streams", "four")

    def test_send_infinite_size_is_usage_error(self):
        base = ("send", "--peer", "h:1", "--key-file", "k", "--state-dir",
                "s")
        self.assertUsageError(*base, "--object-size", "inf")

    def test_command_required(self):
        self.assertUsageError()
        self.assertUsageError("fetch")


class RdmaProbeTest(testcase.TestCase):
    """``serve`` picks the GID the agent picks: RoCE v2, not index 0."""

    def serve_device(self, *extra):
        from tests.unit.transfer.transport import fakeverbs
        if fakeverbs.REAL_ENUMS is None:         # pragma: no cover
            self.skipTest("pyverbs is not importable")
        args = cli.parser().parse_args(
            ["serve", "--root", "/srv/in", "--key-file", "k",
             "--transport", "rdma"] + list(extra))
        made = {}

        class Stop(Exception):
            pass

        def server(*a, **kw):
            made.update(kw)
            raise Stop()
        with fakeverbs.install(fakeverbs.Fabric()), \
                mock.patch.object(cli.auth, "load_key",
                                  return_value=b"k" * 32), \
                mock.patch("dtn_migrate.transfer.sink.server.SinkServer",
                           server):
            self.assertRaises(Stop, cli.cmd_serve, args)
        dev = made["rdma_device"]
        self.assertIsNotNone(dev)
        self.addCleanup(dev.close)
        return dev

    def test_roce_v2_gid_by_default(self):
        # The fake port has a RoCE v1 GID at index 0, RoCE v2 at 1.
        self.assertEqual(1, self.serve_device().gid_index)

    def test_gid_index_option(self):
        self.assertEqual(0, self.serve_device("--rdma-gid-index", "0")
                         .gid_index)
