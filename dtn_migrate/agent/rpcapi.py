"""Client side of the DTN agent RPC API."""

import oslo_messaging as messaging

from dtn_migrate import rpc

TOPIC = 'dtn_migrate_agent'


class AgentAPI:
    """Calls to the agent on DTN ``host`` (its RPC server name).

    API version history: see ``agent.manager.AgentManager``.
    """

    VERSION = '1.0'

    def __init__(self, timeout=60, retry=None):
        target = messaging.Target(topic=TOPIC, version=self.VERSION)
        self.client = rpc.get_client(target, version_cap=self.VERSION,
                                     timeout=timeout, retry=retry)

    def _call(self, ctxt, host, method, **kwargs):
        return self.client.prepare(server=host).call(ctxt, method, **kwargs)

    def start_transfer(self, ctxt, host, peer, files, options=None,
                       transfer_id=None):
        return self._call(ctxt, host, 'start_transfer', peer=peer,
                          files=files, options=options,
                          transfer_id=transfer_id)

    def get_transfer(self, ctxt, host, transfer_id):
        return self._call(ctxt, host, 'get_transfer', transfer_id=transfer_id)

    def list_transfers(self, ctxt, host):
        return self._call(ctxt, host, 'list_transfers')

    def cancel_transfer(self, ctxt, host, transfer_id):
        return self._call(ctxt, host, 'cancel_transfer',
                          transfer_id=transfer_id)

    def resume_transfer(self, ctxt, host, transfer_id):
        return self._call(ctxt, host, 'resume_transfer',
                          transfer_id=transfer_id)

    def get_incoming(self, ctxt, host, transfer_id=None):
        return self._call(ctxt, host, 'get_incoming',
                          transfer_id=transfer_id)

    def get_watermark(self, ctxt, host, transfer_id, name):
        return self._call(ctxt, host, 'get_watermark',
                          transfer_id=transfer_id, name=name)

    def ping(self, ctxt, host):
        return self._call(ctxt, host, 'ping')
