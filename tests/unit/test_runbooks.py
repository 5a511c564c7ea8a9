"""The runbooks of doc/source/admin/runbooks/ parse, name real ``openstack``
commands with options those commands accept, and use known
placeholders; and tests/functional/api/runbook.py runs them as it says.
"""

import configparser
import importlib
import importlib.metadata
import pathlib
import subprocess
import sys
import textwrap
from unittest import mock

import fixtures

import dtn_migrate
from tests.functional.api import runbook

from tests.unit import testcase

ROOT = pathlib.Path(dtn_migrate.__file__).parent.parent
RUNBOOKS = ROOT / "doc" / "source" / "admin" / "runbooks"
SETUP_CFG = ROOT / "setup.cfg"
#: The commands of other plugins a runbook may use: (entry point group,
#: name).
OTHER_COMMANDS = [("openstack.image.v2", "image_" + verb)
                  for verb in ("create", "show", "list", "set")]
#: A value for each placeholder when the options are checked.
SAMPLES = dict({name: "sample-%s" % name for name in runbook.PLACEHOLDERS},
               file=__file__)


def _dtn_commands():
    """{("dtn", "policy", "create"): "module:Class"} of setup.cfg."""
    parser = configparser.ConfigParser()
    parser.read(SETUP_CFG)
    found = {}
    for line in parser["entry_points"]["openstack.dtn.v1"].splitlines():
        name, _, target = line.partition("=")
        if name.strip():
            found[tuple(name.strip().split("_"))] = target.strip()
    return found


def _commands():
    found = _dtn_commands()
    for group, name in OTHER_COMMANDS:
        [ep] = [e for e in importlib.metadata.entry_points(group=group)
                if e.name == name]
        found[tuple(name.split("_"))] = ep.value
    return found


def _load(target):
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module.strip()), attr.strip())


def _split(argv, commands):
    """(command words, their target, the rest of ARGV) by the longest
    known command ARGV starts with; (None, None, argv) when none.
    """
    for n in range(len(argv), 0, -1):
        words = tuple(argv[:n])
        if words in commands:
            return words, commands[words], argv[n:]
    return None, None, argv


def _columns(cls):
    """The normalized column names the module of command CLS names in
    its ``*COLUMNS`` and ``*FIELDS`` constants (keys and headings);
    None when it has none.
    """
    module = sys.modules[cls.__module__]
    names = set()
    for attr, value in vars(module).items():
        if attr.isupper() and attr.endswith(("COLUMNS", "FIELDS")) \
                and isinstance(value, (tuple, list)):
            for item in value:
                items = item if isinstance(item, (tuple, list)) else [item]
                names.update(str(i).lower().replace(" ", "_")
                             for i in items)
    return names or None


def _runbooks():
    return sorted(RUNBOOKS.glob("*.rst"))


