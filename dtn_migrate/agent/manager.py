"""RPC endpoints of the DTN agent (topic dtn_migrate_agent)."""

import oslo_messaging as messaging
from oslo_log import log as logging

from dtn_migrate import exception

LOG = logging.getLogger(__name__)


class AgentManager:
    """Start, follow, cancel and resume transfers to peer DTNs, and report
    what this DTN is receiving.

    API version history:

    * 1.0 - Initial version.
    """

    target = messaging.Target(version='1.0')

    def __init__(self, host, outgoing, sink):
        self.host = host
        self.outgoing = outgoing
        self.sink = sink

    @messaging.expected_exceptions(exception.DtnMigrateException)
    def start_transfer(self, ctxt, peer, files, options=None,
                       transfer_id=None):
        """Queue a transfer of ``files`` (paths under the staging root, or
        mappings with path/name/sha512/size/growing/watermark_file) to
        ``peer``.  Returns its status; repeating a request with the same
        ``transfer_id`` returns the existing transfer.
        """
        return self.outgoing.start(peer, files, options, transfer_id)

    @messaging.expected_exceptions(exception.DtnMigrateException)
    def get_transfer(self, ctxt, transfer_id):
        return self.outgoing.get(transfer_id)

    def list_transfers(self, ctxt):
        return self.outgoing.list()

    @messaging.expected_exceptions(exception.DtnMigrateException)
    def cancel_transfer(self, ctxt, transfer_id):
        return self.outgoing.cancel(transfer_id)

    @messaging.expected_exceptions(exception.DtnMigrateException)
    def resume_transfer(self, ctxt, transfer_id):
        return self.outgoing.resume(transfer_id)

    @messaging.expected_exceptions(exception.DtnMigrateException)
    def get_incoming(self, ctxt, transfer_id=None):
        """Transfers this DTN receives (one, with its files, or all)."""
        if transfer_id is None:
            return self.sink.status()
        status = self.sink.status(self.outgoing._check_id(transfer_id))
        if status is None:
            raise exception.TransferNotFound(transfer_id=transfer_id)
        return status

    @messaging.expected_exceptions(exception.DtnMigrateException)
    def get_watermark(self, ctxt, transfer_id, name):
        """Durable contiguous prefix of an incoming file and its path."""
        info = self.sink.watermark(self.outgoing._check_id(transfer_id),
                                   name)
        if info is None:
            raise exception.TransferNotFound(transfer_id=transfer_id)
        return info

    def ping(self, ctxt):
        return {"host": self.host, "peers": self.outgoing.peers.names,
                "listen_port": self.sink.port}
