"""tools/apt.sh: apt_ensure installs the missing Debian packages, and
waits for another apt that holds the package lock instead of failing.

apt-get and dpkg-query are stand-ins on PATH: the real ones would
change the machine.
"""

import os
import subprocess

import fixtures

from tests.unit import testcase

TOP = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir)
APT_SH = os.path.abspath(os.path.join(TOP, "tools", "apt.sh"))

# dpkg-query: every package in $INSTALLED is installed, the others not.
DPKG_QUERY = """#!/bin/sh
for p in $INSTALLED; do
  if [ "$p" = "$3" ]; then printf 'install ok installed'; exit 0; fi
done
exit 1
"""

# apt-get: records its arguments; while the lock is "held" ($LOCKED), a
# call that does not wait for it fails as the real one does.
APT_GET = """#!/bin/sh
echo "$*" >> "$CALLS"
if [ -n "$LOCKED" ]; then
  case "$*" in
    *DPkg::Lock::Timeout=*) ;;
    *) echo "E: Could not get lock /var/lib/dpkg/lock-frontend" >&2
       exit 100 ;;
  esac
fi
exit "${APT_RC:-0}"
"""


class AptEnsureTest(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.bin = self.useFixture(fixtures.TempDir()).path
        for name, text in (("dpkg-query", DPKG_QUERY),
                           ("apt-get", APT_GET)):
            path = os.path.join(self.bin, name)
            with open(path, "w") as f:
                f.write(text)
            os.chmod(path, 0o755)
        self.calls = os.path.join(self.bin, "calls")

    def ensure(self, *packages, **env):
        environ = dict(os.environ, PATH=self.bin + ":" + os.environ["PATH"],
                       CALLS=self.calls, INSTALLED="", LOCKED="")
        environ.update(env)
        proc = subprocess.run(
            ["bash", "-c", 'source "$1"; shift; apt_ensure test "$@"',
             "apt_ensure", APT_SH] + list(packages),
            env=environ, capture_output=True, text=True, timeout=60)
        try:
            with open(self.calls) as f:
                calls = f.read().splitlines()
        except FileNotFoundError:
            calls = []
        return proc, calls

    def test_nothing_missing_runs_no_apt(self):
        proc, calls = self.ensure("a", "b", INSTALLED="a b")
        self.assertEqual(0, proc.returncode, proc.stderr)
        self.assertEqual([], calls)
        self.assertEqual("", proc.stdout)

    def test_installs_only_the_missing_packages(self):
        proc, calls = self.ensure("a", "b", "c", INSTALLED="b")
        self.assertEqual(0, proc.returncode, proc.stderr)
        self.assertEqual("test: installing a c\n", proc.stdout)
        self.assertEqual(2, len(calls), calls)
        self.assertIn("update", calls[0].split())
        words = calls[1].split()
        self.assertIn("install", words)
        self.assertEqual(["a", "c"], words[-2:])

    def test_another_apt_holding_the_lock_is_waited_for(self):
        # Before: apt_ensure failed at once with "Could not get lock"
        # while unattended-upgrades (or any apt) ran on a new machine.
        proc, calls = self.ensure("a", LOCKED="1")
        self.assertEqual(0, proc.returncode, proc.stderr)
        self.assertEqual(2, len(calls), calls)
        for call in calls:
            self.assertIn("DPkg::Lock::Timeout=600", call)

    def test_a_failed_install_fails_the_caller(self):
        proc, calls = self.ensure("a", APT_RC="100")
        self.assertEqual(100, proc.returncode)
