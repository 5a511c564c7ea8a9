"""How two DTNs talk, whatever the connection is for.

``protocol`` (the frame format and its messages), ``auth`` (mutual
HMAC authentication, frame tags, TLS contexts) and ``handshake`` (the
opening of a connection: CONNECT, CHALLENGE, AUTH, CONNECT_ACK).
"""
