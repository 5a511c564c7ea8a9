"""A source engine in a process of its own, killed (SIGKILL, by itself)
at a chosen point of a migration's flow: a real crash, for
``test_resume_from_persisted_state``.

    python -m tests.functional.engine.crash_worker TMP DB IMAGE_SEED POINT \
        [MIGRATION_ID]

Without MIGRATION_ID it asks for a serial migration of the image made
from IMAGE_SEED (see :func:`image_data`); with it, it resumes that
migration from DB.  POINT is where the process kills itself:
``transfer`` (the agent's start_transfer, after the export),
``report`` (the first poll of the peer's report, after the transfer) or
``cleanup`` (the removal of the staged files, after the outcome is
saved; a peer engine in this process imports the image).  The
migration id is printed first.
"""

import os
import random
import signal
import subprocess
import sys

from dtn_migrate.engine import migrations
from dtn_migrate.engine import persistence
from dtn_migrate.engine import resources
from dtn_migrate.staging import localfs
from tests.unit.engine import base
from tests.unit.engine import fakes

IMAGE_ID = "c0ffee00-0000-4000-8000-000000000001"


def image_data(seed, size=2 << 20):
    return random.Random(seed).randbytes(size)


def add_image(images, seed):
    return images.add(image_data(seed), id=IMAGE_ID, name="crash",
                      tags=["dr"], os_distro="debian")


def crash(tmp, db, seed, point, migration_id=None):
    """Run this module in a process until it kills itself at POINT:
    (migration id, bytes that process exported from Glance).
    """
    args = [sys.executable, "-m", __name__, tmp, db, str(seed), point]
    if migration_id is not None:
        args.append(migration_id)
    proc = subprocess.run(args, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=120)
    if proc.returncode != -signal.SIGKILL:
        raise AssertionError("the engine process was not killed at %s "
                             "(exit %s): %s %s" % (point, proc.returncode,
                                                   proc.stdout,
                                                   proc.stderr[-2000:]))
    mid, exported = proc.stdout.split()[:2]
    return mid, int(exported)


def task_states(db, migration_id):
    """{task name: TaskFlow state} of the migration's persisted flow."""
    store = persistence.Store(db)
    try:
        _book, detail, _record = store.load(migration_id)
        return {atom.name: atom.state for atom in detail}
    finally:
        store.close()


def main(tmp, db, seed, point, migration_id=None):
    roots = {h: os.path.join(tmp, h) for h in ("dtn-a", "dtn-b")}
    agents = fakes.FakeAgents(roots)
    images = fakes.FakeImages("a")
    add_image(images, int(seed))

    def die(*args, **kwargs):
        print(images.downloaded, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

    if point == "transfer":
        agents.start_transfer = die
    elif point == "report":
        agents.get_peer_report = die
    engine = _engine("dtn-a", db, images, agents, roots)
    if point == "cleanup":
        engine.res.remove_staged = die
        agents.engines["dtn-b"] = _engine(
            "dtn-b", "sqlite:///%s/crash-peer.sqlite" % tmp,
            fakes.FakeImages("b"), agents, roots)
    if migration_id is None:
        req = engine.request("b", images=[IMAGE_ID],
                             options={"mode": "serial"})
        migration_id = req["migrations"][0]["migration_id"]
    else:
        engine.resume_unfinished()
    print(migration_id, flush=True)
    engine.wait_idle(60)
    # Reached only when the flow ended without reaching POINT.
    print("ended", engine.get(migration_id)["state"], flush=True)
    return 3


def _engine(host, db, images, agents, roots):
    conf = base.make_conf(host, db)
    res = resources.Resources(conf, images, agents,
                              localfs.LocalBackend(roots[host]))
    return migrations.Migrations(conf, persistence.Store(db), res)


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
