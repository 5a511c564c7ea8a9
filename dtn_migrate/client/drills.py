"""Drills of protection policies, in the cloud that holds the replicas:
start, list, get, wait.

A drill checks every replica of a policy and measures the time it took
to make them usable (the RTO measured); it runs in the background, so
``start`` answers at once and ``wait`` polls until it is done.
"""

import time

from dtn_migrate.client import exceptions
from dtn_migrate.client import listing
from dtn_migrate.client import polling


def is_final(drill):
    return drill is not None and drill.get("state") != "running"


class DrillManager:

    def __init__(self, client):
        self.client = client

    def start(self, policy_id, clone=False):
        """Start a drill of the policy ``policy_id`` (its id: resolve a
        name with ``client.policies.find``); returns the drill, running.
        ``clone`` also clones every replica into a hidden image, and
        removes the clone.
        """
        body = {"policy_id": policy_id}
        if clone:
            body["clone"] = True
        return self.client.post("/drills", body)["drill"]

    def list(self, policy_id=None, state=None, marker=None, limit=None,
             all_projects=False):
        """Drills, newest first (every page), without their reports."""
        params = listing.params(
            policy_id=policy_id, state=state, marker=marker,
            all_projects=True if all_projects else None)
        return listing.list_all(self.client, "/drills", "drills", params,
                                limit)

    def get(self, drill_id):
        """A drill, with its report (the check of every replica)."""
        return self.client.get("/drills/%s" % listing.quote(drill_id))["drill"]

    def wait(self, drill_id, timeout=None, interval=2, outage=120.0,
             sleep=time.sleep):
        """Poll the drill until its state is no longer ``running``;
        returns it (failed or error too: the caller decides).  An API
        that cannot be reached, or answers 502/503/504, is polled again
        for up to ``outage`` seconds in a row.  Raises WaitTimeout after
        ``timeout`` seconds (None: no limit).
        """
        def ended():
            drill = self.get(drill_id)
            return drill if is_final(drill) else None

        drill = polling.poll(ended, interval, timeout, outage, sleep)
        if drill is None:
            raise exceptions.WaitTimeout(
                "drill %s not finished after %d s" % (drill_id, timeout))
        return drill
