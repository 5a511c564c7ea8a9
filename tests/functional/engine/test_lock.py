"""The engine lock on an SQLite persistence database against a holder
in a process of its own, killed -9: the operating system drops the
lock at once (the rest: ``tests/unit/engine/test_lock.py``).
"""

import os
import signal
import subprocess
import sys
import time

from dtn_migrate import exception
from tests.unit.engine import test_lock

HOLD = r'''
import sys, time
from dtn_migrate.engine import lock
lock.EngineLock(sys.argv[1]).acquire()
print("held", flush=True)
time.sleep(600)
'''


class TestSqliteLock(test_lock.SqliteLockCase):
    def test_killed_holder_releases_at_once(self):
        for _ in range(3):
            proc = subprocess.Popen([sys.executable, "-c", HOLD, self.db],
                                    stdout=subprocess.PIPE, text=True)
            self.addCleanup(proc.wait)
            self.addCleanup(proc.kill)
            self.assertEqual("held", proc.stdout.readline().strip())
            err = self.assertRaises(exception.PersistenceInUse,
                                    self.engine_lock().acquire)
            self.assertIn("pid %d" % proc.pid, str(err))
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            t0 = time.monotonic()
            held = self.engine_lock(timeout=0)
            held.acquire()
            self.assertLess(time.monotonic() - t0, 1)
            held.release()
