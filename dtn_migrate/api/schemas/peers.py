"""Schemas of /v1/peers."""

from dtn_migrate.api.schemas import common

LIST_QUERY = common.NO_QUERY

PEER = {
    'type': 'object',
    'title': 'Peer',
    'description': 'A peer DTN\'s health.  address, port and error are '
                   'there only for callers with dtn:peer:show:details '
                   '(administrators by default).',
    'required': ['name', 'reachable', 'rtt_ms', 'last_throughput',
                 'last_transfer_at', 'checked_at'],
    'properties': {
        'name': {'type': 'string'},
        'address': common.nullable({
            'type': 'string',
            'description': 'Where this cloud\'s DTN sends to the peer '
                           '(null: the peer only sends here).  Only '
                           'with dtn:peer:show:details.'}),
        'port': common.nullable({
            'type': 'integer',
            'description': 'The peer DTN\'s transfer port.  Only with '
                           'dtn:peer:show:details.'}),
        'reachable': {'type': 'boolean'},
        'rtt_ms': common.nullable({'type': 'number', 'minimum': 0}),
        'last_throughput': common.nullable({'type': 'number',
                                            'minimum': 0}),
        'last_transfer_at': common.NULLABLE_TIME,
        'checked_at': common.NULLABLE_TIME,
        'error': common.nullable({
            'type': 'string',
            'description': 'Why the last probe failed (null: it did '
                           'not).  Only with dtn:peer:show:details.'}),
    },
}

LIST_RESPONSE = {
    'type': 'object',
    'required': ['peers'],
    'properties': {'peers': {'type': 'array', 'items': PEER}},
}

SHOW_RESPONSE = common.one('peer', PEER)
