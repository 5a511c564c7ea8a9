"""Peer DTNs and their health, as this cloud's agent sees them."""

import urllib.parse


class PeerManager:

    def __init__(self, client):
        self.client = client

    def list(self):
        """Every configured peer: reachability, RTT, last throughput."""
        return self.client.get("/peers")["peers"]

    def get(self, name):
        """One peer's health; HttpNotFound for a peer not configured."""
        return self.client.get(
            "/peers/%s" % urllib.parse.quote(name, safe=""))["peer"]
