"""SIGKILL a process while it writes an object log, then check the log.

A child Python process opens a log and runs a deterministic plan of
operations (record batches, complete, reset; op ``k`` of a plan is a
function of the seed and ``k`` only).  After each operation returns it
writes ``k`` to a pipe with one unbuffered write.  The parent kills it
with SIGKILL at random moments: while it starts and opens the log, at a
random time while it runs, or just after letting it start a chosen
complete/reset/multi-file record.  The parent then reopens the log and
checks, file by file, against a model of the acknowledged operations:

* every object acknowledged before the kill is in done();
* nothing outside the union of all batches planned so far is in done();
* more strictly, files the in-flight operation does not touch are exactly
  as modelled; a torn record leaves the file between the modelled set and
  that set plus the batch; complete() and reset() are all or nothing.

The next child resumes the plan at the first unacknowledged operation.
"""

import inspect
import os
import random
import select
import signal
import subprocess
import sys
import time

import testtools

from dtn_migrate.transfer import objectlog

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
KILLS = {"open": 6, "run": 18, "pause": 8}       # per combination
TIMEOUT = 20.0


def make_files():
    from dtn_migrate.transfer import objectlog
    sizes = [1, 9, 64, 777, 5000, 33000, 100000, 3, 260, 70000]
    names = ["a", "b c", 'd,"e"', "f\u00e9\u2603", "g/h i", "j'k", "l",
             "m n, o", "p\\q", "[r]"]
    return [objectlog.LogFile(100 + 3 * n, names[n], sizes[n])
            for n in range(len(sizes))]


def plan_op(seed, k, files):
    """Operation ``k`` of plan ``seed``: (kind, argument)."""
    import random
    rng = random.Random(seed * 1000003 + k)
    r = rng.random()
    if r < 0.07:
        return "complete", rng.choice(files).file_id
    if r < 0.14:
        return "reset", rng.choice(files).file_id
    items = []
    for _ in range(rng.randint(1, 3)):
        f = rng.choice(files)
        start = rng.randrange(f.nobjects)
        for _ in range(rng.randint(1, 24)):
            index = start + rng.randrange(-8000, 8000)
            items.append((f.file_id, min(max(index, 0), f.nobjects - 1)))
    return "record", items


def child_main(argv):
    import os
    from dtn_migrate.transfer import objectlog
    directory, mechanism, method = argv[:3]
    seed, start, pause = (int(a) for a in argv[3:6])
    files = make_files()
    os.write(1, b"I\n")
    log = objectlog.open_log(directory, mechanism, method, files)
    os.write(1, b"O\n")
    for k in range(start, start + 200000):
        if k == pause:
            os.write(1, b"P\n")
            os.read(0, 1)
        kind, arg = plan_op(seed, k, files)
        if kind == "record":
            log.record(arg)
        elif kind == "complete":
            log.complete(arg)
        else:
            log.reset(arg)
        os.write(1, b"%d\n" % k)
    os._exit(3)      # never reached: the parent kills the child first


CHILD = "".join(
    ["import sys\nsys.path.insert(0, %r)\n" % ROOT]
    + [inspect.getsource(fn) + "\n" for fn in (make_files, plan_op,
                                               child_main)]
    + ["child_main(sys.argv[1:])\n"])

FILES = make_files()
NOBJECTS = {f.file_id: f.nobjects for f in FILES}


