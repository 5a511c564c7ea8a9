"""States and stages, defined once.

A *migration* (one image, to one peer) and a DTN *transfer* (its bytes
on the link) go through the same states; an *import* is the peer's
Glance image being made.
"""

# Migrations and transfers.
QUEUED = "queued"
RUNNING = "running"
COMPLETE = "complete"
FAILED = "failed"
CANCELLED = "cancelled"
#: Every state of a migration (or transfer), in the order it goes.
STATES = (QUEUED, RUNNING, COMPLETE, FAILED, CANCELLED)
#: Not ended yet.
ACTIVE_STATES = (QUEUED, RUNNING)
#: Ended: nothing more happens unless it is retried.
FINAL_STATES = (COMPLETE, FAILED, CANCELLED)
#: Ended without the peer holding the image: what may be retried.
UNSUCCESSFUL_STATES = (FAILED, CANCELLED)

# The stages of an outgoing migration.
EXPORT = "export"
TRANSFER = "transfer"
IMPORT = "import"
STAGES = (EXPORT, TRANSFER, IMPORT)
#: The peer's answer, before the first byte, that it would take the
#: image (its import rules, kept id, staging room): a stage that moves
#: no bytes, ahead of STAGES (whose bytes records count).
PREFLIGHT = "preflight"
#: Every stage an outgoing migration's record may name, in order.
ALL_STAGES = (PREFLIGHT,) + STAGES
#: Stage states that mean the stage is done, whatever its byte count
#: (the peer's last import report, "active", carries none).
STAGE_DONE_STATES = (COMPLETE, "active", "uploaded")

#: Directions of a migration record.
OUTGOING = "outgoing"
INCOMING = "incoming"
DIRECTIONS = (OUTGOING, INCOMING)

#: How the stages of a migration run: overlapping, or one after another.
MODES = ("pipelined", "serial")

#: Glance image visibilities.
VISIBILITIES = ("public", "private", "shared", "community")

# An import at the peer: the final states of its report.
IMPORT_ACTIVE = "active"
IMPORT_FINAL_STATES = (IMPORT_ACTIVE, FAILED)

# Protection policies.
#: How a policy follows its images.
POLICY_MODES = ("continuous", "scheduled", "manual")
#: What a policy does on the peer when a source image is deleted.
DELETIONS = ("keep", "mirror")
#: primary: this cloud holds the images, the peer the replicas; replica:
#: the policy this cloud learnt from the peer whose replicas it holds;
#: failed-over: such a policy after a failover; failback: the reverse
#: policy a failover makes.
POLICY_ROLES = ("primary", "replica", "failed-over", "failback")
#: A policy's recovery point against its target.
RPO_OK = "ok"
RPO_AT_RISK = "at-risk"
RPO_BREACHED = "breached"
RPO_STATES = (RPO_OK, RPO_AT_RISK, RPO_BREACHED)
#: The state of each image a policy protects.
POLICY_IMAGE_STATES = ("pending", "syncing", "replicated", "failed",
                       "deleting", "removed")
#: Policy image states whose change is not yet replicated and verified.
UNREPLICATED_STATES = ("pending", "syncing", "failed")
#: The state of a row of the replica catalog.
REPLICA_STATES = ("current", "deleted")

# Drills.
DRILL_STATES = ("running", "passed", "failed", "error")
DRILL_FINAL_STATES = ("passed", "failed", "error")
#: What a drill found of each replica.
DRILL_IMAGE_STATUSES = ("intact", "missing", "corrupt", "invalid")
