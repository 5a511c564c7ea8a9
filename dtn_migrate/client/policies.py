"""Protection policies: keep the images a selector picks replicated to a
peer cloud.  create, list, get, find, update, delete, sync, failover,
failback, images.
"""

import urllib.parse

from dtn_migrate.client import exceptions
from dtn_migrate.client import migrations

SORT_KEYS = ("created_at", "updated_at", "name", "rpo_seconds", "id")
#: The fields of a policy a client may set.
FIELDS = ("name", "description", "peer", "mode", "schedule",
          "rpo_minutes", "selector", "options", "enabled", "project_id")


def _quote(value):
    return urllib.parse.quote(str(value), safe="")


def list_all(client, path, key, params, limit=None):
    """Every item of a paged list answer (``key``), following the
    "next" links until ``limit`` items are read (all when None).
    """
    found = []
    seen = set()
    marker = params.pop("marker", None)
    while True:
        query = dict(params)
        if limit is not None:
            query["limit"] = min(migrations.MAX_PAGE, limit - len(found))
        if marker is not None:
            query["marker"] = marker
        body = client.get(path, params=query) or {}
        items = body.get(key) or []
        if limit is not None:
            items = items[:limit - len(found)]
        found.extend(items)
        marker = migrations._next_marker(body)
        if not items or marker is None or marker in seen or \
                (limit is not None and len(found) >= limit):
            return found
        seen.add(marker)


def _params(**values):
    params = {}
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, (list, tuple, set)):
            value = list(value)
        params[key] = value
    return params


class PolicyManager:

    def __init__(self, client):
        self.client = client

    def _fields(self, fields):
        unknown = sorted(set(fields) - set(FIELDS))
        if unknown:
            raise TypeError("unknown policy field(s): %s"
                            % ", ".join(unknown))
        return {k: v for k, v in fields.items()}

    def create(self, **fields):
        """Create a policy: ``name``, ``peer`` and ``selector`` (a dict
        of tags, properties, visibility, name_pattern, projects) are
        required; see FIELDS for the others.  Returns the policy.
        """
        body = self.client.post("/policies", self._fields(fields))
        return body["policy"]

    def list(self, name=None, peer=None, mode=None, rpo_state=None,
             enabled=None, marker=None, limit=None, sort_key=None,
             sort_dir=None, all_projects=False):
        """Policies, newest first unless sorted otherwise (every page)."""
        params = _params(name=name, peer=peer, mode=mode,
                         rpo_state=rpo_state, enabled=enabled,
                         marker=marker, sort_key=sort_key,
                         sort_dir=sort_dir,
                         all_projects=True if all_projects else None)
        return list_all(self.client, "/policies", "policies", params,
                        limit)

    def get(self, policy_id):
        return self.client.get("/policies/%s" % _quote(policy_id))["policy"]

    def find(self, name_or_id):
        """The policy of this id, else the one of this name
        (HttpNotFound when none; ClientException when several share it).
        """
        try:
            return self.get(name_or_id)
        except exceptions.HttpNotFound:
            pass
        try:
            found = self.list(name=name_or_id)
        except exceptions.HttpBadRequest:
            found = []
        if len(found) == 1:
            return found[0]
        if found:
            raise exceptions.ClientException(
                "%d protection policies are named %s; give an ID"
                % (len(found), name_or_id))
        raise exceptions.HttpNotFound(
            "No protection policy with name or ID %s" % name_or_id,
            http_status=404)

    def update(self, policy_id, **fields):
        """Change the fields given; returns the policy."""
        body = self.client.put("/policies/%s" % _quote(policy_id),
                               self._fields(fields))
        return body["policy"]

    def delete(self, policy_id):
        self.client.delete("/policies/%s" % _quote(policy_id))

    def sync(self, policy_id):
        """Replicate now what the policy selects and the peer lacks:
        ``{"policy": ..., "migrations": [...]}``.
        """
        return self.client.post("/policies/%s/action" % _quote(policy_id),
                                {"sync": None})

    def failover(self, policy_id):
        """In the cloud holding the replicas of the policy (learnt from
        its peer): make this cloud primary for their images and prepare
        the reverse policy.  ``{"policy": ..., "reverse_policy": ...,
        "promoted": n}``; run it again after an interruption.
        """
        return self.client.post("/policies/%s/action" % _quote(policy_id),
                                {"failover": None})

    def failback(self, policy_id):
        """Send back to the peer what was created or changed since the
        failover: ``{"policy": ..., "reverse_policy": ..., "migrations":
        [...], "complete": bool}``; call again (once the migrations
        finish) until ``complete``.
        """
        return self.client.post("/policies/%s/action" % _quote(policy_id),
                                {"failback": None})

    def images(self, policy_id, state=None, marker=None, limit=None):
        """The images the policy protects, oldest first (every page)."""
        return list_all(self.client,
                        "/policies/%s/images" % _quote(policy_id),
                        "images", _params(state=state, marker=marker),
                        limit)
