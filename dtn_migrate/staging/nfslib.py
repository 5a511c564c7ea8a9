"""libnfs 4.0 through ctypes: the C library and what its errors mean.

The binding is pinned to the synchronous API of libnfs 4.0
(``libnfs.so.13``, Debian package libnfs13): later libnfs versions
reorder the arguments of ``nfs_pread``/``nfs_pwrite`` and change the
soname, so no other library is loaded.  :mod:`~dtn_migrate.staging.libnfs`
builds the staging backend on it.

Errors: libnfs 4.0 returns ``-errno``, but reports NFS errors of
``nfs_pread``/``nfs_pwrite`` as ``-EFAULT`` with the reply structure
printed as text, and NFS3ERR_DQUOT as ``-ERANGE``; the NFS status is
therefore taken from ``nfs_get_error``.  RPC failures (``-EFAULT``,
``-EINTR`` on timeouts, ``-EIO``, ``-1``) without an NFS status mean a
lost connection.
"""

import ctypes
import errno
import os
import re
import threading

from dtn_migrate.staging import backend
from dtn_migrate.transfer import buffers

#: The only library loaded: libnfs 4.0.x.
LIBRARY = "libnfs.so.13"


# Library.

class NfsStat64(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in (
        "nfs_dev", "nfs_ino", "nfs_mode", "nfs_nlink", "nfs_uid", "nfs_gid",
        "nfs_rdev", "nfs_size", "nfs_blksize", "nfs_blocks", "nfs_atime",
        "nfs_mtime", "nfs_ctime", "nfs_atime_nsec", "nfs_mtime_nsec",
        "nfs_ctime_nsec", "nfs_used")]


class NfsStatvfs64(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in (
        "f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files",
        "f_ffree", "f_favail", "f_fsid", "f_flag", "f_namemax")]


_P = ctypes.c_void_p
_S = ctypes.c_char_p
_I = ctypes.c_int
_U64 = ctypes.c_uint64
_PP = ctypes.POINTER(ctypes.c_void_p)

# Prototypes of libnfs 4.0's include/nfsc/libnfs.h (sync API).
_PROTOTYPES = {
    "nfs_init_context": (_P, []),
    "nfs_destroy_context": (None, [_P]),
    "nfs_get_error": (_S, [_P]),
    "nfs_get_fd": (_I, [_P]),
    "nfs_set_error": (None, [_P, _S]),   # (nfs, fmt, ...): fmt only
    "nfs_set_timeout": (None, [_P, _I]),
    "nfs_get_timeout": (_I, [_P]),
    "nfs_set_autoreconnect": (None, [_P, _I]),
    "nfs_set_tcp_syncnt": (None, [_P, _I]),
    "nfs_set_dircache": (None, [_P, _I]),
    "nfs_set_uid": (None, [_P, _I]),
    "nfs_set_gid": (None, [_P, _I]),
    "nfs_set_version": (_I, [_P, _I]),
    "nfs_parse_url_dir": (_P, [_P, _S]),
    "nfs_destroy_url": (None, [_P]),
    "nfs_mount": (_I, [_P, _S, _S]),
    "nfs_get_readmax": (_U64, [_P]),
    "nfs_get_writemax": (_U64, [_P]),
    "nfs_open": (_I, [_P, _S, _I, _PP]),
    "nfs_create": (_I, [_P, _S, _I, _I, _PP]),
    "nfs_close": (_I, [_P, _P]),
    "nfs_pread": (_I, [_P, _P, _U64, _U64, _P]),
    "nfs_pwrite": (_I, [_P, _P, _U64, _U64, _P]),
    "nfs_fsync": (_I, [_P, _P]),
    "nfs_ftruncate": (_I, [_P, _P, _U64]),
    "nfs_fstat64": (_I, [_P, _P, ctypes.POINTER(NfsStat64)]),
    "nfs_stat64": (_I, [_P, _S, ctypes.POINTER(NfsStat64)]),
    "nfs_statvfs64": (_I, [_P, _S, ctypes.POINTER(NfsStatvfs64)]),
    "nfs_unlink": (_I, [_P, _S]),
    "nfs_rename": (_I, [_P, _S, _S]),
    "nfs_mkdir2": (_I, [_P, _S, _I]),
    "nfs_rmdir": (_I, [_P, _S]),
}

