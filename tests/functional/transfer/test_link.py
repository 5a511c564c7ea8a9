"""Acceptance 3: each agent in its own network namespace, joined by a
veth with TEST-NET-1 addresses; the link goes down for 20 s in the middle
of a transfer; the transfer completes with no operator action.
"""

import os
import time

from tests.functional import base
from devcloud import netns

MiB = base.MiB
SIZE = 1024 * MiB
WINDOW = 32 * MiB


class TestLinkCut(base.FunctionalTestCase):
    transfer_conf = {
        "object_size": MiB,
        "window_bytes": WINDOW,
        "rate_limit": 100 * MiB,
        "tcp_user_timeout": 10,
        "reconnect_initial_interval": 0.2,
        "reconnect_max_interval": 2.0,
        "connect_timeout": 2.0,
    }

    def setUp(self):
        super().setUp()
        base.need_netns(self)
        self.lab = netns.Lab()
        self.lab.start()
        self.addCleanup(self.lab.close)
        # The broker lives in the root namespace; reach it from both.
        self.lab.forward("a", 5672)
        self.lab.forward("b", 5672)

    def test_link_down_20s(self):
        lab = self.lab
        port = 47100
        src = self.agent("src-ns", {"dst-ns": (lab.addr_b, port)},
                         lab=lab, ns="a", listen_address=lab.addr_a,
                         port=port)
        dst = self.agent("dst-ns", {"src-ns": (lab.addr_a, port)},
                         lab=lab, ns="b", listen_address=lab.addr_b,
                         port=port)
        for a in (dst, src):
            a.start()
        for a in (dst, src):
            a.wait_ready(self.api)
        path = os.path.join(src.staging, "image.raw")
        base.make_file(path, SIZE, seed=3)
        tid = self.start_transfer(src, dst, ["image.raw"])
        self.wait_for(src, tid, until=lambda s: s.get("percent", 0) >= 30)
        lab.link_down()
        self.assertFalse(lab.reachable("a", lab.addr_b, port))
        down_at = self.status(src, tid)["bytes_done"]
        time.sleep(20)
        during = self.status(src, tid)
        self.assertEqual("running", during["state"])
        # Nothing could have become durable at the sink while cut off.
        self.assertLessEqual(during["bytes_done"] - down_at, WINDOW)
        lab.link_up()
        status = self.wait_for(src, tid, timeout=180)
        self.assertEqual("complete", status["state"], status.get("error"))
        self.assertGreaterEqual(status["attempts"], 2)
        self.assertLessEqual(status["bytes_resent"], WINDOW)
        self.assertSame(path, os.path.join(dst.staging, "image.raw"))
