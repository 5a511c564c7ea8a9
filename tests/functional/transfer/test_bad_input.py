"""Acceptance 5: bad input gives a clear error while the agent keeps
serving other transfers and touches nothing outside its staging root.

Every test runs a legitimate, rate-limited transfer from ``src`` to the
attacked agent while the attack happens, and then checks that

* the legitimate transfer completed bit-identical in its first session
  (no reconnect: the attack did not disturb it);
* the attacked agent process is alive and answers RPC;
* nothing outside its staging root changed (a sentinel directory next
  to the root, the listings of the directories above it, and every path
  an attack names);
* the attacker got the protocol's ERROR / FILE_ID REFUSED with a
  meaningful text, and the agent's log has a line naming the problem.

The hostile peers are ``rawpeer`` clients (real sockets, the engine's
own framing and HMAC code) and, where it matters, real agents with a
wrong key or certificate.
"""

import concurrent.futures
import hashlib
import os
import random
import socket
import subprocess
import time
import uuid

from dtn_migrate.transfer import errors
from dtn_migrate.transfer.sink import server as sink
from dtn_migrate.transfer import varint
from dtn_migrate.transfer.wire import auth
from dtn_migrate.transfer.wire import protocol as P
from tests.functional import base
from tests.functional.transfer import rawpeer

MiB = base.MiB
AUTH_FAILED = "authentication failed"
# How long the sink waits for a handshake (stream.accept's default).
HANDSHAKE_TIMEOUT = 10.0


