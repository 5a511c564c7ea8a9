"""A conductor in a process of its own, for the jobboard's tests: it
claims the jobs of a real ZooKeeper or Redis jobboard and "runs" each
for the seconds its details ask (``hold``), ending it as they ask
or until the file ``until`` names exists, and ends it as they ask
(``end``: consume, abandon or trash; ``raise``: its dispatch raises).
Each step is a line of its log, flushed at once:
``claimed|done|lost <job name> <conductor> <time.time()>``.

    python -m tests.functional.coordination.conductor_main NAME LOG \
        DRIVER HOSTS PORT NAMESPACE
"""

import os
import sys
import threading
import time

from oslo_config import cfg
from taskflow.persistence import backends as persistence_backends

from dtn_migrate import conf as dtn_conf
from dtn_migrate.coordination import conductor as conductor_mod
from dtn_migrate.coordination import jobboard


def main(argv):
    name, log_path, driver, hosts, port, namespace = argv
    conf = cfg.ConfigOpts()
    dtn_conf.register_opts(conf)
    conf([], project="dtn-migrate-test")
    for key, value in (("jobboard_backend_driver", driver),
                       ("jobboard_backend_hosts", hosts.split(",")),
                       ("jobboard_backend_port", int(port)),
                       ("jobboard_backend_namespace", namespace),
                       ("jobboard_zookeeper_session_timeout", 2.0),
                       ("jobboard_expiration_time", 2)):
        conf.set_override(key, value, "task_flow")
    log = open(log_path, "a", buffering=1)
    lock = threading.Lock()

    def say(what, job):
        with lock:
            log.write("%s %s %s %.3f\n"
                      % (what, job.name, name, time.time()))

    def dispatch(job, lost):
        say("claimed", job)
        details = job.details or {}
        deadline = time.monotonic() + float(details.get("hold", 0))
        until = details.get("until")
        while time.monotonic() < deadline or \
                (until and not os.path.exists(until)):
            if lost.wait(0.05):
                say("lost", job)
                return conductor_mod.ABANDON
        if details.get("end") == "raise":
            raise RuntimeError("a dispatch that fails")
        say("done", job)
        return details.get("end", conductor_mod.CONSUME)

    driver = jobboard.get_driver(conf)
    persistence = persistence_backends.fetch({"connection": "memory://"})
    holder = []
    with driver.job_board(persistence, on_lost=lambda why: holder and
                          holder[0].session_lost(why)) as board:
        conductor = conductor_mod.Conductor(
            name, board, dispatch, max_jobs=4,
            claim_expiry=driver.claim_expiry, wait_timeout=0.1)
        holder.append(conductor)
        log.write("ready - %s %.3f\n" % (name, time.time()))
        conductor.run()


if __name__ == "__main__":
    main(sys.argv[1:])
