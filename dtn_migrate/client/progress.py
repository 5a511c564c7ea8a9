"""Progress lines of migrations: ``openstack dtn ... --wait``,
dtn-migrate-manage and the demo.
"""

import shutil

from dtn_migrate.common import stages as stages_mod
from dtn_migrate.common import states
from dtn_migrate.common import units

#: ``MM:SS`` (``H:MM:SS`` from an hour up).
duration = units.duration


def first_line(text):
    lines = str(text or "").strip().splitlines()
    return lines[0] if lines else ""


def _since(when):
    """``HH:MM:SS UTC`` of an ISO 8601 time (the API's), else as is."""
    text = str(when)
    if "T" in text:
        return text.split("T", 1)[1][:8] + " UTC"
    return text


def migration_line(record, seen=None, width=20, label=True, columns=None):
    """One progress line for a migration record: its name and state
    (if ``label``), a bar, the progress of all its work, each stage
    begun with its smoothed rate, the ETA once known and whether the
    peer answers, e.g. ``[########....]  42.0% of 2.0 GiB export 100%
    transfer 26% 310.0 MiB/s import 0% ETA 00:03``.  ``seen``, a dict
    kept from one line of the migration to the next (empty at first),
    keeps the percentages from going back.  ``columns``: the line fits
    in that many characters less one; the bar, then the name, then the
    size make room for the stages, rate and ETA.
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
    size = record.get("size")
    tail, finished = [], []
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
        rate = stages_mod.known_rate(st) or st.get("rate")
        if done < 100 and rate and not final:
            text += " %s" % units.rate(rate)
        tail.append(text)
        if done >= 100:
            finished.append(text)
    if final:
        if record.get("error"):
            tail.append("- %s" % first_line(record["error"]))
    else:
        # The engine's, over the work left in every stage (None until
        # the rates it needs are known).
        if record.get("eta") is not None:
            tail.append("ETA %s" % duration(record["eta"]))
        if record.get("peer_silent_since"):
            tail.append("- peer not answering since %s"
                        % _since(record["peer_silent_since"]))
    if record.get("reused"):
        tail.append("(reused)")
    name = record.get("image_name") or record.get("image_id") or \
        record.get("migration_id") or "?"

    def compose(bar, name_width, with_size, all_stages=True):
        parts = []
        if label:
            parts.append("%-*.*s %-9s" % (name_width, name_width, name,
                                          state) if name_width else
                         "%-9s" % state)
        filled = int(bar * total / 100)
        parts.append(("[%s%s] " % ("#" * filled, "." * (bar - filled))
                      if bar else "") + "%5.1f%%" % total)
        if size and with_size:
            parts.append("of %s" % units.human(size))
        return " ".join(parts + [t for t in tail if all_stages or
                                 final or t not in finished])

    line = compose(width, 28, True)
    if columns is None:
        return line
    # What gives way first: the bar, the name, the size, the stages
    # done, the name altogether; the stages moving and the ETA stay.
    fits = [(bar if bar >= 5 else 0, 28, True)
            for bar in range(width, -1, -1)]
    fits += [(0, n, True) for n in (20, 12)] + [
        (0, 12, False), (0, 12, False, False), (0, 0, False, False)]
    for fit in fits:
        line = compose(*fit)
        if len(line) <= columns - 1:
            break
    return line


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

    def line(self, record, columns=None):
        """The record's line, fit to ``columns`` if given."""
        return migration_line(
            record, self.seen.setdefault(record.get("migration_id"), {}),
            label=self.label, columns=columns)

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
        lines = [self.line(r, columns) for r in shown]
        if len(shown) < len(records):
            lines.append(summary(records))
        text = "\x1b[%dA" % self.drawn if self.drawn else ""
        self.drawn = len(lines)
        return text + "".join("\r\x1b[K%s\n" % line[:columns - 1]
                              for line in lines) + "\x1b[J"