_libs = {}
_libs_lock = threading.Lock()


def load_library(name=LIBRARY):
    """The ctypes handle of libnfs with prototypes set (cached)."""
    with _libs_lock:
        lib = _libs.get(name)
        if lib is not None:
            return lib
        try:
            lib = ctypes.CDLL(name)
        except OSError as exc:
            raise backend.LibraryMissing(
                "cannot load %s, the libnfs 4.0 NFS client library (%s); "
                "install it (Debian/Ubuntu: apt-get install libnfs13) or "
                "use the kernel-mounted 'path' staging backend"
                % (name, exc)) from exc
        for fn, (restype, argtypes) in _PROTOTYPES.items():
            try:
                func = getattr(lib, fn)
            except AttributeError as exc:
                raise backend.LibraryMissing(
                    "%s lacks %s(): not libnfs 4.0" % (name, fn)) from exc
            func.restype = restype
            func.argtypes = argtypes
        _libs[name] = lib
        return lib


pinned = buffers.pinned


_new_bytes = buffers.PYAPI.PyBytes_FromStringAndSize
_new_bytes.argtypes = [ctypes.c_char_p, ctypes.c_ssize_t]
_new_bytes.restype = ctypes.py_object


def unfilled_bytes(size):
    """A new ``bytes`` object of ``size`` bytes whose content is not set,
    to be filled in place (through :func:`pinned`) before anyone else
    sees it -- what ``os.pread`` does inside CPython.  Reading into it
    spares the zero-filling of a bytearray and the copy into a bytes
    object that callers (hashers, HTTP bodies) take without copying.
    Never returns a shared object: ``size`` must be at least 2 (CPython
    keeps singletons of the empty and one-byte strings).
    """
    if size < 2:
        raise ValueError("unfilled_bytes needs at least 2 bytes")
    return _new_bytes(None, size)


# Errors.

# NFS3ERR_x / MNT3ERR_x names found in libnfs's error text -> errno.
_STATUS_ERRNO = {
    "PERM": errno.EPERM, "NOENT": errno.ENOENT, "IO": errno.EIO,
    "NXIO": errno.ENXIO, "ACCES": errno.EACCES, "EXIST": errno.EEXIST,
    "XDEV": errno.EXDEV, "NODEV": errno.ENODEV, "NOTDIR": errno.ENOTDIR,
    "ISDIR": errno.EISDIR, "INVAL": errno.EINVAL, "FBIG": errno.EFBIG,
    "NOSPC": errno.ENOSPC, "ROFS": errno.EROFS, "MLINK": errno.EMLINK,
    "NAMETOOLONG": errno.ENAMETOOLONG, "NOTEMPTY": errno.ENOTEMPTY,
    "DQUOT": errno.EDQUOT, "STALE": errno.ESTALE,
    "BADHANDLE": errno.ESTALE, "REMOTE": errno.EIO,
    "NOT_SYNC": errno.EIO, "BAD_COOKIE": errno.EIO,
    "NOTSUPP": errno.EOPNOTSUPP, "TOOSMALL": errno.EIO,
    "SERVERFAULT": errno.EIO, "BADTYPE": errno.EINVAL,
    "JUKEBOX": errno.EAGAIN,
}
# nfsstat3 values (RFC 1813) -> names.
NFS3_STATUS = {
    1: "PERM", 2: "NOENT", 5: "IO", 6: "NXIO", 13: "ACCES", 17: "EXIST",
    18: "XDEV", 19: "NODEV", 20: "NOTDIR", 21: "ISDIR", 22: "INVAL",
    27: "FBIG", 28: "NOSPC", 30: "ROFS", 31: "MLINK", 63: "NAMETOOLONG",
    66: "NOTEMPTY", 69: "DQUOT", 70: "STALE", 71: "REMOTE",
    10001: "BADHANDLE", 10002: "NOT_SYNC", 10003: "BAD_COOKIE",
    10004: "NOTSUPP", 10005: "TOOSMALL", 10006: "SERVERFAULT",
    10007: "BADTYPE", 10008: "JUKEBOX",
}
_STATUS_RE = re.compile(r"\b(?:NFS3ERR|MNT3ERR)_([A-Z_]+)")
# libnfs 4.0's sync nfs_pread/nfs_pwrite report an NFS error as -EFAULT
# and print the reply structure as a string: the bytes of its leading
# nfsstat3 (little endian) up to the first NUL.
_RAW_RE = re.compile(rb'^(?:pread|pwrite|read|write) call failed with '
                     rb'"(.{0,3})"$', re.S)
