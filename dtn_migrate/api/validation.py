"""Validation of request bodies and query strings against the JSON
Schemas of :mod:`dtn_migrate.api.schemas`.

A request that fails gets a 400 naming the parameter and what is wrong
with it; every check runs before a handler touches the database or the
engine.
"""

import json
import re
import uuid

import jsonschema
from jsonschema import exceptions as js_exceptions
from oslo_utils import timeutils

from dtn_migrate.common import text as text_mod
from dtn_migrate import exception
from dtn_migrate.i18n import _

#: Longest piece of jsonschema's or json's own message kept.
_QUOTE = 80

FORMAT_CHECKER = jsonschema.FormatChecker(formats=())


@FORMAT_CHECKER.checks('date-time', raises=(ValueError, TypeError))
def _is_time(value):
    if not isinstance(value, str):
        return True
    parse_time(value)
    return True


@FORMAT_CHECKER.checks('uuid', raises=(ValueError, TypeError))
def _is_uuid(value):
    if not isinstance(value, str):
        return True
    uuid.UUID(value)
    return True


def _pattern(validator, pattern, instance, schema):
    """``pattern`` with ECMA-262's meaning of ``$`` (the very end):
    Python's ``$`` also matches before a final newline.
    """
    if not validator.is_type(instance, 'string'):
        return
    anchored = pattern[:-1] + r'\Z' if pattern.endswith('$') and \
        not pattern.endswith('\\$') else pattern
    if not re.search(anchored, instance):
        yield js_exceptions.ValidationError(
            '%r does not match %r' % (instance, pattern))


Validator = jsonschema.validators.extend(jsonschema.Draft7Validator,
                                         {'pattern': _pattern})


def parse_time(value):
    """ISO 8601 text -> naive UTC datetime (ValueError when it is not)."""
    if not isinstance(value, str) or not value or len(value) > 64:
        raise ValueError("not an ISO 8601 time")
    try:
        parsed = timeutils.parse_isotime(value)
    except (ValueError, OverflowError) as exc:
        raise ValueError(str(exc))
    try:
        return timeutils.normalize_time(parsed)
    except (ValueError, OverflowError) as exc:
        raise ValueError(str(exc))


def _quote(value):
    return text_mod.quote(value)


def _where(error, what):
    path = [str(p) for p in error.absolute_path]
    if path:
        return '%s %s' % (what, '.'.join(path))
    return what


def _describe(error, what):
    """A short message for one jsonschema error, naming the field."""
    v = error.validator
    where = _where(error, what)
    if v == 'additionalProperties' and isinstance(error.instance, dict):
        allowed = set(error.schema.get('properties', {}))
        extra = sorted(str(k) for k in error.instance if k not in allowed)
        return _("%(where)s: unknown %(what)s %(extra)s (allowed: "
                 "%(allowed)s)") % {
            'where': where, 'what': 'field' if len(extra) == 1
            else 'fields', 'extra': ', '.join(_quote(e) for e in extra),
            'allowed': ', '.join(sorted(allowed)) or _('none')}
    if v == 'required':
        missing = [r for r in error.validator_value
                   if isinstance(error.instance, dict) and
                   r not in error.instance]
        return _("%(where)s: %(field)s is required") % {
            'where': where, 'field': ', '.join(missing)}
    if v == 'type':
        expected = error.validator_value
        if isinstance(expected, list):
            expected = ' or '.join(expected)
        return _("%(where)s must be of type %(type)s, not %(value)s") % {
            'where': where, 'type': expected,
            'value': _quote(error.instance)}
    if v == 'enum':
        return _("%(where)s must be one of %(values)s, not %(value)s") % {
            'where': where,
            'values': ', '.join(map(str, error.validator_value)),
            'value': _quote(error.instance)}
    if v == 'format':
        return _("%(where)s is not a valid %(format)s: %(value)s") % {
            'where': where, 'format': error.validator_value,
            'value': _quote(error.instance)}
    if v in ('pattern', 'minLength', 'maxLength') and \
            error.schema.get('pattern') == _uuid_pattern():
        # Too short or too long: not a UUID either.
        return _("%(where)s is not a UUID: %(value)s") % {
            'where': where, 'value': _quote(error.instance)}
    if v == 'pattern':
        return _("%(where)s must be printable text (no control "
                 "characters): %(value)s") % {
            'where': where, 'value': _quote(error.instance)}
    if v in ('minimum', 'maximum'):
        return _("%(where)s must be %(cmp)s %(limit)s, not %(value)s") % {
            'where': where, 'cmp': _('at least') if v == 'minimum'
            else _('at most'), 'limit': error.validator_value,
            'value': _quote(error.instance)}
    if v in ('minLength', 'maxLength'):
        return _("%(where)s must be %(cmp)s %(limit)s characters "
                 "long") % {
            'where': where, 'cmp': _('at least') if v == 'minLength'
            else _('at most'), 'limit': error.validator_value}
    if v in ('minItems', 'maxItems', 'minProperties', 'maxProperties'):
        kind = _('items') if 'Items' in v else _('entries')
        return _("%(where)s must have %(cmp)s %(limit)s %(kind)s") % {
            'where': where, 'cmp': _('at least') if v.startswith('min')
            else _('at most'), 'limit': error.validator_value,
            'kind': kind}
    message = error.message
    if len(message) > 2 * _QUOTE:
        message = message[:2 * _QUOTE] + '...'
    return '%s: %s' % (where, message)


