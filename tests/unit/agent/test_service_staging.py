"""What the agent's sink lets a peer do to its staging root (issue 36,
items 5 and 9), with the agent's own configuration: names of the
session's transfer only, no session for a transfer this DTN sends, the
per-peer staging quota, stray partial copies swept.
"""

import os
import time
from unittest import mock
import uuid

from dtn_migrate.agent import service
from dtn_migrate import exception
from dtn_migrate.transfer import dataset
from dtn_migrate.transfer import errors
from dtn_migrate.transfer import paths
from dtn_migrate.transfer.wire import protocol as P
from tests.unit.agent import test_service

OBJ = 64 << 10


class TestStaging(test_service.ServiceTestCase):

    def new_file(self, conn, name, size=OBJ, file_id=0):
        conn.send(P.NewFile(file_id, P.FileFlags.NO_SHA512, size, 0, 0o644,
                            OBJ, bytes(64), name))
        return conn.recv(expect=(P.MsgType.FILE_ID,))

    def staging(self, east, *parts):
        return os.path.join(east.sink.root.path, *parts)

    def test_a_peer_writes_only_its_own_transfer(self):
        east = self.start_east()
        victim = uuid.uuid4().hex
        os.makedirs(self.staging(east, victim))
        desc = self.staging(east, victim, "image.json")
        with open(desc, "w") as f:
            f.write('{"name": "export"}')
        tid = uuid.uuid4().hex
        conn, _ = self.open_session(east, tid)
        for file_id, name in enumerate([
                "%s/image.json" % victim, "%s/image.data" % victim,
                "../image.json", "%s/evil.sh" % tid, "top.raw"]):
            reply = self.new_file(conn, name, file_id=file_id)
            self.assertEqual(P.FileStatus.REFUSED, reply.status,
                             (name, reply))
            self.assertEqual(errors.Code.BAD_NAME, reply.code, reply)
        reply = self.new_file(conn, "%s/image.json" % tid, file_id=9)
        self.assertEqual(P.FileStatus.OPEN, reply.status, reply)
        with open(desc) as f:
            self.assertEqual('{"name": "export"}', f.read())
        self.assertEqual([], os.listdir(self.staging(
            east, paths.PARTIAL_DIR, victim)) if os.path.exists(
                self.staging(east, paths.PARTIAL_DIR, victim)) else [])

    def test_no_session_for_a_transfer_this_dtn_sends(self):
        east = self.start_east()
        tid = uuid.uuid4().hex
        dataset.Manifest.new("here", [], {}, tid).save(
            east.outgoing._dir(tid))
        exc = self.assertRaises(errors.PeerError, self.open_session, east,
                                tid)
        self.assertEqual(errors.Code.AUTH, exc.code)
        self.assertEqual([], east.sink.status())

    def test_quota_of_the_peer(self):
        east = self.start_east()
        east.conf.set_override("staging_quota_bytes", 3 * OBJ, "peer:here")
        tid = uuid.uuid4().hex
        conn, _ = self.open_session(east, tid)
        reply = self.new_file(conn, "%s/image.data" % tid, 4 * OBJ)
        self.assertEqual(P.FileStatus.REFUSED, reply.status, reply)
        self.assertEqual(errors.Code.LIMIT, reply.code, reply)
        self.assertIn("raise [peer:here] staging_quota_bytes", reply.message)
        reply = self.new_file(conn, "%s/image.json" % tid, OBJ, file_id=1)
        self.assertEqual(P.FileStatus.OPEN, reply.status, reply)

    def test_strays_swept(self):
        east = self.start_east(stray_max_age=3600)
        stray = uuid.uuid4().hex
        pdir = self.staging(east, paths.PARTIAL_DIR, stray)
        os.makedirs(pdir)
        part = os.path.join(pdir, "x.part")
        open(part, "wb").close()
        os.makedirs(self.staging(east, stray))
        final = self.staging(east, stray, "image.data")
        open(final, "wb").close()
        east.sweep_strays()
        self.assertTrue(os.path.exists(part), "a recent one is kept")
        then = time.time() - 7200
        for p in (part, pdir):
            os.utime(p, (then, then))
        east.sweep_strays()
        self.assertFalse(os.path.exists(pdir))
        self.assertTrue(os.path.exists(final))

    def test_quota_counts_what_the_peer_sent_before_a_restart(self):
        east = self.start_east()
        earlier = uuid.uuid4().hex
        conn, _ = self.open_session(east, earlier)
        conn.close()
        os.makedirs(self.staging(east, earlier))
        with open(self.staging(east, earlier, "image.data"), "wb") as f:
            f.truncate(3 * OBJ)
        east.sink.stop()
        east = self.start_east()          # no session of this run knows it
        east.conf.set_override("staging_quota_bytes", 4 * OBJ, "peer:here")
        self.assertEqual([earlier], east.incoming.transfers_of("here"))
        self.assertEqual([], east.incoming.transfers_of("third"))
        tid = uuid.uuid4().hex
        conn, _ = self.open_session(east, tid)
        reply = self.new_file(conn, "%s/image.data" % tid, 2 * OBJ)
        self.assertEqual(P.FileStatus.REFUSED, reply.status, reply)
        self.assertIn("(%d held, this file %d)" % (3 * OBJ, 2 * OBJ),
                      reply.message)

    def test_a_bad_value_is_refused_at_start(self):
        conf = self.make_conf()
        path = os.path.join(self.tmp, "bad.conf")
        with open(path, "w") as f:
            f.write("[peer:here]\nincoming_names = everywhere\n")
        conf(["--config-file", path])
        exc = self.assertRaises(exception.ConfigError, service.AgentService,
                                conf, transport=mock.Mock())
        self.assertIn("[peer:here] incoming_names", str(exc))
