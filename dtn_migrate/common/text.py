"""Values quoted back in messages: a long one shortened, once.

A name of 5000 characters is shown as its first ``LIMIT`` characters
and how long it is (``nnnn…(5000 characters)``), so that an error
message stays readable.
"""

#: Longest piece of a value a message quotes.
LIMIT = 64


def shorten(value, limit=LIMIT):
    """``value`` (text) as is, or when longer than ``limit``, its first
    ``limit`` characters and its length.
    """
    if len(value) <= limit:
        return value
    return "%s…(%d characters)" % (value[:limit], len(value))


def quote(value, limit=LIMIT):
    """``repr(value)``, shortened when ``value`` is long: a string's
    first ``limit`` characters, quoted, and its length.
    """
    if isinstance(value, str):
        if len(value) <= limit:
            return repr(value)
        return "%r…(%d characters)" % (value[:limit], len(value))
    return shorten(repr(value), limit)
