"""Protection policies: keep the images a selector picks replicated to a
peer cloud.  create, list, get, find, update, delete, sync, failover,
failback, images.
"""


from dtn_migrate.client import exceptions
from dtn_migrate.client import listing

SORT_KEYS = ("created_at", "updated_at", "name", "rpo_seconds", "id")
#: The fields of a policy a client may set.
FIELDS = ("name", "description", "peer", "mode", "schedule",
          "rpo_minutes", "selector", "options", "enabled", "project_id")


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
        params = listing.params(name=name, peer=peer, mode=mode,
                                rpo_state=rpo_state, enabled=enabled,
                                marker=marker, sort_key=sort_key,
                                sort_dir=sort_dir,
                                all_projects=True if all_projects else None)
        return listing.list_all(self.client, "/policies", "policies", params,
                                limit)

    def _action(self, policy_id, action):
        return self.client.post(
            "/policies/%s/action" % listing.quote(policy_id), {action: None})

    def get(self, policy_id):
        path = "/policies/%s" % listing.quote(policy_id)
        return self.client.get(path)["policy"]

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
        body = self.client.put("/policies/%s" % listing.quote(policy_id),
                               self._fields(fields))
        return body["policy"]

    def delete(self, policy_id):
        self.client.delete("/policies/%s" % listing.quote(policy_id))

    def sync(self, policy_id):
        """Replicate now what the policy selects and the peer lacks:
        ``{"policy": ..., "migrations": [...]}``.
        """
        return self._action(policy_id, "sync")

    def failover(self, policy_id):
        """In the cloud holding the replicas of the policy (learnt from
        its peer): make this cloud primary for their images and prepare
        the reverse policy.  ``{"policy": ..., "reverse_policy": ...,
        "promoted": n}``; run it again after an interruption.
        """
        return self._action(policy_id, "failover")

    def failback(self, policy_id):
        """Send back to the peer what was created or changed since the
        failover: ``{"policy": ..., "reverse_policy": ..., "migrations":
        [...], "complete": bool}``; call again (once the migrations
        finish) until ``complete``.
        """
        return self._action(policy_id, "failback")

    def images(self, policy_id, state=None, marker=None, limit=None):
        """The images the policy protects, oldest first (every page)."""
        return listing.list_all(self.client,
                                "/policies/%s/images" % listing.quote(
                                    policy_id),
                                "images", listing.params(
                                    state=state, marker=marker),
                                limit)
