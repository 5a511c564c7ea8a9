"""Tests of dtn_migrate.transfer.config.TransferConfig."""


from dtn_migrate.transfer import config
from dtn_migrate.transfer.wire import protocol

from tests.unit import testcase

MiB = config.MiB


class TransferConfigTest(testcase.TestCase):

    def test_defaults_validate(self):
        cfg = config.TransferConfig()
        cfg.validate()
        self.assertEqual(4 * MiB, cfg.object_size)
        self.assertEqual(64 * MiB, cfg.window_bytes)
        self.assertEqual(64, cfg.pool_objects)

    def assertInvalid(self, field, **kw):
        exc = self.assertRaises(ValueError, config.TransferConfig, **kw)
        self.assertIn(field, str(exc))
        return exc

    def test_data_path_defaults(self):
        cfg = config.TransferConfig()
        self.assertTrue(cfg.zero_extents)
        self.assertEqual("off", cfg.compression)
        self.assertEqual(1, cfg.compression_level)
        self.assertEqual(0.125, cfg.compression_min_saving)

    def test_compression(self):
        for mode in config.COMPRESSIONS:
            self.assertEqual(mode,
                             config.TransferConfig(compression=mode)
                             .compression)
        self.assertInvalid("compression", compression="zstd")
        self.assertInvalid("compression_level", compression_level=23)
        self.assertInvalid("compression_level", compression_level=-8)
        for value in (0, 1, -0.5, 1.5):
            self.assertInvalid("compression_min_saving",
                               compression_min_saving=value)

    def test_object_size(self):
        for value in (0, protocol.MIN_OBJECT_SIZE - 1, 4096 * 3 + 1,
                      4 * MiB + 512, protocol.MAX_OBJECT_SIZE + 4096, -4096):
            exc = self.assertInvalid("object_size", object_size=value)
            self.assertIn("4 KiB", str(exc))

    def test_object_size_bounds_accepted(self):
        small = config.TransferConfig(object_size=protocol.MIN_OBJECT_SIZE)
        self.assertEqual(4096, small.object_size)
        big = config.TransferConfig(object_size=protocol.MAX_OBJECT_SIZE)
        self.assertEqual(4, big.pool_objects)

    def test_streams(self):
        for value in (0, -1, protocol.MAX_STREAMS + 1):
            exc = self.assertInvalid("streams", streams=value)
            self.assertIn(str(protocol.MAX_STREAMS), str(exc))
        for value in (1, protocol.MAX_STREAMS):
            self.assertEqual(value,
                             config.TransferConfig(streams=value).streams)

    def test_io_threads(self):
        self.assertInvalid("io_threads", io_threads=0)
        self.assertEqual(1, config.TransferConfig(io_threads=1).io_threads)

    def test_buffer_pool(self):
        self.assertInvalid("buffer_pool_bytes",
                           buffer_pool_bytes=2 * 4 * MiB - 1)
        self.assertInvalid("buffer_pool_bytes", object_size=64 * MiB,
                           buffer_pool_bytes=100 * MiB)
        cfg = config.TransferConfig(buffer_pool_bytes=8 * MiB)
        self.assertEqual(2, cfg.pool_objects)

    def test_window(self):
        self.assertInvalid("window_bytes", window_bytes=4 * MiB - 1)
        self.assertInvalid("window_bytes", window_bytes=0)
        cfg = config.TransferConfig(window_bytes=4 * MiB)
        self.assertEqual(4 * MiB, cfg.window_bytes)

    def test_logger(self):
        exc = self.assertInvalid("logger", logger="syslog")
        self.assertIn("universal", str(exc))
        for value in config.LOGGERS:
            self.assertEqual(value, config.TransferConfig(logger=value)
                             .logger)

    def test_log_method(self):
        exc = self.assertInvalid("log_method", log_method="json")
        self.assertIn("bit64", str(exc))
        for value in config.LOG_METHODS:
            self.assertEqual(value, config.TransferConfig(log_method=value)
                             .log_method)

    def test_transaction_size(self):
        self.assertInvalid("transaction_size", transaction_size=0)

    def test_transport(self):
        exc = self.assertInvalid("transport", transport="udp")
        self.assertIn("rdma", str(exc))
        for value in config.TRANSPORTS:
            self.assertEqual(value, config.TransferConfig(transport=value)
                             .transport)

    def test_rate_limit(self):
        self.assertInvalid("rate_limit", rate_limit=-1)
        self.assertEqual(0, config.TransferConfig(rate_limit=0).rate_limit)

    def test_validate_after_change(self):
        cfg = config.TransferConfig()
        cfg.streams = 0
        self.assertRaises(ValueError, cfg.validate)

    def test_pool_objects(self):
        cases = [(8 * MiB, 4 * MiB, 2), (9 * MiB, 4 * MiB, 2),
                 (256 * MiB, 4 * MiB, 64), (128 * MiB, 64 * MiB, 2),
                 (1 * MiB, 4096, 256)]
        for pool, osize, want in cases:
            cfg = config.TransferConfig(buffer_pool_bytes=pool,
                                        object_size=osize)
            self.assertEqual(want, cfg.pool_objects, (pool, osize))