class Reader:
    """Lines a child writes to its stdout pipe."""

    def __init__(self, proc):
        self.proc = proc
        self.fd = proc.stdout.fileno()
        self.buf = b""

    def _read(self, timeout):
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return True
        data = os.read(self.fd, 65536)
        self.buf += data
        return bool(data)

    def wait_for(self, line):
        deadline = time.monotonic() + TIMEOUT
        while line not in self.buf.split(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not self._read(left):
                raise AssertionError("child never wrote %r; stderr: %s"
                                     % (line, self.proc.stderr.read()))

    def drain(self):
        while self._read(TIMEOUT):
            pass
        return self.buf.split(b"\n")


def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class Model:
    """What the log must hold, per file: (done set, complete)."""

    def __init__(self):
        self.files = {f.file_id: (frozenset(), False) for f in FILES}
        self.planned = {f.file_id: set() for f in FILES}

    def plan(self, op):
        """Widen the union of everything the child was asked to log."""
        kind, arg = op
        if kind == "record":
            for file_id, index in arg:
                self.planned[file_id].add(index)
        elif kind == "complete":
            self.planned[arg].update(range(NOBJECTS[arg]))

    @staticmethod
    def after(state, file_id, op):
        """``state`` of ``file_id`` after ``op`` (as the log defines)."""
        done, complete = state
        kind, arg = op
        if kind == "record":
            if complete:
                return state
            return done | {i for f, i in arg if f == file_id}, False
        if arg != file_id:
            return state
        if kind == "complete":
            return frozenset(range(NOBJECTS[file_id])), True
        return frozenset(), False

    def apply(self, op):
        for file_id in self.files:
            self.files[file_id] = self.after(self.files[file_id], file_id,
                                             op)


class KillTests:
    """Kill a child writing the log; mechanism/method set by subclasses."""

    mechanism = None
    method = None
    seed = None

    def setUp(self):
        super().setUp()
        import fixtures
        self.dir = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                "log")

    def pick_pause(self, start, rng, n):
        """An op index >= start whose kind rotates over complete, reset
        and a record touching several files.
        """
        want = ("complete", "reset", "record")[n % 3]
        k = start + rng.randrange(10)
        while True:
            kind, arg = plan_op(self.seed, k, FILES)
            if kind == want and (kind != "record"
                                 or len({f for f, _ in arg}) > 1):
                return k
            k += 1

    def run_child(self, start, mode, rng, n):
        pause = self.pick_pause(start, rng, n) if mode == "pause" else -1
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, self.dir, self.mechanism,
             self.method, str(self.seed), str(start), str(pause)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, cwd=ROOT)
        self.addCleanup(self._reap, proc)
        reader = Reader(proc)
        if mode == "open":
            reader.wait_for(b"I")
            time.sleep(rng.uniform(0, 0.004))
        elif mode == "run":
            reader.wait_for(b"O")
            time.sleep(rng.uniform(0.001, 0.04))
        else:
            reader.wait_for(b"P")
            delay = rng.uniform(0, 0.00015)
            proc.stdin.write(b"g")
            proc.stdin.flush()
            # Every other one at once: a complete or reset can finish
            # within the window on a quiet machine, and then no kill
            # would find one in flight (a CI run saw that).
            spin(delay if n % 2 else 0)
        os.kill(proc.pid, signal.SIGKILL)
        lines = reader.drain()
        proc.wait()
        err = proc.stderr.read()
        self.assertEqual(-signal.SIGKILL, proc.returncode, err)
        acked = [int(line) for line in lines if line.isdigit()]
        self.assertEqual(list(range(start, start + len(acked))), acked)
        return acked, b"O" in lines, pause

    @staticmethod
    def _reap(proc):
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            stream.close()

    def check(self, model, inflight):
        """Compare the reopened log with ``model``; return how the
        in-flight operation ended: "none", "partial" or "whole".
        """
        log = objectlog.open_log(self.dir, self.mechanism, self.method,
                                 FILES)
        before = dict(model.files)
        try:
            for f in FILES:
                done = log.done(f.file_id)
                got = frozenset(done.present()), log.is_complete(f.file_id)
                want = model.files[f.file_id]
                where = "file %d after op %s" % (f.file_id, inflight)
                # The requirement: acknowledged objects are there, and
                # nothing that was never asked for.
                if not (inflight and inflight[0] == "reset"
                        and inflight[1] == f.file_id):
                    self.assertTrue(want[0] <= got[0], where)
                self.assertTrue(got[0] <= model.planned[f.file_id], where)
                # Stricter: the in-flight operation happened or not.
                if inflight is None:
                    self.assertEqual(want, got, where)
                elif inflight[0] == "record":
                    limit = model.after(want, f.file_id, inflight)
                    self.assertEqual(want[1], got[1], where)
                    self.assertTrue(want[0] <= got[0] <= limit[0], where)
                else:
                    self.assertIn(got, (want, model.after(want, f.file_id,
                                                          inflight)), where)
                model.files[f.file_id] = got
                if self.mechanism == "file" and got[1]:
                    slot = FILES.index(f)
                    self.assertFalse(os.path.exists(os.path.join(
                        self.dir, "f-%d.log" % slot)))
        finally:
            log.close()
        if inflight is None or before == model.files:
            return "none"
        whole = {file_id: model.after(state, file_id, inflight)
                 for file_id, state in before.items()}
        return "whole" if whole == model.files else "partial"

    def test_kill(self):
        rng = random.Random(self.seed)
        modes = [m for m, count in KILLS.items() for _ in range(count)]
        rng.shuffle(modes)
        model = Model()
        start = 0
        stats = {"acked": 0, "opened": 0, "inflight": {}, "outcome": {}}
        for n, mode in enumerate(modes):
            acked, opened, pause = self.run_child(start, mode, rng, n)
            for k in acked:
                op = plan_op(self.seed, k, FILES)
                model.plan(op)
                model.apply(op)
            inflight = None
            if opened:
                inflight = plan_op(self.seed, start + len(acked), FILES)
                model.plan(inflight)
                kind = inflight[0]
                stats["inflight"][kind] = stats["inflight"].get(kind, 0) + 1
                stats["opened"] += 1
            if mode == "pause":
                # The kill came after the child passed the pause point.
                self.assertGreaterEqual(start + len(acked), pause)
            outcome = self.check(model, inflight)
            stats["outcome"][outcome] = stats["outcome"].get(outcome, 0) + 1
            stats["acked"] += len(acked)
            start += len(acked)
        log = objectlog.open_log(self.dir, self.mechanism, self.method,
                                 FILES)
        log.destroy()
        self.assertFalse(os.path.exists(self.dir))
        self.addDetail("kill-stats", testtools.content.text_content(
            repr(stats)))
        # The kills really interrupted a running log, many times.
        self.assertEqual(sum(KILLS.values()), len(modes))
        self.assertGreater(stats["acked"], 200)
        self.assertGreaterEqual(stats["opened"], KILLS["run"])
        inflight = stats["inflight"]
        self.assertGreater(inflight.get("record", 0), 0, stats)
        self.assertGreater(inflight.get("complete", 0)
                           + inflight.get("reset", 0), 0, stats)


COMBINATIONS = [("universal", "bit64"), ("file", "char"),
                ("transaction", "varint"), ("universal", "int"),
                ("file", "bit8"), ("transaction", "binary")]

for _n, (_mechanism, _method) in enumerate(COMBINATIONS):
    _name = "TestKill%s%s" % (_mechanism.capitalize(), _method.capitalize())
    _doc = "SIGKILL while logging, %s x %s." % (_mechanism, _method)
    globals()[_name] = type(_name, (KillTests, testtools.TestCase), {
        "mechanism": _mechanism, "method": _method, "seed": 1000 + _n,
        "__doc__": _doc})
