"""The installed package's entry points register no test-only code.

``devcloud`` (local clouds for tests, benchmarks and the
demo), ``tests`` and ``benchmarks`` are test-only: no entry point of
setup.cfg, nor of the installed distribution, may name them, and the
package registers no keystoneauth1 plugin (the dev clouds use stock
ones).
"""

import configparser
import importlib.metadata
import pathlib


import dtn_migrate

from tests.unit import testcase

SETUP_CFG = pathlib.Path(dtn_migrate.__file__).parent.parent / "setup.cfg"
TEST_ONLY = ("devcloud", "tests", "benchmarks")
#: Groups whose entries other programs load by name at run time.
PLUGIN_GROUPS = ("keystoneauth1.plugin",)


def _test_only(target):
    module = target.split(":", 1)[0].strip()
    return any(module == t or module.startswith(t + ".") for t in TEST_ONLY)


def _from_setup_cfg():
    """[(group, name, target)] of setup.cfg's [entry_points]."""
    parser = configparser.ConfigParser()
    parser.read(SETUP_CFG)
    found = []
    for group, text in parser["entry_points"].items():
        for line in text.strip().splitlines():
            name, _, target = line.partition("=")
            found.append((group, name.strip(), target.strip()))
    return found


def _installed():
    try:
        dist = importlib.metadata.distribution("dtn-migrate")
    except importlib.metadata.PackageNotFoundError:
        return None
    return [(ep.group, ep.name, ep.value) for ep in dist.entry_points]


class TestEntryPoints(testcase.TestCase):

    def _check(self, entries):
        self.assertIn("console_scripts", {g for g, _, _ in entries})
        bad = [e for e in entries
               if _test_only(e[2]) or e[0] in PLUGIN_GROUPS]
        self.assertEqual([], bad)

    def test_setup_cfg(self):
        self._check(_from_setup_cfg())

    def test_installed_distribution(self):
        entries = _installed()
        if entries is None:
            self.skipTest("dtn-migrate is not installed")
        self._check(entries)

    def test_test_only_is_recognised(self):
        self.assertTrue(_test_only("devcloud.auth:Loader"))
        self.assertTrue(_test_only("tests.functional.base:main"))
        self.assertFalse(_test_only("dtn_migrate.cmd.agent:main"))
        self.assertFalse(_test_only("devcloudish:x"))
