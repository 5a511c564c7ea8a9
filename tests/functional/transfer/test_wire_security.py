"""Wire security between real agents (issue 11, items 2 and 3).

One set of agents serves the whole class: ``src`` sends straight to
``dst``; ``msrc`` sends to ``dst`` through a frame-aware man in the
middle (``tests.mitm``, in this process).  ``dst`` holds unauthenticated
connections for at most 2 s, 8 at once, 3 per source address.

* Trickling clients, many at once, from several source addresses: each
  is closed by the absolute handshake deadline or at once by a cap, the
  agent's threads and memory stay bounded, and real transfers (one that
  was running, and one started during the attack) go on undisturbed.
* The man in the middle rewrites control frames and objects, fixing up
  CRC-32 and xxh3, in sha512 and xxh3-only modes: each change is
  detected by the agent, never accepted, and the transfers complete
  bit-exact once the attack stops.
* The man in the middle redirects ``msrc``'s connections for ``dst`` to
  ``dst2``, a sink that holds the same key and knows ``msrc`` (issue 36,
  item 10): the transfer fails with an error that names both sinks,
  and nothing reaches ``dst2``.
"""

import hashlib
import os
import shutil
import tempfile
import time
import uuid

from dtn_migrate.transfer.wire import protocol as P
from tests.functional import base
from tests.functional.transfer import test_bad_input
from tests import mitm
from tests import trickle

MiB = base.MiB
DEADLINE = 2.0
MAX_UNAUTH = 8
PER_ADDRESS = 3


