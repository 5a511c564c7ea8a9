"""The source cloud's migration flow.

::

    get-source-image -> check-peer -> preflight -> write-descriptor
        -> { stage-image | transfer-image | await-peer-import }

The preflight asks the peer whether it would import the image before
anything is staged or sent (``dtn_migrate.engine.preflight``).

In pipelined mode the three stages in braces run at once (an unordered
flow under the parallel engine) and meet through the staged file's
watermarks: the agent sends what staging committed, the peer imports
what its DTN made durable.  In serial mode they run one after another.
The staged files are removed once the outcome is saved
(:meth:`dtn_migrate.engine.outcomes.Outcomes.remove_staged`), so
that a migration is complete as soon as the peer holds the image.
"""

from taskflow.patterns import linear_flow
from taskflow.patterns import unordered_flow

from dtn_migrate.engine.tasks import outgoing as tasks

NAME = "outgoing-migration"


def get_flow(resources, mode):
    stages = [tasks.StageImage(resources), tasks.TransferImage(resources),
              tasks.AwaitPeerImport(resources)]
    if mode == "pipelined":
        middle = unordered_flow.Flow("pipelined-stages").add(*stages)
    else:
        middle = linear_flow.Flow("serial-stages").add(*stages)
    return linear_flow.Flow(NAME).add(
        tasks.GetSourceImage(resources),
        tasks.CheckPeer(resources),
        tasks.Preflight(resources),
        tasks.WriteDescriptor(resources),
        middle)
