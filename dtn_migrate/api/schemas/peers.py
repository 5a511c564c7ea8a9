"""Schemas of /v1/peers."""

from dtn_migrate.api.schemas import common

LIST_QUERY = common.NO_QUERY

PEER = {
    'type': 'object',
    'title': 'Peer',
    'required': ['name', 'address', 'port', 'reachable', 'rtt_ms',
                 'last_throughput', 'last_transfer_at', 'checked_at',
                 'error'],
    'properties': {
        'name': {'type': 'string'},
        'address': common.nullable({'type': 'string'}),
        'port': common.nullable({'type': 'integer'}),
        'reachable': {'type': 'boolean'},
        'rtt_ms': common.nullable({'type': 'number', 'minimum': 0}),
        'last_throughput': common.nullable({'type': 'number',
                                            'minimum': 0}),
        'last_transfer_at': common.NULLABLE_TIME,
        'checked_at': common.NULLABLE_TIME,
        'error': common.nullable({'type': 'string'}),
    },
}

LIST_RESPONSE = {
    'type': 'object',
    'required': ['peers'],
    'properties': {'peers': {'type': 'array', 'items': PEER}},
}

SHOW_RESPONSE = common.one('peer', PEER)
