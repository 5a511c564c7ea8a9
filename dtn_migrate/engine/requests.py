"""Validation of migration requests arriving over RPC.

Everything that arrives from the bus is checked here, before anything is
created: a malformed payload gets InvalidInput naming the problem.
"""

import uuid

from dtn_migrate import exception
from dtn_migrate.common import states
from dtn_migrate.transfer import report as report_mod

MAX_IMAGES = 1000
#: Option -> (type, default); ``mode`` defaults to ``[engine] mode``.
OPTIONS = {
    "keep_id": (bool, False),
    "visibility": (str, None),
    "target_project": (str, None),
    "verify": (bool, True),
    "mode": (str, None),
    "force": (bool, False),
    "transfer_options": (dict, None),
    # Set by the engine's protection policies (never by a request of
    # the API): the policy the migration serves, told to the peer.
    "protection": (dict, None),
}
#: Keys of the ``protection`` option (and of the descriptor's).
PROTECTION_KEYS = ("policy_id", "name", "rpo_minutes", "selector")


def _invalid(reason):
    return exception.InvalidInput(reason=reason)


def _text(value, what, limit=255):
    if not isinstance(value, str) or not value or len(value) > limit or \
            any(ord(c) < 32 for c in value):
        raise _invalid("%s must be a non-empty printable string of at "
                       "most %d characters" % (what, limit))
    return value


def peer(value):
    return _text(value, "peer")


def project(value, what="project"):
    """A project id (printable, at most 64 characters)."""
    return _text(value, what, 64)


def image_ids(images, selector):
    """(list of image ids or None, selector or None); exactly one set."""
    if (images is None) == (selector is None):
        raise _invalid("give either images (a list of ids) or a selector")
    if images is not None:
        if not isinstance(images, list) or not images or \
                len(images) > MAX_IMAGES:
            raise _invalid("images must be a list of 1 to %d image ids"
                           % MAX_IMAGES)
        out = []
        for image_id in images:
            _text(image_id, "image id", 64)
            if image_id not in out:
                out.append(image_id)
        return out, None
    if not isinstance(selector, dict) or not selector or \
            set(selector) - {"tag", "properties"}:
        raise _invalid("selector must be a mapping with 'tag' and/or "
                       "'properties'")
    tag = selector.get("tag")
    if tag is not None:
        _text(tag, "selector tag")
    props = selector.get("properties")
    if props is not None:
        if not isinstance(props, dict) or not props:
            raise _invalid("selector properties must be a non-empty "
                           "mapping")
        for k, v in props.items():
            _text(k, "selector property name")
            _text(v, "selector property value")
    return None, {"tag": tag, "properties": props}


def options(value, default_mode):
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise _invalid("options must be a mapping")
    unknown = set(value) - set(OPTIONS)
    if unknown:
        raise _invalid("unknown options: %s (allowed: %s)" % (
            ", ".join(sorted(map(str, unknown))), ", ".join(sorted(OPTIONS))))
    out = {}
    for key, (kind, default) in OPTIONS.items():
        v = value.get(key, default)
        if v is not None and (not isinstance(v, kind) or
                              (kind is not bool and isinstance(v, bool))):
            raise _invalid("option %s must be %s" % (key, kind.__name__))
        out[key] = v
    out["mode"] = out["mode"] or default_mode
    if out["mode"] not in states.MODES:
        raise _invalid("mode must be one of %s" % ", ".join(states.MODES))
    if out["visibility"] is not None and \
            out["visibility"] not in states.VISIBILITIES:
        raise _invalid("visibility must be one of %s"
                       % ", ".join(states.VISIBILITIES))
    if out["target_project"] is not None:
        project(out["target_project"], "target_project")
    if out["protection"] is not None:
        out["protection"] = protection(out["protection"])
    return out


def protection(value):
    """The policy a migration serves: {policy_id, name, rpo_minutes,
    selector}, as a source sends it in the descriptor.
    """
    if not isinstance(value, dict) or set(value) - set(PROTECTION_KEYS):
        raise _invalid("protection must be a mapping of %s"
                       % ", ".join(PROTECTION_KEYS))
    out = {"policy_id": uuid_hex(value.get("policy_id"), "policy_id"),
           "name": _text(value.get("name"), "policy name")}
    rpo = value.get("rpo_minutes")
    if rpo is not None and (isinstance(rpo, bool) or
                            not isinstance(rpo, int) or rpo < 1):
        raise _invalid("protection rpo_minutes must be a positive integer")
    out["rpo_minutes"] = rpo
    selector = value.get("selector")
    if selector is not None and (not isinstance(selector, dict) or
                                 len(repr(selector)) > 16384):
        raise _invalid("protection selector must be a small mapping")
    out["selector"] = selector
    return out


def uuid_hex(value, what):
    try:
        return uuid.UUID(str(value)).hex
    except ValueError:
        raise _invalid("%s %r is not a UUID" % (what, value))


def attempt(value):
    """An attempt number (1, 2, ...) or None."""
    if value is None:
        return None
    try:
        return report_mod.check_attempt(value, lowest=1)
    except ValueError as exc:
        raise _invalid(str(exc))
