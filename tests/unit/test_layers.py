"""The arrows of the package point one way.

* ``client/``, ``osc/`` and ``dashboard/`` (what runs on an operator's
  machine or in Horizon) import nothing of the engine, the agent, the
  transfer and staging libraries, the API server, the database or the
  console entry points: only each other, ``common`` and the service's
  own small modules (i18n; the dashboard's copy of the policy defaults
  is generated from ``policies``).
* ``transfer/`` and ``staging/`` are libraries: nothing of OpenStack,
  and of dtn-migrate only themselves, ``common`` and (staging, which
  copies with the transfer library's buffers and checksums) ``transfer``.
* ``coordination/`` (the jobboard and its conductor) knows nothing of
  what a job does: it imports no service package of dtn-migrate
  (``engine``, ``agent``, ``api``, ``db``, ...), only ``conf`` and the
  exceptions; the engine imports it.
* ``common/`` imports nothing but the standard library and tenacity
  (its one poll loop, :mod:`dtn_migrate.common.polling`).
* Nothing a deployment, the demo or the benchmarks run (``dtn_migrate``,
  ``devcloud``, ``benchmarks``) imports the tests: the local clouds
  the tests use are ``devcloud``'s.
* Within ``transfer/``, the two ends (``source/`` and ``sink/``) import
  nothing of each other, and what they share (``wire/``, ``transport/``,
  ``objectlog/`` and the modules at the top) imports neither of them:
  only the modules that drive an end (``cli``, and ``report`` and
  ``request``, whose asking side opens its connection as a source does)
  import one.

Read from the source (ast), every import of a module, those inside
functions included.
"""

import ast
import pathlib
import sys


import dtn_migrate

from tests.unit import testcase

PACKAGE = pathlib.Path(dtn_migrate.__file__).parent
ROOT = PACKAGE.parent
#: The top-level packages that may not import ``tests``.
NOT_TESTS = ("dtn_migrate", "devcloud", "benchmarks")
CLIENT_SIDE = ("client", "osc", "dashboard")
SERVER_SIDE = ("engine", "agent", "transfer", "staging", "api", "cmd", "db",
               "image", "coordination")
#: What ``coordination/`` may import of dtn-migrate.
COORDINATION_ALLOWED = ("coordination", "conf", "exception", "i18n",
                        "common")
#: Each library, and the parts of dtn-migrate it may use.
LIBRARIES = {"transfer": ("transfer", "common"),
             "staging": ("staging", "transfer", "common")}
#: Distributions of OpenStack (and what only its services use).
OPENSTACK = ("oslo_", "keystoneauth1", "keystonemiddleware", "glanceclient",
             "taskflow", "tooz", "osc_lib", "openstack", "horizon",
             "django", "stevedore", "webob", "routes", "futurist",
             "eventlet")


