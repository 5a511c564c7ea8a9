"""What a migration record's stages say: done or not, and time left.

Shared by the engine, which derives a row's columns from the stages
(:mod:`dtn_migrate.engine.persistence`), and the progress lines of the
client side, which must stay light (no database imports).
"""

from dtn_migrate.common import states


def done(st, size):
    """Whether stage ``st`` (a dict, maybe None) of an image of ``size``
    bytes is done.
    """
    st = st or {}
    if st.get("state") in states.STAGE_DONE_STATES:
        return True
    total = st.get("size") or size
    return bool(total) and (st.get("done") or 0) >= total


def eta(stages, size, names=states.STAGES):
    """Seconds left of the unfinished stage due last (a stage's own
    ``eta``, else its bytes left at its rate), or None.
    """
    last = None
    for name in names:
        st = stages.get(name) or {}
        total = st.get("size") or size
        if not st.get("rate") or not total or done(st, size):
            continue
        left = st.get("eta")
        if left is None:
            left = (total - (st.get("done") or 0)) / st["rate"]
        last = left if last is None else max(last, left)
    return last
