"""The jobboard of active/active engines on a real ZooKeeper and a real
Redis (issue 39): conductors in processes of their own
(``conductor_main``) claim the jobs, and a conductor killed with -9, or
paused past its session, loses its jobs to another, which is told
nothing ran twice (each job once over several engines:
``tests/functional/engine/test_active_active.py``).  One private server
per class (:mod:`devcloud.coordination`), one jobboard namespace per
test.
"""

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid

from oslo_config import cfg
from taskflow import exceptions as tf_exc
from taskflow.persistence import backends as persistence_backends
import testtools

from devcloud import coordination
from dtn_migrate import conf as dtn_conf
from dtn_migrate.coordination import conductor as conductor_mod
from dtn_migrate.coordination import jobboard
from tests.functional.migration import scope as class_scope

#: The helper's session timeout and claim expiry (seconds).
SESSION = 2.0
#: What a takeover may take beyond it (the server notices the session's
#: end, the watch fires, a conductor claims).
MARGIN = 6.0


class _JobboardTests:
    kind = driver_name = server_class = None

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        ok, why = coordination.available(cls.kind)
        if not ok:
            class_scope.ClassScope.skipTest(why)
        cls.server = cls.server_class().start()

    @classmethod
    def tearDownClass(cls):
        cls.server.close()
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture_tempdir()
        self.namespace = "dtnm-test-%s" % uuid.uuid4().hex[:8]
        self.log = os.path.join(self.dir, "conductors.log")
        open(self.log, "w").close()
        self.procs = {}
        conf = cfg.ConfigOpts()
        dtn_conf.register_opts(conf)
        conf([], project="dtn-migrate-test")
        for key, value in (("jobboard_backend_driver", self.driver_name),
                           ("jobboard_backend_port", self.server.port),
                           ("jobboard_backend_namespace", self.namespace)):
            conf.set_override(key, value, "task_flow")
        self.driver = jobboard.get_driver(conf)
        stack = contextlib.ExitStack()
        self.addCleanup(stack.close)
        persistence = persistence_backends.fetch({"connection": "memory://"})
        self.board = stack.enter_context(self.driver.job_board(persistence))

    def useFixture_tempdir(self):
        path = tempfile.mkdtemp(prefix="dtnm-jobboard-")
        self.addCleanup(subprocess.run, ["rm", "-rf", path])
        return path

    # Conductors.
    def conductor(self, name):
        proc = subprocess.Popen(
            [sys.executable, "-m",
             "tests.functional.coordination.conductor_main", name,
             self.log, self.driver_name, "127.0.0.1",
             str(self.server.port), self.namespace],
            stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(self.dir, name + ".err"), "wb"))
        self.procs[name] = proc
        self.addCleanup(self._stop, proc)
        self.wait(lambda: ("ready", name) in
                  {(e[0], e[2]) for e in self.events()},
                  "conductor %s ready" % name, 60)
        return proc

    def _stop(self, proc):
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
        proc.wait(30)

    def events(self):
        """(what, job, conductor, time) of the conductors' log."""
        with open(self.log) as f:
            return [tuple(line.split()[:3]) + (float(line.split()[3]),)
                    for line in f if line.strip()]

    def of(self, what, job=None):
        return [e for e in self.events()
                if e[0] == what and (job is None or e[1] == job)]

    def wait(self, predicate, what, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.05)
        err = "".join(open(os.path.join(self.dir, f)).read()[-2000:]
                      for f in os.listdir(self.dir) if f.endswith(".err"))
        self.fail("%s: not in %d s; log %s; stderr %s" % (
            what, timeout, self.events(), err))

    def post(self, name, **details):
        # After a restart of the backend the board's session may have
        # expired: its client starts a new one within seconds.
        deadline = time.monotonic() + 30
        while True:
            try:
                return self.board.post(name, details=details)
            except tf_exc.JobFailure:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def jobs_left(self):
        return [j for j in self.board.iterjobs(ensure_fresh=True)
                if j.state != "COMPLETE"]

    # The tests.
    def test_a_killed_or_paused_conductor_loses_its_job(self):
        """kill -9, twice, then SIGSTOP past the session and SIGCONT:
        another conductor claims the job each time within the session
        and a margin; the paused one is told it lost it; the job is
        done once.
        """
        for name in ("c1", "c2", "c3", "c4"):
            self.conductor(name)
        until = os.path.join(self.dir, "go")
        self.post("long", until=until)
        self.wait(lambda: self.of("claimed", "long"), "a first claim")
        takeovers = []
        for fault in ("kill", "kill", "stop"):
            before = self.of("claimed", "long")
            owner = before[-1][2]
            proc = self.procs[owner]
            t0 = time.time()
            if fault == "kill":
                proc.kill()
            else:
                proc.send_signal(signal.SIGSTOP)
            self.wait(lambda: len(self.of("claimed", "long")) > len(before),
                      "a claim after %s of %s" % (fault, owner),
                      SESSION + MARGIN + 10)
            claim = self.of("claimed", "long")[-1]
            self.assertNotEqual(owner, claim[2])
            takeovers.append(round(claim[3] - t0, 2))
            if fault == "stop":
                proc.send_signal(signal.SIGCONT)
                self.wait(lambda: [e for e in self.of("lost", "long")
                                   if e[2] == owner],
                          "%s told it lost the job" % owner, 30)
        self.addDetail("takeover-seconds", testtools.content.text_content(
            repr(takeovers)))
        for took in takeovers:
            self.assertLess(took, SESSION + MARGIN, takeovers)
        open(until, "w").close()
        self.wait(lambda: self.of("done", "long"), "the job done")
        time.sleep(1.0)
        [done] = self.of("done", "long")
        self.assertEqual(self.of("claimed", "long")[-1][2], done[2])

    def test_trash_and_a_failing_dispatch(self):
        """A job its dispatch trashes is never claimed again; one whose
        dispatch raises is abandoned and claimed again.
        """
        self.conductor("c1")
        self.conductor("c2")
        self.post("poison", end=conductor_mod.TRASH)
        self.post("raises", end="raise")
        self.wait(lambda: len(self.of("claimed", "raises")) >= 3,
                  "three tries of the failing job")
        time.sleep(1.0)
        self.assertEqual(1, len(self.of("claimed", "poison")))
        self.assertNotIn("poison", [j.name for j in self.jobs_left()])

    def test_backend_restart(self):
        """The backend restarted while a job runs, twice: the job is done
        once (ZooKeeper keeps its claim; Redis, which keeps nothing on
        disk, loses the job, and its conductor is told).
        """
        self.conductor("c1")
        self.conductor("c2")
        for round_ in range(2):
            name = "long-%d" % round_
            until = os.path.join(self.dir, name)
            self.post(name, until=until)
            self.wait(lambda: self.of("claimed", name), "a claim")
            self.server.restart()
            self.restarted(name)
            open(until, "w").close()
            time.sleep(SESSION + 1.0)
            self.assertLessEqual(len(self.of("done", name)), 1)
        # The board works after it.
        self.post("after")
        self.wait(lambda: self.of("done", "after"), "a job after")


class TestZooKeeperJobboard(_JobboardTests, testtools.TestCase):
    kind = "zookeeper"
    driver_name = "zookeeper_taskflow_driver"
    server_class = coordination.ZooKeeper

    def restarted(self, name):
        # The claim holds through the restart (the server keeps its
        # sessions), or another conductor takes the job: it is done
        # once either way.
        pass


class TestRedisJobboard(_JobboardTests, testtools.TestCase):
    kind = "redis"
    driver_name = "redis_taskflow_driver"
    server_class = coordination.Redis

    def restarted(self, name):
        # The job and its claim are gone: its conductor is told.
        self.wait(lambda: self.of("lost", name), "the claim's loss", 30)