class TestRunbookFiles(testcase.TestCase):

    def test_runbooks_exist(self):
        names = {p.name for p in _runbooks()}
        for name in ("index.rst", "protect-a-project.rst",
                     "run-a-drill.rst", "fail-over.rst", "fail-back.rst"):
            self.assertIn(name, names)
        for name in names - {"index.rst"}:
            self.assertTrue(runbook.parse(RUNBOOKS / name),
                            "%s has no console block" % name)

    def test_every_console_block_is_runnable(self):
        # Every console block has its runbook comment (parse refuses
        # one without), and says where it runs.
        for path in _runbooks():
            for step in runbook.parse(path):
                self.assertIn(step.cloud, runbook.CLOUDS, step.where)
                self.assertIn(step.user, runbook.USERS, step.where)
                self.assertTrue(step.commands, step.where)

    def test_no_console_block_escapes_the_runner(self):
        # A console block written another way (a 'code-block:: bash',
        # '.. code::', '::') would be shown but never run.
        for path in _runbooks():
            text = path.read_text(encoding="utf-8")
            for n, line in enumerate(text.splitlines(), 1):
                stripped = line.strip()
                if stripped.startswith("$ "):
                    continue
                self.assertFalse(
                    stripped.startswith((".. code", ".. sourcecode",
                                         ".. prompt"))
                    and stripped != ".. code-block:: console",
                    "%s:%d: %s" % (path, n, line))
                self.assertFalse(stripped.endswith("::") and not
                                 stripped.startswith(".."),
                                 "%s:%d: a literal block" % (path, n))

    def test_commands_are_known(self):
        commands = _commands()
        for path in _runbooks():
            for step in runbook.parse(path):
                for argv in step.commands:
                    words, target, _ = _split(argv, commands)
                    self.assertIsNotNone(
                        words, "%s: openstack %s: no such command (known: "
                        "setup.cfg's openstack.dtn.v1 and %s)" % (
                            step.where, " ".join(argv),
                            [n for _, n in OTHER_COMMANDS]))

    def test_options_are_accepted(self):
        # Each command's own parser takes the arguments, placeholders
        # replaced by sample values.
        commands = _commands()
        for path in _runbooks():
            captured = {}
            for step in runbook.parse(path):
                values = dict(SAMPLES, **captured)
                for argv in step.commands:
                    words, target, rest = _split(argv, commands)
                    if target is None:
                        continue        # test_commands_are_known says
                    cls = _load(target)
                    cmd = cls(mock.Mock(), mock.Mock())
                    parser = cmd.get_parser("openstack " + " ".join(words))
                    args = [runbook.substitute(a, values) for a in rest]
                    try:
                        parsed = parser.parse_args(args)
                    except SystemExit:
                        self.fail("%s: openstack %s: its parser refuses "
                                  "the arguments" % (step.where,
                                                     " ".join(argv)))
                    # cliff silently leaves out a -c column it does not
                    # know (unless it knows none).
                    known = _columns(cls) if words[0] == "dtn" else None
                    for column in getattr(parsed, "columns", None) or ():
                        if known is not None:
                            self.assertIn(
                                column.lower().replace(" ", "_"), known,
                                "%s: openstack %s: no column %r" % (
                                    step.where, " ".join(argv), column))
                if step.capture:
                    captured[step.capture] = "sample-" + step.capture

    def test_placeholders_are_known(self):
        for path in _runbooks():
            known = set(runbook.PLACEHOLDERS)
            for step in runbook.parse(path):
                unknown = runbook.placeholders(step) - known
                self.assertEqual(set(), unknown, "%s: placeholders that "
                                 "no caller gives and no earlier step "
                                 "sets" % step.where)
                if step.capture:
                    known.add(step.capture)

    def test_waits_and_expectations_are_not_empty(self):
        for path in _runbooks():
            for step in runbook.parse(path):
                if step.wait:
                    self.assertGreater(step.wait[0], 0, step.where)
                for text in step.expect:
                    self.assertTrue(text.strip(), step.where)

    def test_index_links(self):
        index = (RUNBOOKS.parent / "index.rst").read_text()
        self.assertIn("runbooks/index", index)
        protection = (RUNBOOKS.parent / "protection.rst").read_text()
        self.assertIn(":doc:`runbooks/", protection)
        toc = (RUNBOOKS / "index.rst").read_text()
        for path in _runbooks():
            if path.name != "index.rst":
                self.assertIn("   " + path.stem + "\n", toc)


SAMPLE = textwrap.dedent("""\
    =====
    Title
    =====

    #. First:

       .. runbook: cloud=a user=alice

       .. code-block:: console

          $ openstack dtn policy create <policy> --peer <peer> \\
              --tag "<tag>"
          +-------+-------+
          | Field | Value |
          +-------+-------+

       .. runbook-expect: continuous
       .. runbook-expect: <policy>

    #. Second:

       .. runbook: cloud=b user=admin

       .. code-block:: console

          $ openstack dtn policy show <policy> -f value -c id
          abc

       .. runbook-set: policy-id
       .. runbook-wait: 30 <tag>

    .. runbook: cloud=b user=rita

    .. code-block:: console

       $ openstack dtn drill start <policy-id> --wait
       $ openstack dtn drill list
    """)


class FakeCase(testcase.TestCase):
    """A case whose ``openstack`` answers from a script."""

    def __init__(self, answers):
        super().__init__("run")
        self.a, self.b = object(), object()
        self.answers = list(answers)
        self.calls = []

    def run(self, result=None):      # pragma: no cover (never run)
        pass

    def openstack(self, persona, *args, cloud=None, check=True):
        self.calls.append((persona, args, cloud, check))
        stdout = self.answers.pop(0)
        return subprocess.CompletedProcess(args, 0, stdout, "")


