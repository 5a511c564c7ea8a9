"""The harness starts agents whose ports another process took between
the choice of each port and its bind (a fresh-clone run lost an agent to
"Address already in use" once): they choose again, and so do the
configurations that name them.
"""

import os
import socket
import uuid

from tests.functional import base

MiB = base.MiB


def _taken():
    """A port that another socket of this process listens on."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    return s


class TestLostPorts(base.FunctionalTestCase):
    def test_agents_that_lose_their_ports_choose_again(self):
        # Both ports are taken, every time the harness starts agents.
        for _ in range(2):
            blockers = {r: _taken() for r in ("src", "dst")}
            for s in blockers.values():
                self.addCleanup(s.close)
            taken = {r: s.getsockname()[1] for r, s in blockers.items()}
            names = {r: "%s-%s" % (r, uuid.uuid4().hex[:6])
                     for r in ("src", "dst")}
            src = self.agent(names["src"],
                             {names["dst"]: ("127.0.0.1", taken["dst"])},
                             port=taken["src"])
            dst = self.agent(names["dst"],
                             {names["src"]: ("127.0.0.1", taken["src"])},
                             port=taken["dst"])
            base.start_agents([src, dst],
                              lambda a: a.wait_ready(self.api))
            self.assertNotIn(src.port, taken.values())
            self.assertNotIn(dst.port, taken.values())
            # Each configuration names the other's new port ...
            self.assertEqual(("127.0.0.1", dst.port), src.peers[dst.name])
            self.assertEqual(("127.0.0.1", src.port), dst.peers[src.name])
            # ... and a transfer crosses on it.
            path = os.path.join(src.staging, "f.raw")
            base.make_file(path, 2 * MiB, seed=3)
            tid = self.start_transfer(src, dst, ["f.raw"])
            status = self.wait_for(src, tid)
            self.assertEqual("complete", status["state"], status)
            self.assertSame(path, os.path.join(dst.staging, "f.raw"))
