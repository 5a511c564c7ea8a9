"""Sparse raw images through a whole migration (issue 37 item 4): data
scattered in small pieces at random offsets, as in real file-system
images, crosses the DTN link as its data, not as the staging blocks
holding it, in both engine modes, and arrives bit-exact.
"""

import hashlib
import os
import random
import re

from testtools import content

from devcloud import relay as relay_mod
from tests.functional import base
from tests.functional.migration import harness as migration

MiB = 1 << 20
KiB = 1 << 10
#: The image: SIZE bytes, PIECES pieces of PIECE bytes (the density of
#: issue 37's 8 GiB image with 40 x 256 KiB, four times over, so that
#: each piece lies in a staging block of its own).
SIZE = 512 * MiB
PIECES = 16
PIECE = 256 * KiB
#: Bytes a migration may put on the link beyond its data: frames, the
#: descriptor, the zstd framing of each sparse object.
OVERHEAD = MiB


def scattered(size, count, piece, seed, align):
    """{offset: bytes}: ``count`` pieces of ``piece`` random bytes at
    random offsets of ``size`` (multiples of ``align``), none touching
    another.
    """
    rng = random.Random(seed)
    pieces = {}
    while len(pieces) < count:
        offset = rng.randrange(0, (size - piece) // align) * align
        if all(abs(offset - o) > piece + 4 * KiB for o in pieces):
            pieces[offset] = base.random_bytes(piece, seed * 1000 +
                                               len(pieces))
    return pieces


class TestSparseMigration(migration.MigrationTestCase):
    """Agent A reaches agent B through a relay that counts the bytes
    that go to B: the DTN link, headers aside.
    """

    def setUp(self):
        super().setUp()
        self.link_bytes = 0
        direct = migration.Cloud.peer_address

        def through_relay(cloud, peer):
            if peer.name != "b":
                return direct(cloud, peer)
            peer.relay = relay_mod.Relay(direct(cloud, peer))
            self.addCleanup(peer.relay.close)
            damage = peer.relay._damage

            def counting(data, seen):
                self.link_bytes += len(data)
                return damage(data, seen)
            peer.relay._damage = counting
            return ("127.0.0.1", peer.relay.port)
        self.patch(migration.Cloud, "peer_address", through_relay)

    def migrate_scattered(self, mode, align, seed, nfs=False):
        a, b = self.clouds(nfs=nfs)
        pieces = scattered(SIZE, PIECES, PIECE, seed, align)
        data = sum(len(p) for p in pieces.values())
        path = os.path.join(self.workdir, "scattered.raw")
        base.write_at(path, SIZE, pieces)
        h = hashlib.sha512()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(4 * MiB), b""):
                h.update(chunk)
        source = self.upload(a, path, name="scattered-%s" % mode)
        os.unlink(path)
        self.assertEqual(h.hexdigest(), source["os_hash_value"])
        req = self.migrate(images=[source["id"]], mode=mode)
        [m] = req["migrations"]
        rec = self.wait_migration(m["migration_id"])
        self.assertMigrated(rec, source)
        self.assertEqual(mode, rec["mode"])
        status = self.transfer_status(a, rec["transfer_id"])
        wire = self.link_bytes
        staged = [int(n) for n in re.findall(
            r"staged \S+ \(%d bytes, (\d+) exported by this run" % SIZE,
            a.engine.log_text())]
        note = (
            "%s, pieces aligned to %d: %d bytes of data in %d; export "
            "wrote %s bytes to the staging export; %d bytes on the DTN "
            "link (%.2f x data; %d in data frames); objects: %d zero, %d "
            "sparse, %d compressed" % (
                mode, align, data, SIZE, staged, wire, wire / data,
                status["bytes_sent_wire"], status["objects_zero"],
                status["objects_sparse"], status["objects_compressed"]))
        self.addDetail("link-bytes", content.text_content(note))
        self.assertLess(wire, 2 * data + OVERHEAD)
        self.assertGreater(wire, data // 2)
        self.assertEqual(1, len(staged), staged)
        self.assertLess(staged[0], 2 * data + OVERHEAD)
        # The peer's image is the source's, byte for byte.
        peer = self.peer_image(source, rec["transfer_id"])
        got = hashlib.sha512()
        for chunk in b.admin().images.data(peer["id"]):
            got.update(chunk)
        self.assertEqual(h.hexdigest(), got.hexdigest())

    def test_pipelined_pieces_aligned_to_pages(self):
        self.migrate_scattered("pipelined", 4 * KiB, 1)

    def test_pipelined_pieces_not_aligned(self):
        self.migrate_scattered("pipelined", 1, 2)

    def test_serial_pieces_not_aligned(self):
        self.migrate_scattered("serial", 1, 3)

    def test_pipelined_over_nfs(self):
        self.migrate_scattered("pipelined", 1, 4, nfs=True)

    def test_serial_over_nfs(self):
        self.migrate_scattered("serial", 1, 5, nfs=True)
