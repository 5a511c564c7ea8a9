"""What a migration record's stages say: done or not, how far the
migration is and how long it has left.

Shared by the engine, which derives a row's columns from the stages
(:mod:`dtn_migrate.engine.persistence`), and the progress lines of the
client side, which must stay light (no database imports).

Each stage (export, transfer and import of an outgoing migration; the
import of an incoming one) moves the image's bytes once.  Its *rate* is
a smoothed one: the bytes it moved over a sliding window of up to
``WINDOW`` seconds, from the samples the engine takes each time it
writes a migration's progress (:func:`sample`).  A rate is *known*
after ``MIN_SAMPLES`` samples over at least ``MIN_SECONDS``: before
that no ETA is given.

* The ETA covers the work left in every stage, each at its own rate: in
  serial mode one after another (the sum), in pipelined mode at once
  (the stage due last).  A stage that has not moved yet takes the
  slowest rate known; one that moves but whose rate is not known yet
  leaves the ETA unknown.
* Progress is the work done over all the work, each stage's bytes
  weighted by the time a byte takes it (the inverse of its rate, the
  slowest known for a stage without one): a fast export counts for
  little.  Until a rate is known, it is the fraction of the stage
  furthest behind.  The engine keeps it from going back within an
  attempt (:func:`progress`'s ``floor``), through restarts of either
  engine.
"""

from dtn_migrate.common import states

#: Seconds of the window the rate is measured over (at most).
WINDOW = 30.0
#: Samples, and seconds they span, before a stage's rate is known.
MIN_SAMPLES = 3
MIN_SECONDS = 5.0
#: Keys of a stage's smoothed rate in its record: the rate, the bytes
#: done when its window began, the samples and seconds since.
RATE, BASE, SAMPLES, SPAN = ("avg_rate", "rate_base", "rate_samples",
                             "rate_seconds")


def sample(before, now, seconds):
    """The smoothed-rate keys of stage ``now`` (a dict) after it moved
    from stage ``before`` (the last sample, maybe None) in ``seconds``:
    the bytes it moved since its window began (when it was first seen
    moving: not its start-up) over the seconds since, the window sliding
    once it is ``WINDOW`` long.  Byte counts that move in steps (an
    agent's, a peer's reports) average out over the window.  A stage
    that went back (restarted from its start) measures afresh.
    """
    before = before or {}
    out = {k: before[k] for k in (RATE, BASE, SAMPLES, SPAN)
           if k in before}
    if not seconds or seconds <= 0 or \
            now.get("state") in states.STAGE_DONE_STATES:
        return out
    old, new = before.get("done"), now.get("done")
    if old is None or new is None or (not old and not new):
        return out
    if BASE not in out or new < old:
        return {BASE: new, SAMPLES: 0, SPAN: 0.0}
    span = out[SPAN] + seconds
    rate = (new - out[BASE]) / span
    base = out[BASE]
    if span > WINDOW:
        base, span = new - rate * WINDOW, WINDOW
    return {RATE: rate, BASE: base, SAMPLES: out[SAMPLES] + 1, SPAN: span}


def known_rate(st):
    """Stage ``st``'s smoothed rate once known, else None."""
    st = st or {}
    if (st.get(SAMPLES) or 0) < MIN_SAMPLES or \
            (st.get(SPAN) or 0.0) < MIN_SECONDS or not st.get(RATE):
        return None
    return st[RATE]


def done(st, size):
    """Whether stage ``st`` (a dict, maybe None) of an image of ``size``
    bytes is done.
    """
    st = st or {}
    if st.get("state") in states.STAGE_DONE_STATES:
        return True
    total = st.get("size") or size
    return bool(total) and (st.get("done") or 0) >= total


def ordered(stages, names=states.STAGES):
    """A copy of ``stages`` in which each stage of ``names`` has moved
    at most the bytes of the one before it while that one runs: a byte
    is exported, then sent, then imported, and a later stage's count
    that runs ahead (the peer's report and this agent's status read at
    different times) is not what it moved.
    """
    out = {k: dict(v) if isinstance(v, dict) else v
           for k, v in stages.items()}
    before = None
    for name in names:
        st = out.get(name)
        if not isinstance(st, dict):
            continue
        if before is not None and not done(before, None) and \
                before.get("done") is not None and \
                st.get("done") is not None and \
                st["done"] > before["done"] and \
                st.get("state") not in states.STAGE_DONE_STATES:
            st["done"] = before["done"]
        before = st
    return out


def _total(st, size):
    return (st or {}).get("size") or size


def _moved(st, size):
    if done(st, size):
        return _total(st, size)
    return min(_total(st, size), (st or {}).get("done") or 0)


def _left(st, size):
    return _total(st, size) - _moved(st, size)


def eta(stages, size, names=states.STAGES, pipelined=True):
    """Seconds left of all the work of stages ``names``, or None while a
    rate it needs is not known (see the module's doc).
    """
    if not size:
        return None
    left = {n: _left(stages.get(n), size) for n in names}
    if not any(left.values()):
        return 0.0
    rates = {n: known_rate(stages.get(n)) for n in names}
    slowest = min([r for r in rates.values() if r], default=None)
    times = []
    for name in names:
        if not left[name]:
            continue
        st = stages.get(name) or {}
        rate = rates[name]
        if rate is None:
            if st.get("done") or st.get(SAMPLES):
                return None         # it moves: its own rate is due soon
            rate = slowest
        if rate is None:
            return None
        times.append(left[name] / rate)
    return max(times) if pipelined else sum(times)


def progress(stages, size, names=states.STAGES, floor=0.0):
    """Work done over all the work (0..1), each stage's bytes weighted by
    the time a byte takes it; never below ``floor`` (what an earlier
    save said of this attempt).
    """
    if not size:
        return floor or 0.0
    rates = {n: known_rate(stages.get(n)) for n in names}
    slowest = min([r for r in rates.values() if r], default=None)
    if slowest is None:
        # No rate known yet: the stage furthest behind (underestimated
        # now rather than held back later).
        return max(floor or 0.0, round(min(
            _moved(stages.get(n), size) / _total(stages.get(n), size)
            for n in names), 4))
    moved = total = 0.0
    for name in names:
        st = stages.get(name)
        weight = 1.0 / (rates[name] or slowest)
        moved += weight * _moved(st, size)
        total += weight * _total(st, size)
    return max(floor or 0.0, round(moved / total, 4))