def tree(path):
    """{relative path: (kind, size, mtime_ns, sha256)} under ``path``."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            digest = None
            if os.path.isfile(full) and not os.path.islink(full):
                with open(full, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
            kind = ("link" if os.path.islink(full) else
                    "dir" if os.path.isdir(full) else "file")
            out[os.path.relpath(full, path)] = (kind, st.st_size,
                                                st.st_mtime_ns, digest)
    return out


class Guard:
    """What lies outside an agent's staging root and must not change.

    A sentinel directory ``outside`` (with a ``victim`` file) next to the
    staging root is a target for symlinks and absolute names; its whole
    tree, and the listings of the directories above the root, are
    compared before and after the attacks.
    """

    def __init__(self, agent, *above):
        self.agent = agent
        self.outside = os.path.join(os.path.dirname(agent.staging),
                                    "outside")
        os.makedirs(self.outside, exist_ok=True)
        self.victim = os.path.join(self.outside, "victim")
        with open(self.victim, "wb") as f:
            f.write(b"must not change\n")
        self.listed = sorted({os.path.dirname(agent.staging), agent.dir}
                             | set(above))
        self.before = self.snapshot()

    def snapshot(self):
        snap = {d: sorted(os.listdir(d)) for d in self.listed}
        snap["outside tree"] = tree(self.outside)
        return snap

    def check(self, test, forbidden=()):
        test.assertEqual(self.before, self.snapshot(),
                         "something outside %s changed"
                         % self.agent.staging)
        for path in forbidden:
            test.assertFalse(os.path.lexists(path),
                             "%s was created by an attack" % path)


class Legit:
    """A legitimate transfer that runs while the attacks happen."""

    def __init__(self, test, src, dst, size, rate, name="legit.raw",
                 seed=7):
        self.test, self.src, self.dst = test, src, dst
        self.name = name
        self.path = os.path.join(src.staging, name)
        base.make_file(self.path, size, seed=seed)
        self.tid = test.start_transfer(src, dst, [name],
                                       options={"rate_limit": rate})
        # Attack only once the sink serves it (objects are confirmed).
        status = test.wait_for(src, self.tid, timeout=60, until=lambda s: (
            s.get("bytes_done", 0) > 0 or s.get("state") in base.FINAL))
        test.assertEqual("running", status["state"], status.get("error"))

    def assert_running(self):
        """The attacks really overlapped with this transfer."""
        status = self.test.status(self.src, self.tid)
        self.test.assertEqual(
            "running", status["state"],
            "the legitimate transfer ended before the attacks did: %s"
            % status)
        incoming = self.test.api.get_incoming({}, self.dst.name, self.tid)
        self.test.assertTrue(incoming["active"], incoming)

    def finish(self):
        status = self.test.wait_for(self.src, self.tid, timeout=120)
        self.test.assertEqual("complete", status["state"],
                              status.get("error"))
        # One session from start to end: the attacks never disturbed it.
        self.test.assertEqual(1, status["attempts"], status)
        self.test.assertEqual(0, status["bytes_resent"], status)
        self.test.assertSame(self.path,
                             os.path.join(self.dst.staging, self.name))


def make_certs(directory, server_name):
    """CA1 signs the sink's certificate and a good client certificate;
    CA2 signs a bad client certificate.  Returns {name: (pem, key)}.
    """

    def openssl(*args):
        subprocess.run(("openssl",) + args, cwd=directory, check=True,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=60)

    newkey = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
              "-nodes")
    out = {}
    for ca in ("ca1", "ca2"):
        openssl("req", "-x509", *newkey, "-keyout", ca + ".key", "-out",
                ca + ".pem", "-days", "2", "-subj", "/CN=dtnm test " + ca,
                "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        out[ca] = (os.path.join(directory, ca + ".pem"),
                   os.path.join(directory, ca + ".key"))
    for name, ca, cn in (("sink", "ca1", server_name),
                         ("good", "ca1", "good-client"),
                         ("bad", "ca2", "bad-client")):
        ext = os.path.join(directory, name + ".ext")
        with open(ext, "w") as f:
            f.write("basicConstraints = CA:FALSE\n"
                    "keyUsage = critical, digitalSignature\n"
                    "extendedKeyUsage = serverAuth, clientAuth\n"
                    "subjectAltName = DNS:%s\n" % cn)
        openssl("req", *newkey, "-keyout", name + ".key", "-out",
                name + ".csr", "-subj", "/CN=" + cn)
        openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem",
                "-CAkey", ca + ".key", "-set_serial",
                str(random.getrandbits(63)), "-days", "2", "-extfile", ext,
                "-out", name + ".pem")
        out[name] = (os.path.join(directory, name + ".pem"),
                     os.path.join(directory, name + ".key"))
    return out


class TestBadInput(base.FunctionalTestCase):

    # Helpers.
    def assertAlive(self, agent):
        self.assertIsNone(agent.proc.poll(), "agent %s died" % agent.name)
        self.assertEqual(agent.name, self.api.ping({}, agent.name)["host"])

    def assertRefusedAuth(self, reply, peer):
        self.assertEqual(P.MsgType.ERROR, reply.TYPE, reply)
        self.assertEqual(errors.Code.AUTH, reply.code, reply)
        self.assertTrue(reply.fatal, reply)
        self.assertIn(AUTH_FAILED, reply.message)
        # The sink's CHALLENGE did not prove our (wrong) key, and the
        # connection is dropped right away.
        self.assertFalse(peer.sink_proved)
        self.assertIsNotNone(peer.wait_closed(5),
                             "sink kept a failed connection open")

    def assertLogged(self, agent, *fragments):
        """Some line of the agent's log contains all ``fragments``."""
        lines = agent.log_text().splitlines()
        for line in lines:
            if all(f in line for f in fragments):
                return line
        self.fail("no line of %s's log contains %r" % (agent.name,
                                                       fragments))

    def assertError(self, peer, *fragments, fatal=None):
        """The next ERROR on ``peer`` mentions every fragment."""
        msg = peer.expect(P.MsgType.ERROR)
        for f in fragments:
            self.assertIn(f, msg.message)
        if fatal is not None:
            self.assertEqual(fatal, bool(msg.fatal), msg)
        return msg

    def incoming_ids(self, agent):
        return {r["transfer_id"] for r in self.api.get_incoming(
            {}, agent.name)}

    # 1. Wrong key, unknown peer.
    def test_wrong_key_and_unknown_peer(self):
        wrong = os.urandom(32).hex()
        a = self.mesh({
            "src": (["dst"], {}),
            "dst": (["src", "mallory"], {}),
            # A configured peer of dst whose own key for dst is wrong.
            "mallory": (["dst"], {"key": wrong}),
        })
        src, dst, mallory = a["src"], a["dst"], a["mallory"]
        guard = Guard(dst, self.workdir)
        base.make_file(os.path.join(mallory.staging, "evil.raw"), MiB)
        legit = Legit(self, src, dst, 64 * MiB, 8 * MiB)
        unknown = "nobody-%s" % uuid.uuid4().hex[:6]
        attacks = [
            # The src's name, the wrong key, as control and as a data
            # stream of the running legitimate transfer.
            (src.name, wrong, P.Role.CONTROL, None, 0),
            (src.name, wrong, P.Role.DATA, bytes.fromhex(legit.tid), 1),
            # Another configured name, wrong key.
            (mallory.name, wrong, P.Role.CONTROL, None, 0),
            # A name the sink does not know, even with the right key.
            (unknown, self.key, P.Role.CONTROL, None, 0),
            (unknown, wrong, P.Role.CONTROL, None, 0),
        ]
        messages = set()
        for name, key, role, tid, epoch in attacks:
            peer = rawpeer.RawPeer(dst.port, sink=dst.name)
            reply = peer.hello(name, key, role, tid, epoch, streams=4)
            self.assertRefusedAuth(reply, peer)
            messages.add(reply.message)
            peer.close()
        # Unknown name and wrong key look the same from outside.
        self.assertEqual(1, len(messages), messages)
        # A real agent with a wrong key gives up at once with a clear
        # status: the sink could not prove the key it expects.
        tid = self.start_transfer(mallory, dst, ["evil.raw"])
        status = self.wait_for(mallory, tid, timeout=60)
        self.assertEqual("failed", status["state"])
        self.assertIn("could not prove the shared key", status["error"])
        self.assertIn("wrong key", status["error"])
        self.assertEqual(1, status["attempts"], status)
        legit.assert_running()

        self.assertLogged(dst, "failed authentication as peer %r"
                          % src.name, "(wrong key)", "connection dropped")
        self.assertLogged(dst, "failed authentication as peer %r"
                          % mallory.name, "(wrong key)")
        self.assertLogged(dst, "failed authentication as peer %r"
                          % unknown, "(unknown peer)")
        legit.finish()
        self.assertAlive(dst)
        # Nothing received from the attackers: no record, no file.
        self.assertEqual({legit.tid}, self.incoming_ids(dst))
        self.assertEqual(sorted([legit.name, ".dtn-partial"]),
                         sorted(os.listdir(dst.staging)))
        self.assertEqual([], os.listdir(os.path.join(dst.staging,
                                                     ".dtn-partial")))
        guard.check(self)

    # 2. Certificates.
    def test_wrong_certificate(self):
        certs_dir = os.path.join(self.workdir, "certs")
        os.makedirs(certs_dir)
        sink_name = "dtn-sink.test"
        certs = make_certs(certs_dir, sink_name)
        ca1 = certs["ca1"][0]

        def source_tls(cert):
            def kw(names):
                return {"extra": {
                    "tls": {"ca_file": ca1, "cert_file": certs[cert][0],
                            "key_file": certs[cert][1]},
                    "peer:%s" % names["dst"]: {"tls": "true",
                                               "server_name": sink_name}}}
            return kw

        def sink_kw(names):
            return {"extra": {
                "tls": {"cert_file": certs["sink"][0],
                        "key_file": certs["sink"][1], "ca_file": ca1},
                "peer:%s" % names["src"]: {"require_tls": "true"},
                "peer:%s" % names["badcert"]: {"require_tls": "true"}}}

        a = self.mesh({
            "src": (["dst"], source_tls("good")),
            "dst": (["src", "badcert"], sink_kw),
            # Right key, right CA for the sink; its own certificate is
            # signed by a CA the sink does not trust.
            "badcert": (["dst"], source_tls("bad")),
        })
        src, dst, bad = a["src"], a["dst"], a["badcert"]
        guard = Guard(dst, self.workdir)
        base.make_file(os.path.join(bad.staging, "evil.raw"), MiB)
        # The good certificate works: this is the concurrent transfer.
        legit = Legit(self, src, dst, 64 * MiB, 8 * MiB)

        # The agent with the untrusted certificate tries meanwhile; its
        # status is checked last (see below).
        bad_tid = self.start_transfer(bad, dst, ["evil.raw"])

        # Plain TCP from the src peer, right key: refused (require_tls).
        plain = rawpeer.RawPeer(dst.port, sink=dst.name)
        reply = plain.hello(src.name, self.key)
        self.assertEqual(P.MsgType.ERROR, reply.TYPE, reply)
        self.assertEqual(errors.Code.AUTH, reply.code)
        self.assertIn("requires TLS from %s" % src.name, reply.message)
        self.assertIsNotNone(plain.wait_closed(5))
        plain.close()

        # TLS without a client certificate, and with one from the wrong
        # CA: the sink ends the TLS handshake (with TLS 1.3 the client
        # learns it at its first read).
        for cert in ((), certs["bad"]):
            ctx = auth.client_context(ca1, *cert)
            peer = None
            try:
                peer = rawpeer.RawPeer(dst.port, tls_context=ctx,
                                       sink=dst.name,
                                       server_hostname=sink_name)
                peer.hello(src.name, self.key)
            except (errors.TransferError, ConnectionError,
                    AssertionError) as exc:
                refused = str(exc)
            else:
                refused = None
            finally:
                if peer is not None:
                    peer.close()
            self.assertIsNotNone(refused, "sink accepted TLS with client "
                                 "certificate %r" % (cert,))
            self.assertTrue(any(w in refused.lower() for w in (
                "certificate", "unknown ca")), refused)

        # And the other direction: a sink whose certificate the client
        # does not trust is refused by the client's TLS check.
        ctx = auth.client_context(certs["ca2"][0], *certs["bad"])
        exc = self.assertRaises(errors.AuthenticationError, rawpeer.RawPeer,
                                dst.port, tls_context=ctx,
                                server_hostname=sink_name)
        self.assertIn("certificate verify failed", str(exc))
        legit.assert_running()

        self.assertLogged(dst, "rejected connection", "TLS handshake",
                          "certificate")
        self.assertLogged(dst, "(peer %s) connected without TLS" % src.name,
                          "requires")
        legit.finish()
        self.assertAlive(dst)
        self.assertEqual({legit.tid}, self.incoming_ids(dst))
        self.assertEqual(sorted([legit.name, ".dtn-partial"]),
                         sorted(os.listdir(dst.staging)))
        guard.check(self)

        # A certificate rejection is an authentication failure: the
        # source must fail the transfer with a clear TLS error, as it
        # does for a wrong key, not retry it as a network fault.
        status = self.wait_for(bad, bad_tid, timeout=20, until=lambda s: (
            s.get("state") in base.FINAL or s.get("attempts", 0) >= 3))
        self.assertEqual(
            "failed", status["state"],
            "a source whose client certificate the sink rejects is still "
            "%s after %d attempts, last error %r: retried as a network "
            "fault" % (status["state"], status["attempts"],
                       status["error"]))
        self.assertIn("TLS", status["error"])
        self.assertIn("certificate", status["error"].lower())
        # With TLS 1.3 the client learns of the rejection after its own
        # handshake; usually from the sink's alert (one attempt), at times
        # only as an EOF, which the engine treats as a rejected
        # certificate on the third in a row.
        self.assertLessEqual(status["attempts"], 3, status)

    # 3. Names that would escape the staging root.
    def test_path_traversal_names(self):
        src, dst = self.pair()
        guard = Guard(dst, self.workdir)
        outside = guard.outside
        os.symlink(outside, os.path.join(dst.staging, "link"))
        os.makedirs(os.path.join(dst.staging, "sub"))
        os.symlink(outside, os.path.join(dst.staging, "sub", "inner"))
        os.symlink(guard.victim, os.path.join(dst.staging, "linkfile"))
        legit = Legit(self, src, dst, 64 * MiB, 8 * MiB)
        partial_of_legit = "%s/%s/%s" % (
            ".dtn-partial", legit.tid, rawpeer.partial_name(legit.name))
        absolute = os.path.join(outside, "abs")
        bad = [
            ("../x", "'..'"),
            ("a/../../x", "'..'"),
            ("../../x", "'..'"),
            ("./x", "'.'"),
            ("a//x", "empty"),
            (absolute, "absolute"),
            ("x\x00", "NUL"),
            ("a\x00/../../x", "NUL"),
            ("link/x", "symlink"),
            ("link/y/z", "symlink"),
            ("sub/inner/x", "symlink"),
            (".dtn-partial/x", "reserved"),
            (partial_of_legit, "reserved"),
            ("n" * 256, "longer than 255"),
        ]
        sess = rawpeer.Session.open(dst.port, src.name, self.key,
                                    sink=dst.name)
        for file_id, (name, why) in enumerate(bad):
            reply = sess.new_file(file_id, name, 4096)
            self.assertEqual(P.MsgType.FILE_ID, reply.TYPE, reply)
            self.assertEqual(P.FileStatus.REFUSED, reply.status,
                             "%r was not refused" % name)
            self.assertEqual(errors.Code.BAD_NAME, reply.code, reply)
            self.assertIn(why, reply.message, name)
        # The session survives refusals; a final symlink component is
        # replaced, never written through.
        data = os.urandom(10000)
        close = sess.send_file(100, "linkfile", data)
        self.assertEqual(P.CloseStatus.OK, close.status, close)
        self.assertEqual(P.MsgType.BYE, sess.bye().TYPE)
        sess.close()
        legit.assert_running()

        for name, _ in bad:
            self.assertLogged(dst, "refusing %r" % name)
        legit.finish()
        self.assertAlive(dst)
        linkfile = os.path.join(dst.staging, "linkfile")
        self.assertFalse(os.path.islink(linkfile))
        with open(linkfile, "rb") as f:
            self.assertEqual(data, f.read())
        self.assertEqual(sorted([legit.name, ".dtn-partial", "link", "sub",
                                 "linkfile"]),
                         sorted(os.listdir(dst.staging)))
        self.assertEqual(["inner"], os.listdir(os.path.join(dst.staging,
                                                            "sub")))
        guard.check(self, [
            os.path.join(dst.dir, "x"), os.path.join(self.workdir, "x"),
            os.path.join(dst.staging, "x"), absolute,
            os.path.join(outside, "x"), os.path.join(outside, "y")])

    # 4. Out-of-bounds objects and sizes.
    def test_out_of_bounds(self):
        src, dst = self.pair()
        guard = Guard(dst, self.workdir)
        legit = Legit(self, src, dst, 64 * MiB, 8 * MiB)
        sess = rawpeer.Session.open(dst.port, src.name, self.key,
                                    sink=dst.name, streams=16,
                                    object_size=4096)
        size = 10000                       # objects of 4096, 4096, 1808
        data = os.urandom(size)
        reply = sess.new_file(0, "small.bin", size,
                              sha512=hashlib.sha512(data).digest())
        self.assertEqual(P.FileStatus.OPEN, reply.status, reply)
        part = os.path.join(dst.staging, ".dtn-partial", sess.tid,
                            rawpeer.partial_name("small.bin"))
        self.assertEqual(size, os.path.getsize(part))
        block = os.urandom(4096)
        cases = [
            # (index, offset, length, payload, fragments of the ERROR)
            (3, 3 * 4096, 4096, block, ("object index 3 beyond the 3 "
                                        "objects of small.bin",)),
            (1000, 1000 * 4096, 4096, block, ("object index 1000 beyond",)),
            (1, 4097, 4096, block, ("claims offset 4097",
                                    "expected offset 4096")),
            (1, 0, 4096, block, ("claims offset 0", "expected offset 4096")),
            # The last object may not run past the end of the file.
            (2, 8192, 4096, block, ("claims offset 8192 length 4096",
                                    "expected offset 8192 length 1808")),
            (0, 2 ** 64 - 1, 4096, block, ("object offset out of range",)),
            (0, 2 ** 64 - 1, 2 ** 32 - 1, block,
             ("object length out of range",)),
            (0, 0, 8192, block * 2, ("object of 8192 bytes exceeds the "
                                     "session's object size 4096",)),
            (0, 0, 64 << 20, block, ("exceeds the session's object size",)),
        ]
        for stream_index, (index, offset, length, payload, why) in \
                enumerate(cases):
            conn = sess.data(stream_index)
            conn.send_block(0, index, payload, offset=offset, length=length)
            err = self.assertError(sess.control, *why, fatal=False)
            self.assertEqual(errors.Code.BOUNDS, err.code, err)
            self.assertIn("data stream %d" % stream_index, err.message)
            self.assertIsNotNone(conn.wait_closed(5),
                                 "sink kept stream %d open" % stream_index)
            self.assertEqual(size, os.path.getsize(part),
                             "partial copy resized by %r" % (err.message,))
        # An object for a file never announced.
        conn = sess.data(len(cases))
        conn.send_block(7, 0, block)
        self.assertError(sess.control, "object for file 7, which was never "
                         "announced", fatal=False)
        self.assertIsNotNone(conn.wait_closed(5))
        # A 16 TiB file is refused up front; nothing is allocated.
        reply = sess.new_file(1, "huge.bin", P.MAX_OBJECTS * 4096)
        self.assertEqual(P.FileStatus.REFUSED, reply.status, reply)
        self.assertEqual(errors.Code.NO_SPACE, reply.code, reply)
        self.assertIn("not enough space for huge.bin", reply.message)
        # Only small.bin's copy (and, until its first objects are
        # reported, the mark of a copy created afresh).
        self.assertEqual([rawpeer.partial_name("small.bin")],
                         [n for n in os.listdir(os.path.dirname(part))
                          if not n.endswith(sink.UNCONFIRMED)])
        # The session is still good: the real objects complete the file.
        conn = sess.data(len(cases) + 1)
        for index in range(3):
            conn.send_block(0, index, data[index * 4096:(index + 1) * 4096])
        close = sess.control.expect(P.MsgType.FILE_CLOSE)
        self.assertEqual(P.CloseStatus.OK, close.status, close)
        with open(os.path.join(dst.staging, "small.bin"), "rb") as f:
            self.assertEqual(data, f.read())
        # A NEW_FILE beyond MAX_FILE_SIZE ends the session with an
        # ERROR naming the bound.
        reply = sess.new_file(2, "toobig.bin", P.MAX_FILE_SIZE + 1)
        self.assertEqual(P.MsgType.ERROR, reply.TYPE, reply)
        self.assertEqual(errors.Code.BOUNDS, reply.code)
        self.assertIn("file size out of range", reply.message)
        self.assertIsNotNone(sess.control.wait_closed(5))
        sess.close()
        # So does one with more objects than the protocol allows.
        sess = rawpeer.Session.open(dst.port, src.name, self.key,
                                    sink=dst.name)
        reply = sess.new_file(0, "many.bin", (P.MAX_OBJECTS + 1) * 4096,
                              object_size=4096)
        self.assertEqual(P.MsgType.ERROR, reply.TYPE, reply)
        self.assertIn("too many objects", reply.message)
        self.assertIsNotNone(sess.control.wait_closed(5))
        sess.close()
        legit.assert_running()

        self.assertLogged(dst, "data stream 0", "object index 3 beyond")
        self.assertLogged(dst, "object offset out of range")
        self.assertLogged(dst, "file size out of range")
        legit.finish()
        self.assertAlive(dst)
        self.assertEqual(sorted([legit.name, "small.bin", ".dtn-partial"]),
                         sorted(os.listdir(dst.staging)))
        self.assertEqual([], os.listdir(os.path.join(dst.staging,
                                                     ".dtn-partial")))
        guard.check(self)

    def test_oversized_done_set(self):
        """A NEW_FILE of a few dozen bytes whose ``done`` set claims the
        protocol's maximum number of objects (2**32 - 1) for a file that
        passes the space check (the size of the sink's whole file system,
        in the session's 4 KiB objects) must reach the done-set check and
        be refused there at once, with the error naming the bound; the
        same again on many sessions at once.
        """
        src, dst = self.pair()
        guard = Guard(dst, self.workdir)
        legit = Legit(self, src, dst, 64 * MiB, 4 * MiB)
        vfs = os.statvfs(dst.staging)
        size = vfs.f_blocks * vfs.f_frsize // 4096 * 4096
        nobjects = P.MAX_OBJECTS
        done = varint.encode_many([0, nobjects])    # "all of them"
        msg = P.NewFile(0, P.FileFlags.NO_SHA512, size, 0, 0o644, 4096,
                        bytes(64), "huge.bin", done)

        def attack(_):
            sess = rawpeer.Session.open(dst.port, src.name, self.key,
                                        sink=dst.name)
            start = time.monotonic()
            sess.control.send(msg)
            try:
                return sess.control.expect(P.MsgType.FILE_ID,
                                           P.MsgType.ERROR, timeout=10), \
                    time.monotonic() - start
            finally:
                sess.close()
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            results = list(pool.map(attack, range(16)))
        legit.assert_running()

        legit.finish()
        self.assertAlive(dst)
        self.assertEqual(sorted([legit.name, ".dtn-partial"]),
                         sorted(os.listdir(dst.staging)))
        guard.check(self)
        for reply, took in results:
            self.assertEqual(P.MsgType.FILE_ID, reply.TYPE, reply)
            self.assertEqual(P.FileStatus.REFUSED, reply.status, reply)
            self.assertEqual(errors.Code.BOUNDS, reply.code, reply)
            self.assertIn("done set covers %d objects, file has %d"
                          % (nobjects, size // 4096), reply.message)
            self.assertLess(took, 5.0)
        self.assertLogged(dst, "done set covers %d objects" % nobjects)

    # 5. Truncated frames.
    def test_truncated_frames(self):
        src, dst = self.pair()
        guard = Guard(dst, self.workdir)
        legit = Legit(self, src, dst, 64 * MiB, 8 * MiB)
        connect = rawpeer.frame(P.Connect(
            P.VERSION, P.VERSION, P.Role.CONTROL, 0, 0, os.urandom(16), 0,
            4096, 1, os.urandom(32), src.name, sink=dst.name))

        def closed_after(data):
            peer = rawpeer.RawPeer(dst.port, sink=dst.name)
            addr = "%s:%d" % peer.sock.getsockname()[:2]
            peer.send_raw(data)
            peer.sock.shutdown(socket.SHUT_WR)
            self.assertIsNotNone(peer.wait_closed(5))
            peer.close()
            return addr

        # Before the handshake: half a header; a header promising more
        # body than is sent.
        half = closed_after(connect[:6])
        short = closed_after(connect[:P.HEADER_SIZE + 10])
        # A header promising a body beyond MAX_BODY gets an ERROR at
        # once, whatever follows.
        liar = rawpeer.RawPeer(dst.port, sink=dst.name)
        liar.send_raw(rawpeer.frame(mtype=P.MsgType.CONNECT, body=b"x" * 64,
                                    length=2 ** 32 - 1))
        self.assertError(liar, "frame body of 4294967295 bytes exceeds %d"
                         % P.MAX_BODY)
        self.assertIsNotNone(liar.wait_closed(5))
        liar.close()

        # After the handshake, on a control connection: a NEW_FILE whose
        # header promises more than is sent.
        sess = rawpeer.Session.open(dst.port, src.name, self.key,
                                    sink=dst.name)
        new_file = rawpeer.frame(P.NewFile(0, P.FileFlags.NO_SHA512, 4096, 0,
                                           0o644, 4096, bytes(64), "t.bin"),
                                 flags=P.FLAG_TAG)
        sess.control.send_raw(new_file[:-5])
        sess.control.sock.shutdown(socket.SHUT_WR)
        self.assertIsNotNone(sess.control.wait_closed(5))
        sess.close()
        control_tid = sess.tid

        # On a data stream: a NEW_BLOCK whose payload is cut short.
        sess = rawpeer.Session.open(dst.port, src.name, self.key,
                                    sink=dst.name)
        data = os.urandom(8192)
        reply = sess.new_file(0, "cut.bin", len(data),
                              sha512=hashlib.sha512(data).digest())
        self.assertEqual(P.FileStatus.OPEN, reply.status, reply)
        conn = sess.data(0)
        conn.send_block(0, 1, data[4096:], send=1000)
        conn.sock.shutdown(socket.SHUT_WR)
        err = self.assertError(sess.control, "data stream 0",
                               "closed the connection inside a frame",
                               fatal=False)
        self.assertEqual(errors.Code.PROTOCOL, err.code)
        self.assertIsNotNone(conn.wait_closed(5))
        # Nothing of the cut object was taken; the file can still finish.
        incoming = self.api.get_incoming({}, dst.name, sess.tid)
        self.assertEqual(0, incoming["objects_received"], incoming)
        part = os.path.join(dst.staging, ".dtn-partial", sess.tid,
                            rawpeer.partial_name("cut.bin"))
        self.assertEqual(len(data), os.path.getsize(part))
        conn = sess.data(1)
        for index in (1, 0):
            conn.send_block(0, index, data[index * 4096:(index + 1) * 4096])
        close = sess.control.expect(P.MsgType.FILE_CLOSE)
        self.assertEqual(P.CloseStatus.OK, close.status, close)
        self.assertEqual(P.MsgType.BYE, sess.bye().TYPE)
        sess.close()
        legit.assert_running()

        for addr in (half, short):
            self.assertLogged(dst, "closing connection from %s" % addr,
                              "closed the connection inside a frame")
        self.assertLogged(dst, "frame body of 4294967295 bytes exceeds")
        self.assertLogged(dst, "transfer %s from %s" % (control_tid,
                                                        src.name),
                          "closed the connection inside a frame")
        self.assertLogged(dst, "transfer %s, data stream 0" % sess.tid,
                          "closed the connection inside a frame",
                          "closing that connection")
        legit.finish()
        self.assertAlive(dst)
        with open(os.path.join(dst.staging, "cut.bin"), "rb") as f:
            self.assertEqual(data, f.read())
        self.assertEqual(sorted([legit.name, "cut.bin", ".dtn-partial"]),
                         sorted(os.listdir(dst.staging)))
        guard.check(self)

    # 6. Random bytes.
    def test_random_bytes(self):
        src, dst = self.pair()
        guard = Guard(dst, self.workdir)
        legit = Legit(self, src, dst, 64 * MiB, 4 * MiB)
        rng = random.Random(20240605)

        def junk(n):
            data = bytes(rng.getrandbits(8) for _ in range(min(n, 4096)))
            return (data * (n // len(data) + 1))[:n]

        def quick(data, reply=None):
            """Send ``data``; the agent must hang up within 3 s."""
            peer = rawpeer.RawPeer(dst.port, sink=dst.name)
            peer.send_raw(data)
            if reply is not None:
                self.assertError(peer, reply)
            took = peer.wait_closed(5)
            peer.close()
            self.assertIsNotNone(took, "agent kept %r... open"
                                 % (data[:16],))
            self.assertLess(took, 3.0)

        def silent(prefix):
            """Send ``prefix``, then nothing: dropped by the handshake
            timeout, not kept forever.
            """
            peer = rawpeer.RawPeer(dst.port, timeout=30, sink=dst.name)
            start = time.monotonic()
            peer.send_raw(prefix)
            took = peer.wait_closed(HANDSHAKE_TIMEOUT + 10)
            peer.close()
            self.assertIsNotNone(took, "agent kept a silent client %r "
                                 "open" % (prefix[:16],))
            return time.monotonic() - start

        hello = rawpeer.frame(P.Connect(
            P.VERSION, P.VERSION, P.Role.CONTROL, 0, 0, os.urandom(16), 0,
            4096, 1, os.urandom(32), src.name, sink=dst.name))
        # Less than a frame header, or a CONNECT and no AUTH: the agent
        # cannot tell yet, and waits for the handshake timeout.
        silent_prefixes = (b"", junk(1), junk(P.HEADER_SIZE - 1),
                           hello[:5], hello)
        pool = concurrent.futures.ThreadPoolExecutor(len(silent_prefixes))
        self.addCleanup(pool.shutdown)
        slow = [pool.submit(silent, p) for p in silent_prefixes]
        for n in (P.HEADER_SIZE, 17, 1000, 65536, 3 * MiB, 5 * MiB):
            quick(junk(n))
        quick(b"GET / HTTP/1.1\r\nHost: dtn\r\n\r\n",
              reply="bad frame magic b'GET ': not a dtn-migrate peer")
        quick(b"DTNM" + junk(4 * MiB))
        quick(b"DTNM\x07" + junk(1000),
              reply="unsupported protocol version 7")
        quick(b"\x16\x03\x01\x02\x00" + junk(512))     # a TLS ClientHello
        for future in slow:
            took = future.result(timeout=HANDSHAKE_TIMEOUT + 15)
            self.assertGreater(took, HANDSHAKE_TIMEOUT - 1)
            self.assertLess(took, HANDSHAKE_TIMEOUT + 5)
        legit.assert_running()

        self.assertLogged(dst, "not a dtn-migrate peer")
        self.assertLogged(dst, "offered TLS but this agent has no "
                          "certificate")
        # The handshake deadline is absolute (not per byte received).
        self.assertLogged(dst, "did not authenticate within %.1f s"
                          % HANDSHAKE_TIMEOUT)
        legit.finish()
        self.assertAlive(dst)
        self.assertEqual({legit.tid}, self.incoming_ids(dst))
        self.assertEqual(sorted([legit.name, ".dtn-partial"]),
                         sorted(os.listdir(dst.staging)))
        guard.check(self)

    # 7. Full disk.
    def test_full_disk(self):
        disk = os.path.join(self.workdir, "disk")
        os.makedirs(disk)
        try:
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m",
                            "tmpfs", disk], check=True, timeout=30,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except (OSError, subprocess.SubprocessError) as exc:
            self.skipTest("cannot mount a tmpfs for a full disk (needs "
                          "root or CAP_SYS_ADMIN): %s" % exc)
        self.addCleanup(subprocess.run, ["umount", "-l", disk],
                        timeout=30)
        staging = os.path.join(disk, "staging")
        a = self.mesh({
            "src": (["dst", "small"], {}),
            "dst": (["src"], {}),
            "small": (["src"], {"staging": staging, "transfer": {
                "preallocate": "false", "min_free_bytes": "0"}}),
        })
        src, dst, small = a["src"], a["dst"], a["small"]
        guard = Guard(small, self.workdir)
        guard_dst = Guard(dst)
        for name, size in (("big.raw", 64 * MiB), ("f1.raw", 30 * MiB),
                           ("f2.raw", 30 * MiB), ("ok.raw", MiB)):
            base.make_file(os.path.join(src.staging, name), size,
                           seed=size + len(name))
        legit = Legit(self, src, dst, 64 * MiB, 8 * MiB)

        # (a) Too big for the file system: refused up front.
        tid = self.start_transfer(src, small, ["big.raw"])
        status = self.wait_for(src, tid, timeout=60)
        self.assertEqual("failed", status["state"], status)
        self.assertIn("not enough space for big.raw", status["error"])
        self.assertIn("not enough space", status["files"][0]["error"])
        self.assertLogged(small, "refusing 'big.raw'", "not enough space")

        # (b) Each fits, both do not: the disk fills during the writes.
        tid = self.start_transfer(src, small, ["f1.raw", "f2.raw"])
        status = self.wait_for(src, tid, timeout=60)
        self.assertEqual("failed", status["state"], status)
        files = {f["name"]: f for f in status["files"]}
        failed = [f for f in files.values() if f["state"] == "failed"]
        enospc = [f for f in failed
                  if "No space left on device" in f["error"]]
        # At least one file hit ENOSPC while being written (the other
        # may have, too, or completed, or, if the disk was already full
        # when it was announced, been refused for space).
        self.assertNotEqual([], enospc, status)
        for f in failed:
            self.assertIn("space", f["error"])
        self.assertLogged(small, "file failed", "No space left on device")
        self.assertAlive(small)
        incoming = self.api.get_incoming({}, small.name, tid)
        for f in failed:
            self.assertEqual("failed", incoming["files"][f["name"]]["state"])
        for f in files.values():
            if f["state"] == "complete":
                self.assertSame(os.path.join(src.staging, f["name"]),
                                os.path.join(staging, f["name"]))

        # Free the space the failed copies hold (once the sink has closed
        # them); the sink takes files again.
        deadline = time.monotonic() + 30
        while self.api.get_incoming({}, small.name, tid)["active"]:
            self.assertLess(time.monotonic(), deadline,
                            "sink session did not end")
            time.sleep(0.1)
        partial = os.path.join(staging, ".dtn-partial", tid)
        for name in os.listdir(partial):
            os.unlink(os.path.join(partial, name))
        tid = self.start_transfer(src, small, ["ok.raw"])
        status = self.wait_for(src, tid, timeout=60)
        self.assertEqual("complete", status["state"], status.get("error"))
        self.assertSame(os.path.join(src.staging, "ok.raw"),
                        os.path.join(staging, "ok.raw"))
        legit.assert_running()

        legit.finish()
        self.assertAlive(small)
        self.assertAlive(dst)
        self.assertEqual(sorted([legit.name, ".dtn-partial"]),
                         sorted(os.listdir(dst.staging)))
        guard.check(self)
        guard_dst.check(self)
