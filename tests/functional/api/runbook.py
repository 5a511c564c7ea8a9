"""The operator runbooks of doc/source/admin/runbooks/, run as tests.

A runbook is written for people: numbered steps, each with a ``..
code-block:: console`` of ``$ openstack ...`` lines and the output to
expect.  RST comments, invisible in HTML, make it runnable:

``.. runbook: cloud=a user=alice``
    before each console block: where its commands run (cloud ``a``, the
    protected one, or ``b``, the DR cloud) and as whom (a persona of
    :func:`devcloud.api.personas`).
``.. runbook-expect: TEXT``
    after a block: its combined output contains TEXT.
``.. runbook-wait: SECONDS TEXT``
    after a block: run it again until its output contains TEXT, for at
    most SECONDS (what an operator does by looking again; the runbook
    shows no shell loop).
``.. runbook-set: NAME``
    after a block: the first line of its last command's output is the
    value of the placeholder ``<NAME>`` in the steps that follow (an ID
    that the operator reads off the screen).

Placeholders ``<peer>``, ``<tag>``, ``<policy>``, ``<file>`` and
``<image>`` (see :data:`PLACEHOLDERS`) take the values the test gives
:func:`run`.  The same code checks, without clouds, that every runbook
parses and names real commands (tests/unit/test_runbooks.py).
"""

import dataclasses
import re
import shlex
import time
import typing

#: The placeholders a runbook may use without defining them, and what
#: the caller of :func:`run` gives for each.
PLACEHOLDERS = {
    "peer": "the DR cloud's DTN name, as 'openstack dtn peer list' "
            "shows it on cloud a",
    "tag": "an image tag unique to the run",
    "policy": "the name of the policy the runbook creates",
    "file": "a small file to upload as an image",
    "image": "the ID of an image a previous step created",
}
CLOUDS = ("a", "b")
USERS = ("alice", "rita", "bob", "admin")
#: Seconds between two runs of a block that waits.
INTERVAL = 2

PLACEHOLDER = re.compile(r"<([a-z][a-z0-9-]*)>")
_WHERE = re.compile(r"^\.\. runbook:\s+(.*)$")
_ANNOTATION = re.compile(r"^\.\. runbook-(expect|wait|set):\s*(.*)$")
_CONSOLE = re.compile(r"^\.\. code-block::\s+console\s*$")


class RunbookError(ValueError):
    """A runbook that does not follow the rules of this module."""


@dataclasses.dataclass
class Step:
    """One console block: its commands (the arguments of ``openstack``)
    and what must come out of them.
    """

    cloud: str
    user: str
    commands: typing.List[typing.List[str]]
    expect: typing.List[str] = dataclasses.field(default_factory=list)
    wait: typing.Optional[typing.Tuple[int, str]] = None
    #: The placeholder the first line of the output defines.
    capture: typing.Optional[str] = None
    #: The output the runbook shows (for people; not checked).
    output: str = ""
    #: Where the block starts: "path:line".
    where: str = ""


def _indent(line):
    return len(line) - len(line.lstrip())


def _where(text, origin):
    fields = {}
    for word in text.split():
        key, sep, value = word.partition("=")
        if not sep or key in fields:
            raise RunbookError("%s: bad runbook comment %r (want "
                               "cloud=a|b user=NAME)" % (origin, text))
        fields[key] = value
    if set(fields) != {"cloud", "user"} or fields["cloud"] not in CLOUDS \
            or fields["user"] not in USERS:
        raise RunbookError("%s: bad runbook comment %r (want cloud=%s "
                           "user=%s)" % (origin, text, "|".join(CLOUDS),
                                         "|".join(USERS)))
    return fields["cloud"], fields["user"]


def _block(lines, start, indent):
    """The body of the directive at START (indented more than INDENT):
    (its lines without their common indent, the index after it).
    """
    end = start
    while end < len(lines) and (not lines[end].strip()
                                or _indent(lines[end]) > indent):
        end += 1
    body = lines[start:end]
    while body and not body[-1].strip():
        body.pop()
    # Directive options (":caption: ...") come first.
    while body and body[0].strip().startswith(":"):
        body.pop(0)
    while body and not body[0].strip():
        body.pop(0)
    common = min((_indent(x) for x in body if x.strip()), default=0)
    return [x[common:] for x in body], end


def _commands(body, origin):
    """([argv...], output) of a console block's lines: ``$ `` lines
    (continued by a trailing backslash) are commands, the rest output.
    """
    commands, output = [], []
    i = 0
    while i < len(body):
        line = body[i]
        if not line.startswith("$ "):
            output.append(line)
            i += 1
            continue
        text = line[2:]
        while text.endswith("\\") and i + 1 < len(body):
            i += 1
            text = text[:-1] + " " + body[i].strip()
        i += 1
        try:
            argv = shlex.split(text)
        except ValueError as exc:
            raise RunbookError("%s: %s: %s" % (origin, text, exc))
        if not argv or argv[0] != "openstack" or len(argv) < 2:
            raise RunbookError("%s: not an 'openstack' command: %s"
                               % (origin, text))
        commands.append(argv[1:])
    if not commands:
        raise RunbookError("%s: a console block without a '$ openstack' "
                           "line" % origin)
    return commands, "\n".join(output)


