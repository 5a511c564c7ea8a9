"""``./tools/demo`` and ``--serve``: the arguments and how it ends
(devcloud.demo.main), each run in a process of its own: devcloud.demo
selects oslo.service's threading backend, which this test process may
not.
"""

import json
import subprocess
import sys

from tests.unit import testcase


#: Runs devcloud.demo.main with a stand-in Playground whose run() raises
#: KeyboardInterrupt (after or before it is ready); prints what happened.
MAIN = """
import json, signal, sys
from unittest import mock
from devcloud import demo
ready, inherited = sys.argv[1] == "ready", sys.argv[2]
signal.signal(signal.SIGINT, getattr(signal, inherited))
seen = {}
def run():
    seen["handler"] = signal.getsignal(signal.SIGINT) is demo._interrupt
    raise KeyboardInterrupt
fake = mock.Mock(ready=ready, workdir=None)
fake.run.side_effect = run
with mock.patch("devcloud.playground.Playground", return_value=fake):
    try:
        demo.main(["--serve"])
    except SystemExit as exc:
        seen["code"] = exc.code
seen["cleanups"] = fake.cleanup.call_count
print(json.dumps(seen))
"""


class TestMain(testcase.TestCase):

    def run_main(self, *args):
        proc = subprocess.run([sys.executable, "-c", MAIN] + list(args),
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(0, proc.returncode, proc.stderr)
        return json.loads(proc.stdout.splitlines()[-1]), proc

    def test_serve_refuses_the_in_process_bus(self):
        proc = subprocess.run([sys.executable, "-m", "devcloud.demo",
                               "--serve", "--transport", "fake"],
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(2, proc.returncode)
        self.assertIn("--serve needs RabbitMQ", proc.stderr)

    def test_ctrl_c_ends_a_ready_playground_with_0(self):
        seen, proc = self.run_main("ready", "SIG_DFL")
        self.assertEqual({"handler": True, "code": 0, "cleanups": 1}, seen)
        self.assertIn("stopping the playground", proc.stdout)

    def test_ctrl_c_while_it_starts_is_an_interruption(self):
        seen, _proc = self.run_main("starting", "SIG_DFL")
        self.assertEqual({"handler": True, "code": 130, "cleanups": 1},
                         seen)

    def test_sigint_is_handled_even_when_inherited_ignored(self):
        # As a shell starts a background job ("./tools/demo --serve &").
        seen, _proc = self.run_main("ready", "SIG_IGN")
        self.assertEqual({"handler": True, "code": 0, "cleanups": 1}, seen)
