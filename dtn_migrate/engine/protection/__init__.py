"""Protection policies: what to keep replicated on a peer, and how stale
the peer's copy may be.

``selectors`` and ``policies`` check what operators ask for;
``catalog`` keeps the replica catalog; ``rpo`` grades a policy's
recovery point; ``sync`` replicates what policies select, from Glance's
notifications (``listener``), scans and requests.
"""
