"""The names of a migration's files under the staging root of both DTNs:
``<transfer id>/image.json`` (the descriptor) and ``<transfer id>/
image.data`` (the image's bytes).  The engine stages and imports them;
the agent's sink accepts nothing else from a peer by default.
"""

#: The image's descriptor.
DESCRIPTOR = "image.json"
#: The image's bytes.
DATA = "image.data"
#: Every file a migration stages under its transfer's directory.
LEAVES = (DESCRIPTOR, DATA)


def staged_name(transfer_id, leaf):
    """The name of a migration's file ``leaf`` under the staging root."""
    return "%s/%s" % (transfer_id, leaf)
