"""Progress lines of migrations: ``openstack dtn ... --wait``,
dtn-migrate-manage and the demo.
"""

import shutil

from dtn_migrate.common import stages as stages_mod
from dtn_migrate.common import states
from dtn_migrate.common import units

#: Seconds left of the unfinished stage due last, or None.
eta = stages_mod.eta
#: ``MM:SS`` (``H:MM:SS`` from an hour up).
duration = units.duration


def first_line(text):
    lines = str(text or "").strip().splitlines()
    return lines[0] if lines else ""


def migration_line(record, seen=None, width=20, label=True):
    """One progress line for a migration record: its name and state
    (if ``label``), a bar, each stage begun and the time left, e.g.
    ``[########....]  42.0% of 2.0 GiB export 100% transfer 26% 310.0
    MiB/s import 0% ETA 00:03``.  ``seen``, a dict kept from one line of
    the migration to the next (empty at first), keeps the percentages
    from going back.
    """
    seen = {} if seen is None else seen

    def pct(key, value):
        seen[key] = max(seen.get(key, 0.0), min(100.0, value))
        return seen[key]

    state = record.get("state") or "?"
    final = state in states.FINAL_STATES
    complete = state == "complete"
    total = pct("total", 100.0 if complete
                else 100.0 * float(record.get("progress") or 0))
    filled = int(width * total / 100)
    size = record.get("size")
    parts = []
    if label:
        name = record.get("image_name") or record.get("image_id") or \
            record.get("migration_id") or "?"
        parts.append("%-28.28s %-9s" % (name, state))
    parts.append("[%s%s] %5.1f%%" % ("#" * filled, "." * (width - filled),
                                     total))
    if size:
        parts.append("of %s" % units.human(size))
    stages = record.get("stages") or {}
    for name in states.STAGES:
        st = stages.get(name)
        if st is None:
            continue
        stage_size = st.get("size") or size
        if complete or st.get("state") in states.STAGE_DONE_STATES:
            done = pct(name, 100.0)
        elif stage_size:
            done = pct(name, 100.0 * (st.get("done") or 0) / stage_size)
        else:
            done = seen.get(name, 0.0)
        text = "%s %d%%" % (name, done)
        if done < 100 and st.get("rate") and not final:
            text += " %s" % units.rate(st["rate"])
        parts.append(text)
    if final:
        if record.get("error"):
            parts.append("- %s" % first_line(record["error"]))
    else:
        left = eta(stages, size)
        if left is None:
            # The row's own (the engine measured the rate itself).
            left = record.get("eta")
        if left is not None:
            parts.append("ETA %s" % duration(left))
    if record.get("reused"):
        parts.append("(reused)")
    return " ".join(parts)


def summary(records):
    counts = {}
    for record in records:
        state = record.get("state") or "?"
        counts[state] = counts.get(state, 0) + 1
    return "%d migrations: %s" % (len(records), ", ".join(
        "%d %s" % (n, state) for state, n in sorted(counts.items())))


class Progress:
    """Progress lines on ``stream``: redrawn in place on a terminal,
    else a migration's line whenever its state or tenth changes.
    """

    def __init__(self, stream, label=True):
        self.stream = stream
        self.label = label
        self.tty = stream.isatty()
        self.drawn = 0
        self.seen = {}
        self.printed = {}

    def line(self, record):
        return migration_line(
            record, self.seen.setdefault(record.get("migration_id"), {}),
            label=self.label)

    def draw(self, records):
        if self.tty:
            text = self._redraw(records)
        else:
            text = ""
            for record in records:
                line = self.line(record)
                mid = record.get("migration_id")
                key = (record.get("state"),
                       int(self.seen[mid]["total"] // 10))
                if self.printed.get(mid) != key:
                    self.printed[mid] = key
                    text += line + "\n"
        if text:
            self.stream.write(text)
            self.stream.flush()

    def _redraw(self, records):
        columns, rows = shutil.get_terminal_size((100, 24))
        shown = list(records)
        if len(shown) > rows - 2:
            shown = sorted(
                shown, key=lambda r: r.get("state") in states.FINAL_STATES)
            shown = shown[:max(1, rows - 3)]
        lines = [self.line(r) for r in shown]
        if len(shown) < len(records):
            lines.append(summary(records))
        text = "\x1b[%dA" % self.drawn if self.drawn else ""
        self.drawn = len(lines)
        return text + "".join("\r\x1b[K%s\n" % line[:columns - 1]
                              for line in lines) + "\x1b[J"