def imports(path):
    """The absolute names ``path`` imports (``from a.b import c``: both
    ``a.b`` and ``a.b.c``, since c may be a module).
    """
    tree = ast.parse(path.read_text(), str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            found.add(node.module)
            found.update("%s.%s" % (node.module, alias.name)
                         for alias in node.names)
    return found


def modules(*subpackages):
    for sub in subpackages:
        for path in sorted((PACKAGE / sub).rglob("*.py")):
            yield path.relative_to(PACKAGE).as_posix(), path


def _within(name, packages):
    return any(name == "dtn_migrate.%s" % p or
               name.startswith("dtn_migrate.%s." % p) for p in packages)


def client_side_breaches(found):
    return sorted(n for n in found if _within(n, SERVER_SIDE))


def library_breaches(allowed, found):
    return sorted(
        n for n in found
        if n.startswith(OPENSTACK) or
        (n.startswith("dtn_migrate") and n != "dtn_migrate" and
         not _within(n, allowed)))


#: What ``common/`` may import beyond the standard library.
COMMON_ALLOWED = ("tenacity",)


#: The two ends of a transfer (subpackages of transfer/).
ENDS = ("transfer.source", "transfer.sink")
#: The modules of transfer/ outside the ends that may import an end.
DRIVERS = ("transfer/cli.py", "transfer/report.py", "transfer/request.py")


def transfer_breaches(rel, found):
    """What the module ``rel`` (a path below the package) imports of an
    end of a transfer that it may not.
    """
    own = [end for end in ENDS
           if rel.startswith("%s/" % end.replace(".", "/"))]
    if rel in DRIVERS:
        return []
    return sorted(n for n in found
                  for end in ENDS
                  if end not in own and _within(n, (end,)))


def common_breaches(found):
    return sorted(n for n in found
                  if n.split(".")[0] not in sys.stdlib_module_names and
                  n.split(".")[0] not in COMMON_ALLOWED and
                  not _within(n, ("common",)) and n != "dtn_migrate")


def coordination_breaches(found):
    return sorted(n for n in found
                  if n.startswith("dtn_migrate.") and
                  not _within(n, COORDINATION_ALLOWED))


def tests_breaches(found):
    return sorted(n for n in found if n == "tests" or n.startswith("tests."))


def top_level_modules(*packages):
    for top in packages:
        for path in sorted((ROOT / top).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), path


class TestLayers(testcase.TestCase):
    def test_the_client_side_imports_no_server_side(self):
        found = {rel: client_side_breaches(imports(path))
                 for rel, path in modules(*CLIENT_SIDE)}
        self.assertEqual({}, {rel: names for rel, names in found.items()
                              if names})

    def test_the_libraries_import_nothing_of_openstack(self):
        found = {}
        for own, allowed in LIBRARIES.items():
            for rel, path in modules(own):
                names = library_breaches(allowed, imports(path))
                if names:
                    found[rel] = names
        self.assertEqual({}, found)

    def test_the_ends_of_a_transfer_import_nothing_of_each_other(self):
        found = {rel: transfer_breaches(rel, imports(path))
                 for rel, path in modules("transfer")}
        self.assertEqual({}, {rel: names for rel, names in found.items()
                              if names})

    def test_common_imports_only_the_standard_library_and_tenacity(self):
        found = {rel: common_breaches(imports(path))
                 for rel, path in modules("common")}
        self.assertEqual({}, {rel: names for rel, names in found.items()
                              if names})

    def test_coordination_knows_nothing_of_the_service(self):
        found = {rel: coordination_breaches(imports(path))
                 for rel, path in modules("coordination")}
        self.assertNotEqual({}, found)
        self.assertEqual({}, {rel: names for rel, names in found.items()
                              if names})

    def test_nothing_outside_the_tests_imports_them(self):
        found = {rel: tests_breaches(imports(path))
                 for rel, path in top_level_modules(*NOT_TESTS)}
        self.assertNotEqual({}, found)
        self.assertEqual({}, {rel: names for rel, names in found.items()
                              if names})

    def test_the_checks_find_what_they_forbid(self):
        self.assertEqual(["dtn_migrate.engine.requests"],
                         client_side_breaches({
                             "dtn_migrate.engine.requests",
                             "dtn_migrate.common.states",
                             "dtn_migrate.client"}))
        self.assertEqual(["dtn_migrate.agent", "oslo_log"],
                         library_breaches(LIBRARIES["transfer"], {
                             "oslo_log", "dtn_migrate.agent",
                             "dtn_migrate.transfer.wire.protocol",
                             "dtn_migrate.common.units", "os"}))
        self.assertEqual(["dtn_migrate.transfer.source.file"],
                         transfer_breaches("transfer/sink/server.py", {
                             "dtn_migrate.transfer.sink.session",
                             "dtn_migrate.transfer.source.file",
                             "dtn_migrate.transfer.wire"}))
        self.assertEqual(["dtn_migrate.transfer.sink"],
                         transfer_breaches("transfer/wire/auth.py", {
                             "dtn_migrate.transfer.sink",
                             "dtn_migrate.transfer.errors"}))
        self.assertEqual([], transfer_breaches("transfer/cli.py", {
            "dtn_migrate.transfer.sink.server"}))
        self.assertEqual(["dtn_migrate.engine", "yaml"],
                         common_breaches({"yaml", "dtn_migrate.engine",
                                          "os", "dtn_migrate.common",
                                          "tenacity"}))
        self.assertEqual(["dtn_migrate.engine.persistence"],
                         coordination_breaches({
                             "dtn_migrate.engine.persistence",
                             "dtn_migrate.conf", "dtn_migrate.exception",
                             "taskflow.jobs"}))
        self.assertEqual(["tests", "tests.functional.base"],
                         tests_breaches({"tests", "tests.functional.base",
                                         "testtools", "devcloud.pair",
                                         "testscenarios"}))
