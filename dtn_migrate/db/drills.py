"""Queries of the drills table: the disaster-recovery drills of policies.

:class:`DrillQueries` is a mixin of :class:`dtn_migrate.db.api.Database`
like :class:`~dtn_migrate.db.protection.ProtectionQueries`: every method
runs in its own transaction, retries a lost connection or a deadlock and
then raises :class:`~dtn_migrate.exception.DatabaseUnavailable`, and
returns plain dicts of every column, ``report`` decoded ({} when empty),
datetimes naive UTC.

A drill outlives its policy (no foreign key): its report is the proof
that a recovery worked on the day, wanted after the policy is gone.
"""

import uuid

from oslo_utils import timeutils

from dtn_migrate.db import common
from dtn_migrate.db import models
from dtn_migrate import exception

#: Filters of a drill listing (a value or a list of values).
DRILL_FILTER_KEYS = ('policy_id', 'state')
_DRILL_JSON = ('report',)
_NOT_NULL = frozenset(('id', 'created_at'))


def _drill(obj):
    return common.row(obj, models.DRILL_COLUMNS, _DRILL_JSON)


def _values(values):
    return common.values(values, models.DRILL_COLUMNS, _DRILL_JSON,
                         'drills')


class DrillQueries:
    """The drills of policies (a mixin of
    :class:`~dtn_migrate.db.api.Database`).
    """

    @common.wrap
    def drill_create(self, values):
        values = _values(values)
        if not values.get('id'):
            values['id'] = uuid.uuid4().hex
        values.setdefault('created_at', timeutils.utcnow())
        values.setdefault('updated_at', values['created_at'])
        with self.writer() as session:
            obj = models.Drill(**values)
            session.add(obj)
            session.flush()
            return _drill(obj)

    @common.wrap
    def drill_get(self, drill_id, project_id=None):
        with self.reader() as session:
            obj = session.get(models.Drill, drill_id)
            if obj is None or (project_id is not None and
                               obj.project_id != project_id):
                raise exception.DrillNotFound(drill_id=drill_id)
            return _drill(obj)

    @common.wrap
    def drill_get_all(self, filters=None, marker=None, limit=None,
                      project_id=None):
        """Drills, newest first (created_at, id); ``marker``: the id of
        the drill the previous page ended on (else MarkerNotFound).
        """
        common.check_limit(limit)
        Drill = models.Drill
        with self.reader() as session:
            query = session.query(Drill)
            if project_id is not None:
                query = query.filter(Drill.project_id == project_id)
            for key, value in (filters or {}).items():
                if value is None:
                    continue
                if key not in DRILL_FILTER_KEYS:
                    raise exception.InvalidInput(
                        reason='unknown filter %r; filters: %s'
                               % (key, ', '.join(DRILL_FILTER_KEYS)))
                query = common.filter_in(query, getattr(Drill, key), value)
            marker_obj = None if marker is None else common.marker_row(
                session, Drill, marker, project_id)
            query = common.paged(
                query, Drill, ['created_at', 'id'], ['desc', 'desc'],
                marker_obj, _NOT_NULL, limit)
            return [_drill(obj) for obj in query.all()]

    @common.wrap
    def drill_update(self, drill_id, values):
        values = _values(values)
        if 'id' in values and values['id'] != drill_id:
            raise exception.InvalidInput(reason="a drill's id is fixed")
        values.setdefault('updated_at', timeutils.utcnow())
        with self.writer() as session:
            obj = session.get(models.Drill, drill_id)
            if obj is None:
                raise exception.DrillNotFound(drill_id=drill_id)
            for key, value in values.items():
                setattr(obj, key, value)
            session.flush()
            return _drill(obj)