class TestParseAndRun(testcase.TestCase):

    def write(self, text):
        path = pathlib.Path(self.useFixture(
            fixtures.TempDir()).path) / "book.rst"
        path.write_text(text, encoding="utf-8")
        return path

    def test_parse(self):
        steps = runbook.parse(self.write(SAMPLE))
        self.assertEqual(3, len(steps))
        first, second, third = steps
        self.assertEqual(("a", "alice"), (first.cloud, first.user))
        self.assertEqual([["dtn", "policy", "create", "<policy>", "--peer",
                           "<peer>", "--tag", "<tag>"]], first.commands)
        self.assertEqual(["continuous", "<policy>"], first.expect)
        self.assertIn("| Field | Value |", first.output)
        self.assertIsNone(first.wait)
        self.assertEqual(("b", "admin"), (second.cloud, second.user))
        self.assertEqual("policy-id", second.capture)
        self.assertEqual((30, "<tag>"), second.wait)
        self.assertEqual("abc", second.output)
        self.assertEqual([["dtn", "drill", "start", "<policy-id>",
                           "--wait"], ["dtn", "drill", "list"]],
                         third.commands)
        self.assertEqual({"policy", "peer", "tag"},
                         runbook.placeholders(first))

    def test_parse_refuses(self):
        for text, why in (
                (".. code-block:: console\n\n   $ openstack x\n",
                 "without a '.. runbook"),
                (".. runbook: cloud=c user=alice\n", "bad runbook"),
                (".. runbook: cloud=a\n", "bad runbook"),
                (".. runbook: cloud=a user=alice\n", "without its"),
                (".. runbook-expect: x\n", "before its console"),
                (".. runbook: cloud=a user=alice\n\n.. code-block:: "
                 "console\n\n   $ glance image-list\n", "not an 'openst"),
                (".. runbook: cloud=a user=alice\n\n.. code-block:: "
                 "console\n\n   output only\n", "without a '$ openstack"),
                (".. runbook: cloud=a user=alice\n\n.. code-block:: "
                 "console\n\n   $ openstack a\n\n.. runbook-wait: x y\n",
                 "runbook-wait"),
                (".. runbook: cloud=a user=alice\n\n.. code-block:: "
                 "console\n\n   $ openstack a\n\n.. runbook-set: A b\n",
                 "runbook-set"),
                (".. runbook: cloud=a user=alice\n\n.. code-block::  "
                 "console  x\n", "write '.. code-block:: console'")):
            exc = self.assertRaises(runbook.RunbookError, runbook.parse,
                                    self.write(text))
            self.assertIn(why, str(exc))

    def test_run_substitutes_waits_and_captures(self):
        case = FakeCase(["| mode | continuous |\n| name | gold |\n",
                         "id-1\n", "id-1\nt1\n",         # waited
                         "passed\n", "d1\n"])
        # The runner's own sleep: patching time.sleep would count other
        # threads' naps too (a test's leftover thread made it 18).
        sleep = mock.Mock()
        outputs = runbook.run(case, self.write(SAMPLE), {
            "policy": "gold", "peer": "dtn-b", "tag": "t1"}, sleep=sleep)
        self.assertEqual(1, sleep.call_count)
        self.assertEqual(3, len(outputs))
        self.assertEqual("passed\nd1\n", outputs[2])
        persona, args, cloud, check = case.calls[0]
        self.assertEqual(("alice", case.a, True), (persona, cloud, check))
        self.assertEqual(("dtn", "policy", "create", "gold", "--peer",
                          "dtn-b", "--tag", "t1"), args)
        self.assertEqual(("admin", ("dtn", "policy", "show", "gold", "-f",
                                    "value", "-c", "id"), case.b, True),
                         case.calls[1])
        # The captured ID, from the last run of the block.
        self.assertEqual(("rita", ("dtn", "drill", "start", "id-1",
                                   "--wait"), case.b, True),
                         case.calls[3])

    def test_run_fails_on_a_missing_expectation(self):
        case = FakeCase(["| mode | scheduled |\n"])
        self.assertRaises(AssertionError, runbook.run, case,
                          self.write(SAMPLE), {"policy": "gold",
                                               "peer": "p", "tag": "t"})

    def test_run_fails_when_the_wait_times_out(self):
        case = FakeCase(["continuous gold\n"] + ["nothing\n"] * 50)
        clock = iter(range(0, 1000, 10))
        exc = self.assertRaises(AssertionError, runbook.run, case,
                                self.write(SAMPLE), {
                                    "policy": "gold", "peer": "p",
                                    "tag": "zz"}, sleep=mock.Mock(),
                                clock=lambda: next(clock))
        self.assertIn("after 30 s", str(exc))
        # The block's deadline is 10 + 30 s: it ran three times, and
        # gave up when the clock read 40.
        self.assertEqual(1 + 3, len(case.calls))

    def test_run_needs_every_placeholder(self):
        case = FakeCase([])
        exc = self.assertRaises(KeyError, runbook.run, case,
                                self.write(SAMPLE), {"policy": "gold"})
        self.assertIn("<peer>", str(exc))
