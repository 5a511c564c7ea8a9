"""The replica catalog: which image is a replica of which."""

from dtn_migrate.client import listing


class ReplicaManager:

    def __init__(self, client):
        self.client = client

    def list(self, peer=None, direction=None, policy_id=None,
             source_image_id=None, state=None, marker=None, limit=None,
             all_projects=False):
        """Replica catalog entries, newest first (every page)."""
        params = listing.params(
            peer=peer, direction=direction, policy_id=policy_id,
            source_image_id=source_image_id, state=state, marker=marker,
            all_projects=True if all_projects else None)
        return listing.list_all(self.client, "/replicas", "replicas",
                                params, limit)
