"""A hostile peer cannot write outside its own transfer (issue 36, items
5 and 9).

A real receiving agent (``dst``, the default ``[peer:<name>]
incoming_names = migration`` and a small staging quota for its peer
``src``) holds a migration that ``src`` sent and an export of its own
that it is sending back.  A client of the transfer protocol written for
the test (``rawpeer``), authenticated as ``src`` with the real peering
key, then announces one hostile name after another in one session:
each is refused with BAD_NAME, nothing is written, and the victims'
files stay byte-identical; a session for the transfer ``dst`` sends is
refused outright; a file over the quota is refused before anything is
written, naming the option; its own transfer's files still go through.
"""

import hashlib
import json
import os
import uuid

from dtn_migrate.transfer import errors
from dtn_migrate.transfer import paths
from dtn_migrate.transfer.wire import protocol as P
from tests.functional import base
from tests.functional.transfer import rawpeer

MiB = base.MiB
QUOTA = 32 * MiB


def snapshot(path):
    st = os.stat(path)
    return st.st_ino, st.st_size, st.st_mtime_ns, base.sha512(path)


def stage(root, tid, seed):
    """``<tid>/image.json`` and ``<tid>/image.data`` under ``root``."""
    os.makedirs(os.path.join(root, tid), exist_ok=True)
    with open(os.path.join(root, tid, "image.json"), "w") as f:
        json.dump({"name": "image-%d" % seed, "size": 3 * MiB}, f)
    base.make_file(os.path.join(root, tid, "image.data"), 3 * MiB + seed,
                   seed=seed)
    return ["%s/image.json" % tid, "%s/image.data" % tid]


class TestHostileSender(base.FunctionalTestCase):

    def test_cannot_write_outside_its_transfer(self):
        def dst_kw(names):
            return {"extra": {"peer:%s" % names["src"]: {
                "incoming_names": "migration",
                "staging_quota_bytes": QUOTA}}}
        agents = self.mesh({"dst": (["src"], dst_kw),
                            "src": (["dst"], {})})
        src, dst = agents["src"], agents["dst"]
        # A migration src sent to dst, and dst's own export to src.
        victim = uuid.uuid4().hex
        files = stage(src.staging, victim, 1)
        tid = self.start_transfer(src, dst, files, transfer_id=victim)
        self.assertEqual("complete", self.wait_for(src, tid, timeout=60)[
            "state"])
        export = uuid.uuid4().hex
        files = stage(dst.staging, export, 2)
        tid = self.start_transfer(dst, src, files, transfer_id=export)
        self.assertEqual("complete", self.wait_for(dst, tid, timeout=60)[
            "state"])
        kept = [os.path.join(dst.staging, t, leaf)
                for t in (victim, export)
                for leaf in ("image.json", "image.data")]
        before = {p: snapshot(p) for p in kept}

        sess = rawpeer.Session.open(dst.port, src.name, self.key,
                                    sink=dst.name, streams=1)
        self.addCleanup(sess.close)
        own = sess.tid
        hostile = [
            "%s/image.json" % victim, "%s/image.data" % victim,
            "%s/image.json" % export, "%s/image.data" % export,
            "../%s/image.json" % victim, "/etc/passwd",
            "%s/../%s/image.json" % (own, victim),
            "%s/%s/x.part" % (paths.PARTIAL_DIR, victim),
            "%s/evil.sh" % own, "%s/sub/image.json" % own, "top.raw"]
        for file_id, name in enumerate(hostile):
            reply = sess.new_file(file_id, name, 4096,
                                  sha512=hashlib.sha512(b"x").digest())
            self.assertEqual(P.MsgType.FILE_ID, reply.TYPE, (name, reply))
            self.assertEqual(P.FileStatus.REFUSED, reply.status,
                             (name, reply))
            self.assertEqual(errors.Code.BAD_NAME, reply.code, (name, reply))
        # Over its quota: refused before anything is written.
        reply = sess.new_file(50, "%s/image.data" % own, 2 * QUOTA)
        self.assertEqual(P.FileStatus.REFUSED, reply.status, reply)
        self.assertEqual(errors.Code.LIMIT, reply.code, reply)
        self.assertIn("raise [peer:%s] staging_quota_bytes" % src.name,
                      reply.message)
        # Its own transfer's files still go through.
        reply = sess.send_file(60, "%s/image.json" % own, b'{"mine": 1}')
        self.assertEqual(P.CloseStatus.OK, reply.status, reply)
        self.assertEqual(P.ByeFlags.ACK, sess.bye().flags)
        sess.close()
        with open(os.path.join(dst.staging, own, "image.json"), "rb") as f:
            self.assertEqual(b'{"mine": 1}', f.read())
        self.assertEqual({p: snapshot(p) for p in kept}, before)
        self.assertEqual(sorted([victim, export, own]), sorted(
            n for n in os.listdir(dst.staging) if n != paths.PARTIAL_DIR))
        self.assertFalse(os.path.exists(os.path.join(
            dst.staging, paths.PARTIAL_DIR, victim)))

        # A session for the transfer dst sends: refused outright.
        refused = rawpeer.Session(dst.port, src.name, self.key,
                                  bytes.fromhex(export), 1, 4096, 10.0,
                                  "127.0.0.1", sink=dst.name)
        self.addCleanup(refused.close)
        self.assertEqual(P.MsgType.ERROR, refused.reply.TYPE, refused.reply)
        self.assertEqual(errors.Code.AUTH, refused.reply.code)
        self.assertIn("another peer", refused.reply.message)
        self.assertEqual({p: snapshot(p) for p in kept}, before)
        log = dst.log_text()
        for name in hostile:
            self.assertIn("from %s: refusing %r" % (src.name, name), log)
