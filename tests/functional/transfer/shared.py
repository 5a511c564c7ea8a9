"""Two agents (``src`` -> ``dst``) shared by every test of a class,
optionally with a relay (devcloud/relay.py) in front of ``dst``.
"""

import os
import shutil
import tempfile

from tests.functional import base
from devcloud import relay as relay_mod


class SharedPairTestCase(base.FunctionalTestCase):
    names = ("src-shared", "dst-shared")
    #: Put a relay between the agents (``cls.relay``).
    with_relay = False

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.classdir = tempfile.mkdtemp(prefix="dtnm-func-",
                                        dir=base.data_root())
        cls.shared = []
        cls.relay = None
        try:
            cls._start_pair()
        except BaseException:
            cls._stop_pair()
            super().tearDownClass()
            raise

    @classmethod
    def _start_pair(cls):
        src_name, dst_name = cls.names
        key = os.urandom(32).hex()
        dst_port = base.free_port()
        to_dst = dst_port
        if cls.with_relay:
            cls.relay = relay_mod.Relay(("127.0.0.1", dst_port))
            to_dst = cls.relay.port
        cls.src = base.Agent(cls.classdir, src_name, key, cls.broker.url(),
                             {dst_name: ("127.0.0.1", to_dst)},
                             transfer=cls.transfer_conf)
        cls.dst = base.Agent(cls.classdir, dst_name, key, cls.broker.url(),
                             {src_name: ("127.0.0.1", cls.src.port)},
                             port=dst_port, transfer=cls.transfer_conf)
        api = base.rpc_api(cls.broker.url())
        cls.shared += [cls.dst, cls.src]
        base.start_agents([cls.dst, cls.src], lambda a: a.wait_ready(api),
                          relays=[cls.relay] if cls.relay else [])

    @classmethod
    def _stop_pair(cls):
        for a in reversed(cls.shared):
            a.stop()
        if cls.relay is not None:
            cls.relay.close()
        shutil.rmtree(cls.classdir, True)

    @classmethod
    def tearDownClass(cls):
        cls._stop_pair()
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        for a in (self.src, self.dst):
            base.log_details(self, a)
