"""A policy's recovery point: how old its oldest change is that the peer
does not hold verified yet, graded against the policy's target.
"""

OK = "ok"
AT_RISK = "at-risk"
BREACHED = "breached"
STATES = (OK, AT_RISK, BREACHED)
#: Policy image states whose change is not yet replicated and verified.
UNREPLICATED = ("pending", "syncing", "failed")


def age(rows, now):
    """Seconds since the oldest unreplicated change of ``rows`` (policy
    images), 0.0 when the peer holds everything.
    """
    times = [r["changed_at"] for r in rows
             if r.get("state") in UNREPLICATED and r.get("changed_at")]
    if not times:
        return 0.0
    return max(0.0, (now - min(times)).total_seconds())


def grade(seconds, target_minutes, at_risk_fraction, peer_reachable=True):
    """``ok``, ``at-risk`` or ``breached``.

    At risk: the oldest change is ``at_risk_fraction`` of the target
    old, or a change waits while the peer cannot be reached (it cannot
    get better on its own).
    """
    target = target_minutes * 60.0
    if seconds >= target:
        return BREACHED
    if seconds > 0 and (seconds >= target * at_risk_fraction or
                        not peer_reachable):
        return AT_RISK
    return OK