# What libnfs returns when the RPC itself failed (no NFS status).
_RPC_FAILURE = frozenset((errno.EPERM, errno.EFAULT, errno.EINTR,
                          errno.EIO, errno.ECONNREFUSED, errno.ECONNRESET,
                          errno.ETIMEDOUT, errno.EPIPE, errno.ENOTCONN,
                          errno.EHOSTUNREACH, errno.ENETUNREACH))


_HINTS = {
    errno.ENOSPC: "the export is full",
    errno.EDQUOT: "the quota on the export is exhausted",
    errno.EFBIG: "the file is too large for the export",
    errno.EROFS: "the export is read-only",
    errno.ESTALE: "stale file handle: the file or directory was removed "
                  "or replaced on the server",
    errno.EAGAIN: "the server asks to retry later (NFS3ERR_JUKEBOX)",
}


def error_text(lib, ctx):
    return lib.nfs_get_error(ctx) or b""


def explain(ret, raw):
    """(text, nfs status or None) of libnfs error text ``raw`` (bytes):
    the NFS status decoded from a mangled pread/pwrite report (0 when
    the report is of a successful RPC), else parsed by name.
    """
    m = _RAW_RE.match(raw) if ret == -errno.EFAULT else None
    if m:
        status = int.from_bytes(m.group(1).ljust(4, b"\0"), "little")
        name = NFS3_STATUS.get(status)
        call = raw.split(b" ", 1)[0].decode()
        if name:
            return ("%s failed with NFS3ERR_%s(%d)" % (call, name, status),
                    name)
        return "%s failed with NFS status %d" % (call, status), status
    text = raw.decode("utf-8", "replace")
    found = [s for s in _STATUS_RE.findall(text) if s in _STATUS_ERRNO]
    return text, (found[-1] if found else None)


def classify(ret, raw):
    """(errno, lost) for a libnfs return code ``ret`` < 0 and its error
    text: the errno of the NFS status if one came back, else of ``ret``;
    ``lost`` when no NFS status came back and ``ret`` is one that libnfs
    uses for failed RPCs (the connection is unusable).
    """
    return _classify_status(ret, explain(ret, raw)[1])


def _classify_status(ret, status):
    """:func:`classify` from the status :func:`explain` found."""
    if status in _STATUS_ERRNO:
        return _STATUS_ERRNO[status], False
    if status is not None:
        return errno.EIO, False
    err = abs(ret) if ret else errno.EIO
    return err, err in _RPC_FAILURE


def make_error(ret, raw, what):
    """The StagingError for a failed libnfs call: ``what`` (operation,
    name and server) and libnfs's error text ``raw`` (bytes).
    """
    text, status = explain(ret, raw)
    err, lost = _classify_status(ret, status)
    detail = text.strip() or os.strerror(err)
    if lost:
        return backend.ConnectionLost(
            "%s: no usable connection to the NFS server (%s)"
            % (what, detail))
    message = "%s: %s [%s]" % (what, detail,
                               errno.errorcode.get(err, str(err)))
    hint = _HINTS.get(err)
    if hint:
        message += ": " + hint
    if status == 0:
        return backend.AmbiguousStatus(message)
    if err == errno.EAGAIN:
        return backend.Unavailable(message)
    return backend.error_for_errno(err, message)
