"""Which images a protection policy selects.

A selector is a mapping of optional keys, all of which must match:
``tags`` (every one), ``properties`` (exact values), ``visibility``
(any of), ``name_pattern`` (an fnmatch glob, case-sensitive) and
``projects`` (owners, any of; an admin's choice).  Without
``projects`` a policy selects the images its own project owns.
"""

import fnmatch

from dtn_migrate.common import states
from dtn_migrate import exception

KEYS = ("tags", "properties", "visibility", "name_pattern", "projects")
#: At least one of these: a policy never selects everything by accident.
NARROWING = ("tags", "properties", "visibility", "name_pattern")
MAX_ITEMS = 100


def _invalid(reason):
    return exception.InvalidInput(reason=reason)


def _text(value, what, limit=255):
    if not isinstance(value, str) or not value or len(value) > limit or \
            any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise _invalid("%s must be a non-empty printable string of at "
                       "most %d characters" % (what, limit))
    return value


def _texts(value, what, limit=255):
    if not isinstance(value, list) or len(value) > MAX_ITEMS:
        raise _invalid("%s must be a list of at most %d strings"
                       % (what, MAX_ITEMS))
    out = []
    for item in value:
        _text(item, what, limit)
        if item not in out:
            out.append(item)
    return out


def _given(selector, key, empty):
    """``selector[key]``; ``empty`` when absent or null (a value of
    another type is left for the caller to refuse).
    """
    value = selector.get(key)
    return empty if value is None else value


def check(selector):
    """The normalized selector (every key present), or InvalidInput."""
    if not isinstance(selector, dict):
        raise _invalid("selector must be a mapping")
    unknown = set(selector) - set(KEYS)
    if unknown:
        raise _invalid("selector has unknown keys: %s (known: %s)" % (
            ", ".join(sorted(map(str, unknown))), ", ".join(KEYS)))
    out = {"tags": _texts(_given(selector, "tags", []), "selector tag"),
           "properties": {}, "visibility": [], "name_pattern": None,
           "projects": _texts(_given(selector, "projects", []),
                              "selector project", 64)}
    props = _given(selector, "properties", {})
    if not isinstance(props, dict) or len(props) > MAX_ITEMS:
        raise _invalid("selector properties must be a mapping of at most "
                       "%d names to values" % MAX_ITEMS)
    for key, value in props.items():
        out["properties"][_text(key, "selector property name")] = \
            _text(value, "selector property value")
    for value in _texts(_given(selector, "visibility", []),
                        "selector visibility"):
        if value not in states.VISIBILITIES:
            raise _invalid("selector visibility %r is none of %s"
                           % (value, ", ".join(states.VISIBILITIES)))
        out["visibility"].append(value)
    if selector.get("name_pattern") is not None:
        out["name_pattern"] = _text(selector["name_pattern"],
                                    "selector name_pattern")
    if not any(out[key] for key in NARROWING):
        raise _invalid("a selector needs at least one of %s"
                       % ", ".join(NARROWING))
    return out


def matches(selector, project_id, image):
    """Whether ``image`` (Glance's dict) is selected by ``selector`` of
    a policy of ``project_id``.
    """
    owners = selector.get("projects") or [project_id]
    if image.get("owner") not in owners:
        return False
    if not set(selector.get("tags") or ()) <= set(image.get("tags") or ()):
        return False
    for key, value in (selector.get("properties") or {}).items():
        if image.get(key) != value:
            return False
    visibility = selector.get("visibility")
    if visibility and image.get("visibility") not in visibility:
        return False
    pattern = selector.get("name_pattern")
    if pattern and not fnmatch.fnmatchcase(image.get("name") or "",
                                           pattern):
        return False
    return True


def glance_query(selector):
    """(tags, properties) Glance can filter a listing on."""
    return list(selector.get("tags") or ()), \
        dict(selector.get("properties") or {})
