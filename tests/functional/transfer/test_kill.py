"""Acceptance 2: kill -9 the source agent, and separately the sink agent,
at 20, 40, 60 and 80 % of a transfer; restart it; the transfer completes
bit-identical, and what each restart resends is within the window.
"""

import glob
import os

from testtools import content

from dtn_migrate.transfer import checksum
from dtn_migrate.transfer import paths
from dtn_migrate.transfer.sink import server as sink
from tests.functional import base

MiB = base.MiB
SIZE = 1024 * MiB
WINDOW = 16 * MiB
POINTS = (20, 40, 60, 80)


class TestKill(base.FunctionalTestCase):
    transfer_conf = {
        "object_size": MiB,
        "window_bytes": WINDOW,
        "sync_bytes": 4 * MiB,
        "sync_interval": 0.02,
        # Slow enough to stop at each point; fast enough for CI.
        "rate_limit": 160 * MiB,
        # Checkpoint the sink's sha512 often so a restarted sink resumes
        # the hash from its side file rather than from byte 0.
        "hash_checkpoint_bytes": 64 * MiB,
        "reconnect_initial_interval": 0.1,
        "reconnect_max_interval": 1.0,
    }

    def _transfer(self):
        src, dst = self.pair()
        path = os.path.join(src.staging, "disk.qcow2")
        base.make_file(path, SIZE, seed=7)
        tid = self.start_transfer(src, dst, ["disk.qcow2"])
        return src, dst, path, tid

    def _at(self, agent, tid, percent):
        return self.wait_for(
            agent, tid, timeout=120,
            until=lambda s: s.get("percent", 0) >= percent or
            s.get("state") in base.FINAL)

    def test_kill_source_agent(self):
        src, dst, path, tid = self._transfer()
        duplicates = []
        for percent in POINTS:
            status = self._at(src, tid, percent)
            self.assertEqual("running", status["state"],
                             "finished before %d %%" % percent)
            duplicates.append(self.api.get_incoming(
                {}, dst.name, tid)["bytes_duplicate"])
            src.kill9()
            src.start().wait_ready(self.api)
            # The restarted agent resumes from its object log by itself,
            # with at most the window missing from what was sent.
            resumed = self.wait_for(
                src, tid, until=lambda s: "resumed_bytes" in s)
            self.assertGreaterEqual(resumed["resumed_bytes"],
                                    SIZE * percent // 100 - WINDOW)
        status = self.wait_for(src, tid)
        self.assertEqual("complete", status["state"], status.get("error"))
        self.assertSame(path, os.path.join(dst.staging, "disk.qcow2"))
        incoming = self.api.get_incoming({}, dst.name, tid)
        duplicates.append(incoming["bytes_duplicate"])
        # Bytes the sink received twice, per restart: the resend.
        resent = [b - a for a, b in zip(duplicates, duplicates[1:])]
        self.addDetail("resent", content.text_content(
            repr(resent)))
        for r in resent:
            self.assertLessEqual(r, WINDOW)
        self.assertEqual(0, incoming["objects_corrupt"])

    def _sink_checkpoint(self, dst, tid):
        """Offset of the killed sink's saved sha512 state (its hash
        sidecar), which the restarted sink resumes from; 0 if none.
        """
        found = glob.glob(os.path.join(dst.staging, paths.PARTIAL_DIR, tid,
                                       "*.sha"))
        if not found:
            return 0
        with open(found[0], "rb") as f:
            state = checksum.ResumableSha512.restore(f.read())
        return state.offset if state is not None else 0

    def test_kill_sink_agent(self):
        src, dst, path, tid = self._transfer()
        resent, checkpoints = [], []
        for percent in POINTS:
            before = self._at(src, tid, percent)
            self.assertEqual("running", before["state"],
                             "finished before %d %%" % percent)
            dst.kill9()
            checkpoints.append(self._sink_checkpoint(dst, tid))
            dst.start().wait_ready(self.api)
            after = self._at(src, tid, min(99, percent + 10))
            resent.append(after["bytes_resent"] - before["bytes_resent"])
        status = self.wait_for(src, tid)
        self.assertEqual("complete", status["state"], status.get("error"))
        received = os.path.join(dst.staging, "disk.qcow2")
        self.assertSame(path, received)
        self.addDetail("resent", content.text_content(
            repr(resent)))
        self.addDetail("sink-hash-checkpoints", content.text_content(
            repr(checkpoints)))
        self.assertGreaterEqual(status["attempts"], 1 + len(POINTS))
        for r in resent:
            self.assertLessEqual(r, WINDOW)
        # The restarted sinks had a saved hash state to resume from,
        # further on each time (checkpoints every 64 MiB; the first kill
        # may come before the first one).
        self.assertEqual(sorted(checkpoints), checkpoints)
        self.assertGreater(checkpoints[1], 0, checkpoints)
        self.assertLess(checkpoints[1], checkpoints[-1], checkpoints)
        # The sha512 the sink verified -- hashed across four restarts,
        # resumed from those states -- is the file's real one (computed
        # here); the sink records it on the file it installed.
        sink_hash = os.getxattr(received, sink.XATTR_SHA512).decode()
        self.assertEqual(base.sha512(path), sink_hash)
        self.assertEqual(base.sha512(received), sink_hash)
        incoming = self.api.get_incoming({}, dst.name, tid)
        self.assertEqual(1, incoming["files_done"], incoming)
        self.assertEqual(0, incoming["objects_corrupt"], incoming)
