"""EngineService on the threading backend of oslo.service (the one
dtn-migrate-engine selects), in a process of its own: the backend is
chosen once per process, and importing oslo.messaging (as other unit
tests do) chooses eventlet.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import tests
from tests.unit import testcase

SCRIPT = r'''
import json
import os
import sys
import time

from oslo_service import backend
backend.init_backend(backend.BackendType.THREADING)

from oslo_config import cfg  # noqa: E402
import oslo_messaging as messaging  # noqa: E402
from oslo_messaging import conffixture  # noqa: E402

from dtn_migrate.conf import database, default, engine  # noqa: E402
from dtn_migrate.conf import staging  # noqa: E402
from dtn_migrate.conf import protection  # noqa: E402
from dtn_migrate.conf import coordination, task_flow  # noqa: E402
from dtn_migrate.engine import rpcapi, service  # noqa: E402
from dtn_migrate.staging import localfs  # noqa: E402
from tests.unit.engine import fakes  # noqa: E402

tmp = sys.argv[1]
roots = {h: os.path.join(tmp, h) for h in ("dtn-a", "dtn-b")}
for root in roots.values():
    os.makedirs(root)
conf = cfg.ConfigOpts()
conffixture.ConfFixture(conf)
for module in (default, database, engine, protection, staging, task_flow,
               coordination):
    module.register_opts(conf)
conf([], project="dtn-migrate-test")
conf.set_override("host", "controller")
conf.set_override("agent_host", "dtn-a", "engine")
conf.set_override("connection", "sqlite:///%s/engine.sqlite" % tmp,
                  "database")
conf.set_override("progress_interval", 0.5, "engine")
conf.set_override("reconcile_interval", 1, "engine")
conf.set_override("database_check_interval", 0.5, "engine")
transport = messaging.get_rpc_transport(conf, url="fake:/")
svc = service.EngineService(conf, images=fakes.FakeImages(),
                            agent=fakes.FakeAgents(roots),
                            backend=localfs.LocalBackend(roots["dtn-a"]),
                            transport=transport)
calls = {"report_progress": 0, "reconcile": 0, "recover": 0}
closed = []


def counted(name):
    real = getattr(svc.migrations, name)

    def call():
        calls[name] += 1
        return real()
    setattr(svc.migrations, name, call)


def recorded(name, obj):
    real = obj.close

    def close():
        closed.append(name)
        return real()
    obj.close = close


for name in calls:
    counted(name)
recorded("store", svc.store)
recorded("resources", svc.resources)
svc.start()
pong = rpcapi.EngineAPI(timeout=10, transport=transport).ping({})
# A second engine on the same database refuses to start.
conf.set_override("lock_timeout", 0.5, "engine")
try:
    service.EngineService(conf, images=fakes.FakeImages(),
                          agent=fakes.FakeAgents(roots),
                          backend=localfs.LocalBackend(roots["dtn-a"]),
                          transport=transport)
    second = "started"
except Exception as exc:
    second = "%s: %s" % (exc.__class__.__name__, exc)
time.sleep(1.8)
svc.stop()
at_stop = dict(calls)
time.sleep(1.2)
print(json.dumps({"pong": pong, "at_stop": at_stop, "later": calls,
                  "closed": sorted(closed), "second": second}))
'''


class TestEngineService(testcase.TestCase):
    def test_timers_and_stop(self):
        tmp = tempfile.mkdtemp(prefix="dtnm-service-")
        self.addCleanup(shutil.rmtree, tmp, True)
        top = os.path.dirname(os.path.dirname(os.path.abspath(
            tests.__file__)))
        proc = subprocess.run([sys.executable, "-c", SCRIPT, tmp],
                              cwd=top, capture_output=True, text=True,
                              timeout=60)
        self.assertEqual(0, proc.returncode, proc.stderr)
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        self.assertEqual({"host": "controller"}, out["pong"])
        self.assertGreaterEqual(out["at_stop"]["report_progress"], 2)
        self.assertGreaterEqual(out["at_stop"]["reconcile"], 1)
        self.assertGreaterEqual(out["at_stop"]["recover"], 1)
        self.assertTrue(out["second"].startswith(
            "PersistenceInUse: Another dtn-migrate-engine uses the "
            "persistence database sqlite:///"), out["second"])
        self.assertEqual(out["at_stop"], out["later"])
        self.assertEqual(["resources", "store"], out["closed"])
