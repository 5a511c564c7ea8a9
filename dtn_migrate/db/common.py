"""What every table's queries share: retries, rows, filters and pages.

It lives apart from :mod:`dtn_migrate.db.api` so that the query mixins
of other tables (:mod:`dtn_migrate.db.protection`), which
:class:`dtn_migrate.db.api.Database` inherits, can use it without
importing the module that imports them.
"""

import functools

from oslo_db import api as oslo_db_api
from oslo_db import exception as db_exc
from oslo_serialization import jsonutils
import sqlalchemy as sa

from dtn_migrate import exception

SORT_DIRS = ('asc', 'desc')


class Context:
    """What enginefacade attaches a transaction to: one per call."""


def wrap(func):
    """Retry on a lost connection or a deadlock, then raise
    DatabaseUnavailable if the database still fails.
    """
    retried = oslo_db_api.wrap_db_retry(
        max_retries=2, retry_interval=0.2, max_retry_interval=1,
        retry_on_disconnect=True, retry_on_deadlock=True)(func)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return retried(*args, **kwargs)
        except (db_exc.DBConnectionError, db_exc.DBDeadlock,
                sa.exc.OperationalError, sa.exc.InterfaceError) as exc:
            raise exception.DatabaseUnavailable(
                reason=str(exc).splitlines()[0] if str(exc)
                else exc.__class__.__name__)
        except db_exc.DBError as exc:
            inner = getattr(exc, 'inner_exception', None)
            if isinstance(inner, (sa.exc.OperationalError,
                                  sa.exc.InterfaceError)):
                raise exception.DatabaseUnavailable(
                    reason=str(inner).splitlines()[0])
            raise
    return wrapper


def as_list(value):
    if isinstance(value, (list, tuple, set, frozenset)):
        return list(value)
    return [value]


def row(obj, columns, json_columns=()):
    """``obj`` as a dict of ``columns``; ``json_columns`` decoded ({}
    when empty).
    """
    if obj is None:
        return None
    out = {name: getattr(obj, name) for name in columns}
    for key in json_columns:
        out[key] = jsonutils.loads(out[key]) if out[key] else {}
    return out


def values(values, columns, json_columns=(), table='rows'):
    """``values`` to write: only ``columns`` (else InvalidInput), the
    ``json_columns`` encoded (sorted keys: equal dicts, equal text).
    """
    out = {}
    for key, value in values.items():
        if key not in columns:
            raise exception.InvalidInput(
                reason='%s have no column %r' % (table, key))
        if key in json_columns and value is not None and \
                not isinstance(value, str):
            value = jsonutils.dumps(value, sort_keys=True)
        out[key] = value
    return out


def check_limit(limit):
    if limit is not None and (not isinstance(limit, int) or
                              isinstance(limit, bool) or limit < 0):
        raise exception.InvalidInput(
            reason='limit must be a non-negative integer')


def filter_in(query, col, value):
    """``col`` equal to ``value``, or in it when it is a list."""
    values = as_list(value)
    if len(values) == 1:
        return query.filter(col == values[0])
    return query.filter(col.in_(values))


def sort(sort_keys, sort_dirs, allowed, default):
    """(keys, dirs) of a listing: ``default`` ((keys, dirs)) unless
    given; ``id`` last so that the order is total (the marker needs it).
    """
    if not sort_keys:
        if sort_dirs:
            raise exception.InvalidInput(
                reason='a sort direction needs a sort key')
        return list(default[0]), list(default[1])
    keys = as_list(sort_keys)
    for key in keys:
        if key not in allowed:
            raise exception.InvalidInput(
                reason='cannot sort on %r; sort keys: %s'
                       % (key, ', '.join(allowed)))
    dirs = as_list(sort_dirs) if sort_dirs else ['desc']
    for d in dirs:
        if d not in SORT_DIRS:
            raise exception.InvalidInput(
                reason='sort direction %r is neither asc nor desc' % d)
    if len(dirs) == 1:
        dirs = dirs * len(keys)
    if len(dirs) != len(keys):
        raise exception.InvalidInput(
            reason='give one sort direction, or one per sort key')
    if 'id' not in keys:            # a total order, for the marker
        keys.append('id')
        dirs.append(dirs[-1] if len(keys) > 1 else 'desc')
    return keys, dirs


def ordering(model, keys, dirs, marker, not_null=()):
    """(ORDER BY clauses, keyset filter after ``marker`` or None) of a
    listing of ``model``'s rows; ``marker``: the row (an object) the
    previous page ended on.

    A nullable key (not in ``not_null``) sorts as (is not null, value):
    nulls first going up, last going down; the marker's null is compared
    as such.
    """
    terms = []                      # (expression, marker value, dir)
    for key, direction in zip(keys, dirs):
        col = getattr(model, key)
        value = getattr(marker, key) if marker is not None else None
        if key not in not_null:
            flag = sa.case((col.is_(None), 0), else_=1)
            terms.append((flag, int(value is not None), direction))
        terms.append((col, value, direction))
    order = [sa.asc(e) if d == 'asc' else sa.desc(e) for e, _v, d in terms]
    if marker is None:
        return order, None
    ors = []
    for i, (expr, value, direction) in enumerate(terms):
        if value is None:
            continue                # nothing is before/after a null
        ands = [e.is_(None) if v is None else e == v
                for e, v, _d in terms[:i]]
        ands.append(expr > value if direction == 'asc' else expr < value)
        ors.append(sa.and_(*ands))
    return order, sa.or_(*ors) if ors else sa.false()


def marker_row(session, model, marker, project_id=None, key=None):
    """The row a listing's ``marker`` names (looked up by ``key``, the
    marker itself by default), of ``project_id`` when given; else
    MarkerNotFound.
    """
    obj = session.get(model, marker if key is None else key)
    if obj is None or (project_id is not None and
                       obj.project_id != project_id):
        raise exception.MarkerNotFound(marker=marker)
    return obj


def paged(query, model, keys, dirs, marker, not_null=(), limit=None):
    """``query`` sorted on ``keys``/``dirs``, after the row ``marker``
    (or from the start), at most ``limit`` rows.
    """
    order, after = ordering(model, keys, dirs, marker, not_null)
    if after is not None:
        query = query.filter(after)
    query = query.order_by(*order)
    return query if limit is None else query.limit(limit)