def proc_status(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


class TestWireSecurity(base.FunctionalTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.shared = tempfile.mkdtemp(prefix="dtnm-wire-",
                                      dir=base.data_root())
        cls.shared_key = os.urandom(32).hex()
        api = base.rpc_api(cls.broker.url())
        names = {r: "%s-%s" % (r, uuid.uuid4().hex[:6])
                 for r in ("src", "msrc", "dst", "dst2")}
        ports = {r: base.free_port() for r in names}
        # The man in the middle listens before msrc is configured to
        # dial it, on a port of its own choosing.
        cls.mitm = mitm.Mitm(("127.0.0.1", ports["dst"]),
                             mitm.Attacks("object", 0))
        cls.mitm_port = cls.mitm.port
        url = cls.broker.url()
        limits = {"handshake_timeout": DEADLINE,
                  "max_unauthenticated": MAX_UNAUTH,
                  "max_unauthenticated_per_address": PER_ADDRESS}
        cls.dst = base.Agent(cls.shared, names["dst"], cls.shared_key, url,
                             {names["src"]: ("127.0.0.1", ports["src"]),
                              names["msrc"]: ("127.0.0.1", ports["msrc"])},
                             port=ports["dst"], transfer=limits)
        cls.src = base.Agent(cls.shared, names["src"], cls.shared_key, url,
                             {names["dst"]: ("127.0.0.1", ports["dst"])},
                             port=ports["src"])
        cls.msrc = base.Agent(cls.shared, names["msrc"], cls.shared_key, url,
                              {names["dst"]: ("127.0.0.1", cls.mitm_port)},
                              port=ports["msrc"],
                              transfer={"reconnect_max_interval": 0.5})
        # Another sink with the same key, which knows msrc too.
        cls.dst2 = base.Agent(cls.shared, names["dst2"], cls.shared_key,
                              url, {names["msrc"]: ("127.0.0.1",
                                                    ports["msrc"])},
                              port=ports["dst2"])
        cls.all_agents = (cls.dst, cls.src, cls.msrc, cls.dst2)
        try:
            base.start_agents(cls.all_agents, lambda a: a.wait_ready(api),
                              relays=[cls.mitm])
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        for a in cls.all_agents:
            a.stop()
        cls.mitm.close()
        shutil.rmtree(cls.shared, True)
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        self.key = self.shared_key
        for a in self.all_agents:
            base.log_details(self, a)

    def swarm(self, addresses, per_address, **kw):
        swarm = trickle.Swarm(self.dst.port, addresses, per_address, **kw)
        self.addCleanup(swarm.close)
        return swarm

    def assertDeadlineKept(self, swarm):
        held = swarm.wait_all_closed(DEADLINE + 8)
        self.assertEqual([], held, "trickling clients still held")
        lifetimes = swarm.lifetimes()
        self.assertLess(lifetimes[-1], DEADLINE + 3.0, lifetimes)

    # Item 2.
    def test_trickling_clients_while_transfers_go_on(self):
        src, dst = self.src, self.dst
        pid = dst.proc.pid
        legit = test_bad_input.Legit(self, src, dst, 48 * MiB, 6 * MiB,
                                     name="legit-%s.raw" % uuid.uuid4().hex)
        threads0 = proc_status(pid, "Threads")
        rss0 = proc_status(pid, "VmRSS")
        big = trickle.connect_frame(header_length=P.MAX_BODY)
        for _round in range(2):
            # Two attacker addresses, eight each; plus headers that claim
            # 8 MiB CONNECT bodies and then trickle.
            swarm = self.swarm(["127.0.3.1", "127.0.3.2"], 8, interval=0.3)
            liars = self.swarm(["127.0.3.3"], 8, interval=0.3, data=big,
                               burst=P.HEADER_SIZE)
            time.sleep(1.0)
            for a in ("127.0.3.1", "127.0.3.2"):
                self.assertLessEqual(len(swarm.held_from(a)), PER_ADDRESS)
            self.assertEqual([], liars.held(), "8 MiB CONNECT kept open")
            self.assertLessEqual(proc_status(pid, "Threads"),
                                 threads0 + MAX_UNAUTH + 4)
            # A new transfer from another host starts and completes
            # during the attack.
            name = "new-%s.raw" % uuid.uuid4().hex
            path = os.path.join(src.staging, name)
            base.make_file(path, 4 * MiB, seed=_round)
            tid = self.start_transfer(src, dst, [name])
            status = self.wait_for(src, tid, timeout=60)
            self.assertEqual("complete", status["state"], status)
            self.assertSame(path, os.path.join(dst.staging, name))
            self.assertDeadlineKept(swarm)
        # Many addresses at once: the global cap.
        swarm = self.swarm(["127.0.4.%d" % i for i in range(1, 7)],
                           PER_ADDRESS, interval=0.3)
        time.sleep(1.0)
        self.assertLessEqual(len(swarm.held()), MAX_UNAUTH)
        self.assertDeadlineKept(swarm)
        rss = proc_status(pid, "VmRSS")
        self.assertLess(rss - rss0, 40 * 1024, "RSS grew from %d to %d kB"
                        % (rss0, rss))
        legit.assert_running()
        legit.finish()
        self.assertLogged(dst, "did not authenticate within %.1f s"
                          % DEADLINE)
        self.assertLogged(dst, "refused a connection from 127.0.3.1",
                          "still authenticating")

    def assertLogged(self, agent, *fragments):
        for line in agent.log_text().splitlines():
            if all(f in line for f in fragments):
                return line
        self.fail("no line of %s's log contains %r" % (agent.name,
                                                       fragments))

    # Item 3.
    def test_man_in_the_middle(self):
        msrc, dst = self.msrc, self.dst
        attacks = []
        relay = self.mitm
        for verify in (True, False):
            # xxh3 only: no FILE_CLOSE DECLARE to forge.
            for kind, count in (("forge", 3 if verify else 2),
                                ("object", 6), ("control", 2)):
                name = "%s-%s-%s.raw" % (kind, verify, uuid.uuid4().hex[:6])
                path = os.path.join(msrc.staging, name)
                base.make_file(path, 8 * MiB, seed=count)
                forged = None
                if kind == "forge":
                    with open(path, "rb") as f:
                        data = bytearray(f.read())
                    data[0] ^= 0xFF
                    forged = hashlib.sha512(bytes(data)).digest()
                attack = relay.attack = mitm.Attacks(kind, count, forged)
                tid = self.start_transfer(
                    msrc, dst, [name],
                    options={"verify_sha512": verify, "object_size": MiB})
                status = self.wait_for(msrc, tid, timeout=120)
                self.assertEqual("complete", status["state"], status)
                self.assertEqual(count, attack.hits, (kind, verify))
                self.assertSame(path, os.path.join(dst.staging, name))
                attacks.append((kind, verify, status["attempts"]))
        self.assertLogged(dst, "fails its authentication tag")

    # Issue 36 item 10.
    def test_redirected_to_another_sink(self):
        msrc, dst, dst2 = self.msrc, self.dst, self.dst2
        relay = self.mitm
        relay.attack = mitm.Attacks("object", 0)
        upstream = relay.upstream
        self.addCleanup(setattr, relay, "upstream", upstream)
        for _round in range(2):
            relay.upstream = ("127.0.0.1", dst2.port)
            name = "redirected-%s.raw" % uuid.uuid4().hex[:6]
            base.make_file(os.path.join(msrc.staging, name), MiB,
                           seed=_round)
            tid = self.start_transfer(msrc, dst, [name])
            status = self.wait_for(msrc, tid, timeout=60)
            self.assertEqual("failed", status["state"], status)
            self.assertIn("this is sink %r, not %r" % (dst2.name, dst.name),
                          status["error"])
            self.assertEqual(1, status["attempts"], status)
            self.assertFalse(os.path.exists(os.path.join(dst2.staging,
                                                         name)))
            # With the connection going where it was meant to, the same
            # file gets across.
            relay.upstream = upstream
            tid = self.start_transfer(msrc, dst, [name])
            status = self.wait_for(msrc, tid, timeout=60)
            self.assertEqual("complete", status["state"], status)
            self.assertSame(os.path.join(msrc.staging, name),
                            os.path.join(dst.staging, name))
        self.assertLogged(dst2, "(peer %r) meant to reach sink %r, but "
                          "this is sink %r" % (msrc.name, dst.name,
                                               dst2.name))