def parse(path):
    """The steps of the runbook at PATH, in order (RunbookError when it
    breaks the rules of this module).
    """
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    steps = []
    pending = None              # (cloud, user) of the next block
    i = 0
    while i < len(lines):
        text = lines[i].strip()
        origin = "%s:%d" % (path, i + 1)
        match = _WHERE.match(text)
        if match:
            if pending:
                raise RunbookError("%s: two runbook comments without a "
                                   "console block between" % origin)
            pending = _where(match.group(1), origin)
            i += 1
            continue
        match = _ANNOTATION.match(text)
        if match:
            if not steps or pending:
                raise RunbookError("%s: %s before its console block"
                                   % (origin, text))
            _annotate(steps[-1], match.group(1), match.group(2).strip(),
                      origin)
            i += 1
            continue
        if _CONSOLE.match(text):
            if not pending:
                raise RunbookError("%s: a console block without a '.. "
                                   "runbook: cloud=... user=...' comment "
                                   "before it" % origin)
            body, i = _block(lines, i + 1, _indent(lines[i]))
            commands, output = _commands(body, origin)
            steps.append(Step(pending[0], pending[1], commands,
                              output=output, where=origin))
            pending = None
            continue
        if text.startswith(".. code-block::") and "console" in text:
            raise RunbookError("%s: write '.. code-block:: console'"
                               % origin)
        i += 1
    if pending:
        raise RunbookError("%s: a runbook comment without its console "
                           "block" % path)
    return steps


def _annotate(step, kind, value, origin):
    if not value:
        raise RunbookError("%s: an empty runbook-%s" % (origin, kind))
    if kind == "expect":
        step.expect.append(value)
    elif kind == "wait":
        seconds, _, text = value.partition(" ")
        if step.wait or not seconds.isdigit() or not text.strip():
            raise RunbookError("%s: want one '.. runbook-wait: SECONDS "
                               "TEXT' per block" % origin)
        step.wait = (int(seconds), text.strip())
    else:
        if step.capture or not re.match(r"^[a-z][a-z0-9-]*$", value):
            raise RunbookError("%s: want one '.. runbook-set: NAME' per "
                               "block (lower case, digits, '-')" % origin)
        step.capture = value


def placeholders(step):
    """The placeholder names STEP uses (commands, expected text, wait)."""
    texts = [a for argv in step.commands for a in argv] + step.expect
    if step.wait:
        texts.append(step.wait[1])
    return {m for t in texts for m in PLACEHOLDER.findall(t)}


def substitute(text, values):
    """TEXT with each ``<name>`` of VALUES replaced (KeyError for a
    placeholder VALUES lacks).
    """
    def one(match):
        name = match.group(1)
        if name not in values:
            raise KeyError("no value for the placeholder <%s>" % name)
        return str(values[name])
    return PLACEHOLDER.sub(one, text)


def _run_block(case, step, cloud, values):
    """(combined output, stdout of the last command) of STEP's commands."""
    out, last = [], ""
    for argv in step.commands:
        proc = case.openstack(step.user,
                              *[substitute(a, values) for a in argv],
                              cloud=cloud, check=True)
        out += [proc.stdout or "", proc.stderr or ""]
        last = proc.stdout or ""
    return "".join(out), last


def run(case, path, values, sleep=time.sleep, clock=time.monotonic):
    """Run the runbook at PATH with CASE (an ApiPairTestCase: its
    ``openstack``, clouds ``a`` and ``b``), VALUES giving each
    placeholder ({"peer": ..., "tag": ..., ...}, names without angle
    brackets).  Checks each block's expectations and waits (``sleep``
    and ``clock``: this call's own, which a unit test replaces without
    touching other threads'); returns the combined output of each step,
    in order.
    """
    values = dict(values)
    steps = parse(path)
    outputs = []
    for step in steps:
        cloud = {"a": case.a, "b": case.b}[step.cloud]
        deadline = clock() + (step.wait[0] if step.wait else 0)
        while True:
            out, last = _run_block(case, step, cloud, values)
            if not step.wait or substitute(step.wait[1], values) in out:
                break
            if clock() >= deadline:
                case.fail("%s: no %r in the output of %s after %d s:\n%s"
                          % (step.where, substitute(step.wait[1], values),
                             step.commands, step.wait[0], out))
            sleep(INTERVAL)
        for text in step.expect:
            case.assertIn(substitute(text, values), out,
                          "%s: %s" % (step.where, step.commands))
        if step.capture:
            lines = last.strip().splitlines()
            if not lines:
                case.fail("%s: no output to set <%s> from"
                          % (step.where, step.capture))
            values[step.capture] = lines[0].strip()
        outputs.append(out)
    return outputs
