
from dtn_migrate.transfer import compress

from tests.unit import testcase


class TestCodec(testcase.TestCase):
    def test_round_trip(self):
        data = b"abc" * 100000
        wire = compress.Compressor(1).compress(data)
        self.assertLess(len(wire), len(data) // 10)
        self.assertEqual(data, compress.decompress(wire, len(data)))

    def test_wrong_length_refused(self):
        wire = compress.Compressor(1).compress(b"a" * 1000)
        self.assertRaises(ValueError, compress.decompress, wire, 999)
        self.assertRaises(ValueError, compress.decompress, wire, 1001)

    def test_bomb_stops_at_the_bound(self):
        """A frame that declares and holds far more than the object."""
        wire = compress.Compressor(1).compress(bytes(64 << 20))
        self.assertLess(len(wire), 1 << 16)
        exc = self.assertRaises(ValueError, compress.decompress, wire, 4096)
        self.assertIn("more", str(exc))

    def test_garbage_refused(self):
        self.assertRaises(ValueError, compress.decompress, b"junk" * 9, 36)


class TestPolicy(testcase.TestCase):
    def test_off(self):
        p = compress.Policy("off", 0.125)
        self.assertFalse(p.enabled)
        self.assertFalse(p.want())

    def test_on_tries_everything(self):
        p = compress.Policy("on", 0.125, lambda: 0)
        for _ in range(10):
            self.assertTrue(p.want())
            self.assertFalse(p.worth(1000, 990))
        self.assertTrue(p.worth(1000, 875))
        self.assertFalse(p.worth(1000, 876))

    def test_auto_only_while_the_senders_are_behind(self):
        backlog = [0]
        p = compress.Policy("auto", 0.125, lambda: backlog[0],
                            backlog_high=2)
        self.assertFalse(p.want())
        backlog[0] = 1
        self.assertFalse(p.want())
        backlog[0] = 2
        self.assertTrue(p.want())

    def test_auto_backs_off_incompressible_data(self):
        p = compress.Policy("auto", 0.125, lambda: 10)
        tries = 0
        for _ in range(200):
            if p.want():
                tries += 1
                p.worth(1000, 1000)
        # Probes at growing intervals up to one in MAX_SKIP.
        self.assertLess(tries, 200 // compress.MAX_SKIP + 8)
        self.assertGreater(tries, 2)
        # Data that shrinks again is compressed at once after a probe.
        while not p.want():
            pass
        self.assertTrue(p.worth(1000, 100))
        self.assertTrue(p.want())
