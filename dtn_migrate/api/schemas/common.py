"""Schema pieces shared by the resources."""

import copy

#: Printable text: no control characters (NUL included).
PRINTABLE = '^[^\\u0000-\\u001f\\u007f]+$'

#: A UUID, as 32 hex digits or in the dashed form.
UUID_PATTERN = ('^([0-9a-fA-F]{32}|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-'
                '[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$')


def name(max_length=255):
    return {'type': 'string', 'minLength': 1, 'maxLength': max_length,
            'pattern': PRINTABLE}


UUID = {'type': 'string', 'minLength': 32, 'maxLength': 36,
        'pattern': UUID_PATTERN}

#: A time in a response: ISO 8601, UTC ("Z").
TIME = {'type': 'string', 'format': 'date-time'}


def nullable(schema):
    """``schema`` or null (the OpenAPI document turns the type list into
    OpenAPI 3.0's ``nullable``).
    """
    return dict(schema, type=[schema['type'], 'null'])


NULLABLE_TIME = nullable(TIME)


ERROR = {
    'type': 'object',
    'required': ['error'],
    'properties': {
        'error': {
            'type': 'object',
            'required': ['code', 'title', 'message'],
            'properties': {
                'code': {'type': 'integer'},
                'title': {'type': 'string'},
                'message': {'type': 'string'},
            },
        },
    },
}

LINK = {
    'type': 'object',
    'required': ['rel', 'href'],
    'properties': {
        'rel': {'type': 'string'},
        'href': {'type': 'string'},
    },
}

VERSION = {
    'type': 'object',
    'required': ['id', 'status', 'links'],
    'properties': {
        'id': {'type': 'string'},
        'status': {'type': 'string', 'enum': ['CURRENT', 'SUPPORTED',
                                              'DEPRECATED']},
        'links': {'type': 'array', 'items': LINK},
    },
}

VERSIONS_RESPONSE = {
    'type': 'object',
    'required': ['versions'],
    'properties': {'versions': {'type': 'array', 'items': VERSION}},
}

VERSION_RESPONSE = {
    'type': 'object',
    'required': ['version'],
    'properties': {'version': VERSION},
}


#: The query of a resource that takes no parameters.
NO_QUERY = {'type': 'object', 'properties': {},
            'additionalProperties': False}


def limited(query, max_limit):
    """A listing's ``query`` schema whose ``limit`` is at most
    ``max_limit`` ([api] max_limit).
    """
    query = copy.deepcopy(query)
    query['properties']['limit']['maximum'] = max_limit
    return query


def limit():
    """A listing's page size; ``limited`` sets its maximum."""
    return {'type': 'integer', 'minimum': 1, 'maximum': 1000,
            'description': 'Page size (default [api] default_limit, at '
                           'most [api] max_limit).'}


def marker(what):
    """The ``marker`` of a listing paged by the id of its last ``what``."""
    return dict(UUID, description='The id of the last %s of the previous '
                                  'page.' % what)


def sorting(sort_keys):
    """The ``sort_key`` (one of ``sort_keys``) and ``sort_dir`` of a
    listing.
    """
    return {'sort_key': {'type': 'string', 'enum': sort_keys,
                         'description': 'Sort by this attribute (default '
                                        'created_at).'},
            'sort_dir': {'type': 'string', 'enum': ['asc', 'desc'],
                         'description': 'Sort direction (default desc).'}}


def all_projects(items):
    """The ``all_projects`` flag of a listing of ``items``."""
    return {'type': 'boolean',
            'description': '%s of every project (administrators only).'
                           % items}


def page_of(key, item):
    """The answer of a listing: ``key``'s array of ``item`` and the
    ``next`` link of a page that is not the last.
    """
    return {'type': 'object', 'required': [key],
            'properties': {key: {'type': 'array', 'items': item},
                           'links': {'type': 'array', 'items': LINK}}}


def one(key, item):
    """An answer holding one ``item`` under ``key``."""
    return {'type': 'object', 'required': [key],
            'properties': {key: item}}
