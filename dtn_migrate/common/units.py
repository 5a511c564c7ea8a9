"""How sizes, rates and durations read and parse."""

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def size(text):
    """'4M' -> 4194304 (binary units, optional trailing 'iB' or 'B');
    ValueError for anything else or a negative size.
    """
    t = str(text).strip().upper().replace("IB", "").rstrip("B")
    unit = t[-1:] if t[-1:] in _UNITS and not t[-1:].isdigit() else ""
    try:
        value = int(float(t[:len(t) - len(unit)]) * _UNITS[unit])
    except (ValueError, OverflowError):
        raise ValueError("not a size: %r" % text)
    if value < 0:
        raise ValueError("negative size: %r" % text)
    return value


def human(n):
    """Bytes as a person reads them: ``512 B``, ``1.5 MiB``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return "%.1f %s" % (n, unit) if unit != "B" else "%d B" % n
        n /= 1024.0


def rate(bytes_per_second):
    """``310.0 MiB/s``."""
    return "%s/s" % human(bytes_per_second)


def duration(seconds):
    """``MM:SS``, or ``H:MM:SS`` from an hour up."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return "%d:%02d:%02d" % (hours, minutes, secs)
    return "%02d:%02d" % (minutes, secs)
