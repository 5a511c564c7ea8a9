"""Client side of the DTN agent RPC API."""

import oslo_messaging as messaging

from dtn_migrate import rpc

TOPIC = 'dtn_migrate_agent'


def _epoch(epoch):
    """The ``epoch`` argument of a fenced command, sent only when set."""
    return {} if epoch is None else {"epoch": epoch}


class AgentAPI:
    """Calls to the agent on DTN ``host`` (its RPC server name).

    API version history: see ``agent.manager.AgentManager``.
    """

    VERSION = '1.0'

    def __init__(self, timeout=60, retry=None, transport=None):
        target = messaging.Target(topic=TOPIC, version=self.VERSION)
        self.client = rpc.get_client(target, version_cap=self.VERSION,
                                     timeout=timeout, retry=retry,
                                     transport=transport)

    def _call(self, ctxt, host, method, timeout=None, **kwargs):
        """Call ``method`` on ``host``; ``timeout``: seconds to wait for
        its answer (None: the client's).
        """
        extra = {} if timeout is None else {"timeout": timeout}
        cctxt = self.client.prepare(server=host, **extra)
        return cctxt.call(ctxt, method, **kwargs)

    def start_transfer(self, ctxt, host, peer, files, options=None,
                       transfer_id=None, epoch=None):
        """``epoch`` (here and below): the claim of the engine that asks,
        see dtn_migrate.agent.fences (None: unfenced).
        """
        return self._call(ctxt, host, 'start_transfer', peer=peer,
                          files=files, options=options,
                          transfer_id=transfer_id, **_epoch(epoch))

    def fence_transfer(self, ctxt, host, transfer_id, epoch):
        return self._call(ctxt, host, 'fence_transfer',
                          transfer_id=transfer_id, epoch=epoch)

    def get_transfer(self, ctxt, host, transfer_id, epoch=None):
        return self._call(ctxt, host, 'get_transfer', transfer_id=transfer_id,
                          **_epoch(epoch))

    def list_transfers(self, ctxt, host):
        return self._call(ctxt, host, 'list_transfers')

    def cancel_transfer(self, ctxt, host, transfer_id, epoch=None):
        return self._call(ctxt, host, 'cancel_transfer',
                          transfer_id=transfer_id, **_epoch(epoch))

    def resume_transfer(self, ctxt, host, transfer_id, epoch=None):
        return self._call(ctxt, host, 'resume_transfer',
                          transfer_id=transfer_id, **_epoch(epoch))

    def get_incoming(self, ctxt, host, transfer_id=None):
        return self._call(ctxt, host, 'get_incoming',
                          transfer_id=transfer_id)

    def get_watermark(self, ctxt, host, transfer_id, name):
        return self._call(ctxt, host, 'get_watermark',
                          transfer_id=transfer_id, name=name)

    def ping(self, ctxt, host):
        # The reply names the staging root and what the agent pushes.
        return self._call(ctxt, host, 'ping')

    def set_import_report(self, ctxt, host, transfer_id, report,
                          epoch=None):
        return self._call(ctxt, host, 'set_import_report',
                          transfer_id=transfer_id, report=report,
                          **_epoch(epoch))

    def get_peer_report(self, ctxt, host, peer, transfer_id, attempt=1):
        """The import report ``peer`` holds of ``transfer_id``, telling
        it that the caller waits for ``attempt``.
        """
        return self._call(ctxt, host, 'get_peer_report',
                          peer=peer, transfer_id=transfer_id,
                          attempt=attempt)

    def list_incoming(self, ctxt, host):
        return self._call(ctxt, host, 'list_incoming')

    def peer_health(self, ctxt, host, peer=None):
        """Health of ``host``'s peer DTN ``peer`` (None: of all its
        peers): a list of mappings, see AgentManager.peer_health.
        """
        return self._call(ctxt, host, 'peer_health',
                          peer=peer)

    def peer_request(self, ctxt, host, peer, request, timeout=None):
        """Have ``host`` send ``request`` (a JSON mapping) to its peer
        DTN ``peer``'s cloud and return that cloud's answer (a mapping).
        ``timeout`` must exceed the agent's [agent] peer_request_timeout.
        """
        return self._call(ctxt, host, 'peer_request',
                          timeout=timeout, peer=peer, request=request)
