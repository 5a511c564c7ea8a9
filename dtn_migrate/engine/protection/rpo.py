"""A policy's recovery point: how old its oldest change is that the peer
does not hold verified yet, graded against the policy's target.
"""

from dtn_migrate.common import states


def age(rows, now):
    """Seconds since the oldest unreplicated change of ``rows`` (policy
    images), 0.0 when the peer holds everything.
    """
    times = [r["changed_at"] for r in rows
             if r.get("state") in states.UNREPLICATED_STATES and
             r.get("changed_at")]
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
        return states.RPO_BREACHED
    if seconds > 0 and (seconds >= target * at_risk_fraction or
                        not peer_reachable):
        return states.RPO_AT_RISK
    return states.RPO_OK
