"""Exceptions and wire error codes of the transfer engine."""

import enum


class Code(enum.IntEnum):
    """Error codes carried by ERROR, FILE_ID and FILE_CLOSE messages."""

    NONE = 0
    PROTOCOL = 1          # malformed or unexpected message
    AUTH = 2              # peer failed authentication
    VERSION = 3           # no common protocol version
    BAD_NAME = 4          # file name refused by the staging root
    NO_SPACE = 5          # the sink cannot hold the file
    IO = 6                # read or write error on a file
    BOUNDS = 7            # size, count or offset out of bounds
    CHECKSUM = 8          # object checksum mismatch
    HASH_MISMATCH = 9     # whole-file sha512 mismatch
    LIMIT = 10            # too many sessions, files or streams
    ABORTED = 11          # the transfer was cancelled
    UNKNOWN_SESSION = 12  # data stream for a session that is gone
    SOURCE_CHANGED = 13   # the source file changed under the transfer
    INTERNAL = 14
    INTEGRITY = 15        # a frame or object failed its authentication tag


class TransferError(Exception):
    """Base class of transfer engine errors."""

    code = Code.INTERNAL

    def __init__(self, message, code=None):
        super().__init__(message)
        if code is not None:
            self.code = Code(code)


class ProtocolError(TransferError):
    """A peer sent bytes that are not a valid message in this state.

    The connection that carried them is closed; nothing else is touched.
    """

    code = Code.PROTOCOL


class BoundsError(ProtocolError):
    """A size, count or offset in a message is out of its allowed range."""

    code = Code.BOUNDS


class TruncatedFrame(ProtocolError):
    """The connection ended in the middle of a frame."""


class IntegrityError(ProtocolError):
    """A frame or an object failed its session-key tag: changed,
    replayed, reordered or spliced on the way.  Never accepted; the
    connection (or object) is retried.
    """

    code = Code.INTEGRITY


class AuthenticationError(TransferError):
    """The peer could not prove it holds the shared key (or certificate)."""

    code = Code.AUTH


class NameMismatch(AuthenticationError):
    """The connection reached an agent other than the one it was meant
    for (redirected, or a peering's address names another agent).
    """


class BadNameError(TransferError):
    """A file name would escape the staging root or is not acceptable."""

    code = Code.BAD_NAME


class NoSpaceError(TransferError):
    code = Code.NO_SPACE


class PeerError(TransferError):
    """The peer reported an error."""

    def __init__(self, message, code=Code.INTERNAL, fatal=True):
        super().__init__(message, code)
        self.fatal = fatal


class FileFailed(TransferError):
    """One file of a dataset failed for good; others may still succeed."""


class Cancelled(TransferError):
    code = Code.ABORTED