def _uuid_pattern():
    from dtn_migrate.api.schemas import common
    return common.UUID_PATTERN


def validate(schema, instance, what, messages=None):
    """Raise InvalidInput unless ``instance`` matches ``schema``.

    ``what`` names the thing checked ("body", "query parameter");
    ``messages`` maps a root-level validator name (e.g. ``oneOf``) to a
    message clearer than jsonschema's.
    """
    validator = Validator(schema, format_checker=FORMAT_CHECKER)
    try:
        error = js_exceptions.best_match(validator.iter_errors(instance))
    except RecursionError:
        raise exception.InvalidInput(reason=_("%s is nested too deeply")
                                     % what)
    if error is None:
        return instance
    if messages and not error.absolute_path and \
            error.validator in messages:
        raise exception.InvalidInput(reason=messages[error.validator])
    raise exception.InvalidInput(reason=_describe(error, what))


def json_body(req, schema, messages=None):
    """The request's JSON body, checked against ``schema``."""
    if not req.body:
        raise exception.InvalidInput(
            reason=_("a JSON request body is required"))
    if req.content_type != 'application/json':
        raise exception.UnsupportedMediaType(
            content_type=req.content_type[:80] or _('(none)'))
    try:
        text = req.body.decode('utf-8')
        body = json.loads(text, parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        reason = str(exc)
        if len(reason) > 2 * _QUOTE:
            reason = reason[:2 * _QUOTE] + '...'
        raise exception.InvalidInput(
            reason=_("the body is not valid JSON: %s") % reason)
    try:
        # Lone surrogates ("\ud800") are valid JSON but no text.
        json.dumps(body, ensure_ascii=False).encode('utf-8')
    except UnicodeEncodeError:
        raise exception.InvalidInput(
            reason=_("the body holds text that is not valid Unicode"))
    return validate(schema, body, _('body'), messages)


def _no_constant(name):
    raise ValueError("%s is not allowed" % name)


_INT = re.compile(r'^[+-]?[0-9]{1,30}$')
_TRUE = ('true', '1', 'yes', 'on')
_FALSE = ('false', '0', 'no', 'off')


def _convert(value, schema):
    """A query string value as the schema's type, when it can be read
    as one (otherwise unchanged, so that validation names the error).
    """
    kind = schema.get('type')
    if kind == 'integer' and _INT.match(value):
        return int(value)
    if kind == 'boolean':
        if value.lower() in _TRUE:
            return True
        if value.lower() in _FALSE:
            return False
    return value


def query(req, schema):
    """The query string as a dict, checked against ``schema``.

    A parameter whose schema is an array may repeat; any other given
    twice is an error.
    """
    try:
        items = list(req.GET.items())
    except (UnicodeDecodeError, ValueError):
        raise exception.InvalidInput(
            reason=_("the query string is not valid UTF-8"))
    props = schema.get('properties', {})
    out = {}
    for name, value in items:
        prop = props.get(name)
        if prop is None:
            allowed = ', '.join(sorted(props)) or _('none')
            reason = _("unknown query parameter %(name)s (allowed: "
                       "%(allowed)s)") % {'name': _quote(name),
                                          'allowed': allowed}
            raise exception.InvalidInput(reason=reason)
        if prop.get('type') == 'array':
            out.setdefault(name, []).append(
                _convert(value, prop.get('items', {})))
        elif name in out:
            raise exception.InvalidInput(
                reason=_("query parameter %s is given more than once")
                % name)
        else:
            out[name] = _convert(value, prop)
    return validate(schema, out, _('query parameter'))
