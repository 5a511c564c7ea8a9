"""Checksums: xxh3 per object, and a sha512 whose state can be saved.

Glance's os_hash_value is a sha512 of the whole image.  A sha512 is
sequential, so after a restart the hash would have to start again from
byte 0 and re-read everything already transferred.  ResumableSha512
drives OpenSSL's SHA512_Init/Update/Final through ctypes so that its
216-byte context can be checkpointed next to the data and restored.
Where libcrypto lacks those symbols it falls back to hashlib and simply
cannot checkpoint (resume then re-hashes the prefix).
"""

import ctypes
import ctypes.util
import hashlib
import struct
import zlib

import xxhash

from dtn_migrate.transfer import buffers

xxh3 = xxhash.xxh3_64_intdigest
xxh3_stream = xxhash.xxh3_64

# Bytes hashed (or copied) per step: small enough to stay in L2 cache,
# so that the bytes just read are hashed (and sent or written) from it
# rather than fetched from memory again.
PIECE = 256 << 10


class _Sha512Ctx(ctypes.Structure):
    # OpenSSL's SHA512_CTX: h[8], Nl, Nh, u.d[16], num, md_len.
    _fields_ = [("h", ctypes.c_uint64 * 8), ("Nl", ctypes.c_uint64),
                ("Nh", ctypes.c_uint64), ("d", ctypes.c_uint64 * 16),
                ("num", ctypes.c_uint), ("md_len", ctypes.c_uint)]


def _load_libcrypto():
    for name in ("libcrypto.so.3", ctypes.util.find_library("crypto")):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
            for fn in ("SHA512_Init", "SHA512_Update", "SHA512_Final"):
                getattr(lib, fn)
        except (OSError, AttributeError):
            continue
        ctx_p = ctypes.POINTER(_Sha512Ctx)
        lib.SHA512_Init.argtypes = [ctx_p]
        lib.SHA512_Update.argtypes = [ctx_p, ctypes.c_void_p, ctypes.c_size_t]
        lib.SHA512_Final.argtypes = [ctypes.c_char_p, ctx_p]
        return lib
    return None


_LIB = _load_libcrypto()


STATE_SIZE = ctypes.sizeof(_Sha512Ctx)
_STATE_HEADER = struct.Struct("!4sQI")  # magic, offset, crc32 of context
_STATE_MAGIC = b"S512"


class ResumableSha512:
    """sha512 with ``update``/``digest`` and a serialisable state."""

    name = "sha512"

    def __init__(self):
        self.offset = 0
        if _LIB is not None:
            self._ctx = _Sha512Ctx()
            _LIB.SHA512_Init(ctypes.byref(self._ctx))
            self._h = None
        else:
            self._ctx = None
            self._h = hashlib.sha512()

    @property
    def checkpointable(self):
        return self._ctx is not None

    def update(self, data):
        view = memoryview(data).cast("B")
        n = view.nbytes
        if not n:
            return
        if self._ctx is None:
            self._h.update(view)
        else:
            if view.readonly:
                # Pinned in place (bytes, read-only views): no copy.
                with buffers.pinned(view) as (addr, _):
                    _LIB.SHA512_Update(ctypes.byref(self._ctx), addr, n)
            else:
                addr = ctypes.addressof(ctypes.c_char.from_buffer(view))
                # ctypes releases the GIL for the duration of the call.
                _LIB.SHA512_Update(ctypes.byref(self._ctx), addr, n)
        self.offset += n

    def digest(self):
        if self._ctx is None:
            return self._h.digest()
        ctx = _Sha512Ctx.from_buffer_copy(self._ctx)
        out = ctypes.create_string_buffer(64)
        _LIB.SHA512_Final(out, ctypes.byref(ctx))
        return out.raw

    def hexdigest(self):
        return self.digest().hex()

    def save(self):
        """Serialise the state (offset included), or None if impossible."""
        if self._ctx is None:
            return None
        raw = bytes(self._ctx)
        return _STATE_HEADER.pack(_STATE_MAGIC, self.offset,
                                  zlib.crc32(raw)) + raw

    @classmethod
    def restore(cls, blob):
        """Rebuild from ``save()`` output; None if the blob is unusable."""
        if _LIB is None or not blob or \
                len(blob) != _STATE_HEADER.size + STATE_SIZE:
            return None
        magic, offset, crc = _STATE_HEADER.unpack_from(blob)
        raw = blob[_STATE_HEADER.size:]
        if magic != _STATE_MAGIC or zlib.crc32(raw) != crc:
            return None
        self = cls()
        ctypes.memmove(ctypes.byref(self._ctx), raw, STATE_SIZE)
        self.offset = offset
        return self


def sha512_file(path, chunk=4 << 20):
    """sha512 hex digest of a whole file."""
    h = hashlib.sha512()
    with open(path, "rb") as f:
        while True:
            block = f.read(chunk)
            if not block:
                return h.hexdigest()
            h.update(block)
