"""Mutual authentication of agents, and TLS contexts.

Every connection, control or data, opens with an HMAC-SHA256 challenge
over a key shared by the two DTNs of a peering::

    source -> sink   CONNECT   (carries nonce_c and the source's name)
    sink -> source   CHALLENGE nonce_s, proof_s
    source -> sink   AUTH      proof_c
    sink -> source   CONNECT_ACK

    transcript = CONNECT body || nonce_s
    proof_s = HMAC(key, "dtn-migrate/1 sink"   || transcript)
    proof_c = HMAC(key, "dtn-migrate/1 source" || transcript || proof_s)

Each side proves the key over a nonce chosen by the other, so neither a
replay nor a reflected proof is accepted, and the source checks the
sink's proof before it sends anything else.  TLS, when configured, wraps
the connection first (encryption for links outside a Science DMZ, and
certificate checks in both directions when a CA is given); the HMAC
exchange still runs inside it.
"""

import hashlib
import hmac
import os
import ssl

NONCE_SIZE = 32
_SINK_LABEL = b"dtn-migrate/1 sink"
_SOURCE_LABEL = b"dtn-migrate/1 source"
MIN_KEY_BYTES = 16


def nonce():
    return os.urandom(NONCE_SIZE)


def sink_proof(key, transcript):
    return hmac.new(key, _SINK_LABEL + transcript, hashlib.sha256).digest()


def source_proof(key, transcript, proof_s):
    return hmac.new(key, _SOURCE_LABEL + transcript + proof_s,
                    hashlib.sha256).digest()


def verify(expected, got):
    return hmac.compare_digest(expected, got)


def load_key(text=None, path=None):
    """A peer key from a string or a file; hex is decoded if it is hex."""
    if path:
        with open(path, "rb") as f:
            raw = f.read().strip()
    elif text:
        raw = text.strip().encode("utf-8")
    else:
        return None
    try:
        key = bytes.fromhex(raw.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        key = raw
    if len(key) < MIN_KEY_BYTES:
        raise ValueError("peer key must be at least %d bytes" % MIN_KEY_BYTES)
    return key


def server_context(cert_file, key_file, ca_file=None):
    """TLS context for the sink; with ``ca_file`` clients must present a
    certificate signed by it (mutual TLS).
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert_file, key_file)
    if ca_file:
        ctx.load_verify_locations(ca_file)
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def client_context(ca_file, cert_file=None, key_file=None,
                   check_hostname=True):
    """TLS context for the source: verifies the sink against ``ca_file``
    and presents its own certificate if given.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_verify_locations(ca_file)
    ctx.check_hostname = check_hostname
    if cert_file:
        ctx.load_cert_chain(cert_file, key_file)
    return ctx
