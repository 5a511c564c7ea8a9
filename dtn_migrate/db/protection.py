"""Queries of the protection tables: policies, their images, replicas.

:class:`ProtectionQueries` is a mixin of
:class:`dtn_migrate.db.api.Database`, which gives it its transactions
(``self.writer()``, ``self.reader()``).  As for migrations, every method
runs in its own transaction, retries a lost connection or a deadlock and
then raises :class:`~dtn_migrate.exception.DatabaseUnavailable`, and
returns plain dicts of every column: ``selector`` and ``options``
decoded ({} when empty), datetimes naive UTC.

The upserts are race-safe without locking: two writers that both find
no row both insert, the unique constraint refuses the second
(DBDuplicateEntry), which then updates the row the first one made.
"""

import uuid

from oslo_db import exception as db_exc
from oslo_utils import strutils
from oslo_utils import timeutils
import sqlalchemy as sa

from dtn_migrate.db import common
from dtn_migrate.db import models
from dtn_migrate import exception

#: Keys a policy listing may sort on.
POLICY_SORT_KEYS = ('created_at', 'updated_at', 'name', 'rpo_seconds', 'id')
POLICY_DEFAULT_SORT = (['created_at', 'id'], ['desc', 'desc'])
#: Filters of a policy listing (a value or a list of values).
POLICY_FILTER_KEYS = ('name', 'peer', 'mode', 'enabled', 'rpo_state',
                      'role')
#: Filters of a replica listing (a value or a list of values).
REPLICA_FILTER_KEYS = ('direction', 'peer', 'policy_id', 'state',
                       'source_image_id', 'replica_image_id')
_POLICY_JSON = ('selector', 'options')
#: Columns of a replica's key and owner, fixed once it is written.
_REPLICA_KEY = ('id', 'direction', 'peer', 'source_image_id', 'policy_id',
                'project_id', 'owner_key')
#: Sort keys never null in a policy the engine wrote.
_POLICY_NOT_NULL = frozenset(('id', 'name', 'created_at', 'updated_at'))
_NOT_NULL = frozenset(('id', 'created_at'))
_DEFAULT_IMAGE_STATE = 'pending'


def _policy(obj):
    return common.row(obj, models.POLICY_COLUMNS, _POLICY_JSON)


def _image(obj):
    return common.row(obj, models.POLICY_IMAGE_COLUMNS)


def _replica(obj):
    return common.row(obj, models.REPLICA_COLUMNS)


def _policy_values(values):
    return common.values(values, models.POLICY_COLUMNS, _POLICY_JSON,
                         'protection policies')


def _bool(value):
    if isinstance(value, bool):
        return value
    try:
        return strutils.bool_from_string(value, strict=True)
    except ValueError:
        raise exception.InvalidInput(
            reason='enabled: %r is neither true nor false' % (value,))


def _filter(query, model, filters, allowed):
    for key, value in (filters or {}).items():
        if value is None:
            continue
        if key not in allowed:
            raise exception.InvalidInput(
                reason='unknown filter %r; filters: %s'
                       % (key, ', '.join(allowed)))
        if key == 'enabled':
            value = [_bool(v) for v in common.as_list(value)]
        query = common.filter_in(query, getattr(model, key), value)
    return query


def _name_taken(session, project_id, name, but=None):
    """Another policy of ``project_id`` named ``name``?  (The unique
    constraint misses a null project_id; it also catches a race.)
    """
    Policy = models.ProtectionPolicy
    project = Policy.project_id.is_(None) if project_id is None else \
        Policy.project_id == project_id
    query = session.query(Policy.id).filter(project, Policy.name == name)
    if but is not None:
        query = query.filter(Policy.id != but)
    return query.first() is not None


def _policy_image(session, policy_id, image_id):
    PolicyImage = models.PolicyImage
    return session.query(PolicyImage).filter(
        PolicyImage.policy_id == policy_id,
        PolicyImage.image_id == image_id).one_or_none()


def owner_key(policy_id=None, project_id=None):
    """What owns a replica row, the last part of its key: the policy it
    serves (``policy:<id>``), else the project whose migration made it
    (``project:<id>``; ``project:`` for none).
    """
    if policy_id:
        return 'policy:%s' % policy_id
    return 'project:%s' % (project_id or '')


def _replica_obj(session, direction, peer, source_image_id, owner):
    Replica = models.Replica
    return session.query(Replica).filter(
        Replica.direction == direction, Replica.peer == peer,
        Replica.source_image_id == source_image_id,
        Replica.owner_key == owner).one_or_none()


class ProtectionQueries:
    """Protection policies, their images and replicas (a mixin of
    :class:`~dtn_migrate.db.api.Database`).
    """

    # Policies.
    @common.wrap
    def policy_create(self, values):
        values = _policy_values(values)
        if not values.get('id'):
            values['id'] = uuid.uuid4().hex
        values.setdefault('created_at', timeutils.utcnow())
        values.setdefault('updated_at', values['created_at'])
        name, project_id = values.get('name'), values.get('project_id')
        try:
            with self.writer() as session:
                if _name_taken(session, project_id, name):
                    raise exception.ProtectionPolicyExists(
                        name=name, project_id=project_id)
                obj = models.ProtectionPolicy(**values)
                session.add(obj)
                session.flush()
                return _policy(obj)
        except db_exc.DBDuplicateEntry:
            # The same name at the same time (or the same id).
            raise exception.ProtectionPolicyExists(
                name=name, project_id=project_id)

    @common.wrap
    def policy_get(self, policy_id, project_id=None):
        with self.reader() as session:
            obj = session.get(models.ProtectionPolicy, policy_id)
            if obj is None or (project_id is not None and
                               obj.project_id != project_id):
                raise exception.ProtectionPolicyNotFound(
                    policy_id=policy_id)
            return _policy(obj)

    @common.wrap
    def policy_get_all(self, filters=None, marker=None, limit=None,
                       sort_keys=None, sort_dirs=None, project_id=None):
        keys, dirs = common.sort(sort_keys, sort_dirs, POLICY_SORT_KEYS,
                                 POLICY_DEFAULT_SORT)
        common.check_limit(limit)
        Policy = models.ProtectionPolicy
        with self.reader() as session:
            query = session.query(Policy)
            if project_id is not None:
                query = query.filter(Policy.project_id == project_id)
            query = _filter(query, Policy, filters, POLICY_FILTER_KEYS)
            marker_obj = None if marker is None else common.marker_row(
                session, Policy, marker, project_id)
            query = common.paged(
                query, Policy, keys, dirs, marker_obj, _POLICY_NOT_NULL,
                limit)
            return [_policy(obj) for obj in query.all()]

    @common.wrap
    def policy_update(self, policy_id, values):
        values = _policy_values(values)
        if 'id' in values and values['id'] != policy_id:
            raise exception.InvalidInput(reason="a policy's id is fixed")
        values.setdefault('updated_at', timeutils.utcnow())
        try:
            with self.writer() as session:
                obj = session.get(models.ProtectionPolicy, policy_id)
                if obj is None:
                    raise exception.ProtectionPolicyNotFound(
                        policy_id=policy_id)
                name = values.get('name', obj.name)
                project_id = values.get('project_id', obj.project_id)
                if (name, project_id) != (obj.name, obj.project_id) and \
                        _name_taken(session, project_id, name, policy_id):
                    raise exception.ProtectionPolicyExists(
                        name=name, project_id=project_id)
                for key, value in values.items():
                    setattr(obj, key, value)
                session.flush()
                return _policy(obj)
        except db_exc.DBDuplicateEntry:
            raise exception.ProtectionPolicyExists(
                name=name, project_id=project_id)

    @common.wrap
    def policy_delete(self, policy_id):
        """Delete a policy and its images (SQLite does not enforce the
        foreign key's ON DELETE CASCADE).  Its replicas stay.
        """
        with self.writer() as session:
            obj = session.get(models.ProtectionPolicy, policy_id)
            if obj is None:
                raise exception.ProtectionPolicyNotFound(policy_id=policy_id)
            session.query(models.PolicyImage).filter(
                models.PolicyImage.policy_id == policy_id).delete(
                    synchronize_session=False)
            session.delete(obj)
            session.flush()

    # Policy images.
    @common.wrap
    def policy_image_get(self, policy_id, image_id):
        with self.reader() as session:
            return _image(_policy_image(session, policy_id, image_id))

    @common.wrap
    def policy_image_upsert(self, policy_id, image_id, values):
        """Insert the image of a policy (state ``pending`` unless given)
        or update it; ProtectionPolicyNotFound if there is no such
        policy.
        """
        values = common.values(values, models.POLICY_IMAGE_COLUMNS,
                               table='policy images')
        values.pop('id', None)
        values.update(policy_id=policy_id, image_id=image_id)
        try:
            return self._policy_image_put(policy_id, image_id, values)
        except db_exc.DBDuplicateEntry:
            # Inserted by another writer since we looked: update it.
            return self._policy_image_put(policy_id, image_id, values)
        except db_exc.DBReferenceError:
            # The policy went away since we looked (MariaDB, PostgreSQL).
            raise exception.ProtectionPolicyNotFound(policy_id=policy_id)

    def _policy_image_put(self, policy_id, image_id, values):
        now = timeutils.utcnow()
        with self.writer() as session:
            obj = _policy_image(session, policy_id, image_id)
            if obj is None:
                if session.get(models.ProtectionPolicy, policy_id) is None:
                    raise exception.ProtectionPolicyNotFound(
                        policy_id=policy_id)
                new = dict(values)
                new.setdefault('state', _DEFAULT_IMAGE_STATE)
                new.setdefault('created_at', now)
                new.setdefault('updated_at', new['created_at'])
                obj = models.PolicyImage(**new)
                session.add(obj)
            else:
                values.setdefault('updated_at', now)
                for key, value in values.items():
                    if key != 'created_at':
                        setattr(obj, key, value)
            session.flush()
            return _image(obj)

    @common.wrap
    def policy_images_get(self, policy_id=None, image_id=None, states=None,
                          migration_id=None, limit=None, marker=None):
        """Images of policies, oldest first (created_at, id).

        ``marker``: the ``image_id`` the previous page ended on (with a
        ``policy_id``), for the API's pages; else MarkerNotFound.
        """
        common.check_limit(limit)
        PolicyImage = models.PolicyImage
        with self.reader() as session:
            query = session.query(PolicyImage)
            for col, value in ((PolicyImage.policy_id, policy_id),
                               (PolicyImage.image_id, image_id),
                               (PolicyImage.state, states),
                               (PolicyImage.migration_id, migration_id)):
                if value is not None:
                    query = common.filter_in(query, col, value)
            marker_obj = None
            if marker is not None:
                marker_obj = None if policy_id is None else \
                    _policy_image(session, policy_id, marker)
                if marker_obj is None:
                    raise exception.MarkerNotFound(marker=marker)
            query = common.paged(
                query, PolicyImage, ['created_at', 'id'], ['asc', 'asc'],
                marker_obj, _NOT_NULL, limit)
            return [_image(obj) for obj in query.all()]

    @common.wrap
    def policy_image_delete(self, policy_id, image_id):
        """Forget an image of a policy (none: nothing to do)."""
        PolicyImage = models.PolicyImage
        with self.writer() as session:
            session.query(PolicyImage).filter(
                PolicyImage.policy_id == policy_id,
                PolicyImage.image_id == image_id).delete(
                    synchronize_session=False)

    @common.wrap
    def policy_image_counts(self, policy_ids):
        """{policy id: {state: number of images}} of ``policy_ids`` (one
        query); a policy without images maps to {}.
        """
        ids = list(common.as_list(policy_ids)) if policy_ids is not None \
            else []
        counts = {pid: {} for pid in ids}
        if not ids:
            return counts
        PolicyImage = models.PolicyImage
        with self.reader() as session:
            query = session.query(
                PolicyImage.policy_id, PolicyImage.state,
                sa.func.count(PolicyImage.id)).filter(
                    PolicyImage.policy_id.in_(ids)).group_by(
                        PolicyImage.policy_id, PolicyImage.state)
            for policy_id, state, number in query.all():
                counts[policy_id][state] = number
        return counts

    # Replicas.
    @common.wrap
    def replica_upsert(self, direction, peer, source_image_id, values):
        """Insert a replica (state ``current`` unless given) or update
        it: the row of its owner, which ``values`` name (``policy_id``,
        else ``project_id``; see :func:`owner_key`).  InvalidInput when
        they name neither.
        """
        values = common.values(values, models.REPLICA_COLUMNS,
                               table='replicas')
        if 'policy_id' not in values and 'project_id' not in values:
            raise exception.InvalidInput(
                reason='a replica is written with its owner (policy_id '
                       'or project_id)')
        for key in ('id', 'owner_key'):
            values.pop(key, None)
        values.update(direction=direction, peer=peer,
                      source_image_id=source_image_id,
                      owner_key=owner_key(values.get('policy_id'),
                                          values.get('project_id')))
        try:
            return self._replica_put(values)
        except db_exc.DBDuplicateEntry:
            # Inserted by another writer since we looked: update it.
            return self._replica_put(values)

    def _replica_put(self, values):
        now = timeutils.utcnow()
        with self.writer() as session:
            obj = _replica_obj(session, values['direction'],
                               values['peer'], values['source_image_id'],
                               values['owner_key'])
            if obj is None:
                new = dict(values)
                new.setdefault('created_at', now)
                new.setdefault('updated_at', new['created_at'])
                obj = models.Replica(**new)
                session.add(obj)
            else:
                values = dict(values, updated_at=values.get(
                    'updated_at', now))
                for key, value in values.items():
                    if key != 'created_at':
                        setattr(obj, key, value)
            session.flush()
            return _replica(obj)

    @common.wrap
    def replica_update(self, replica_id, values):
        """Change replica ``replica_id`` (its state, say); its key and
        owner stay.  None when there is no such row.
        """
        values = common.values(values, models.REPLICA_COLUMNS,
                               table='replicas')
        fixed = set(values) & set(_REPLICA_KEY)
        if fixed:
            raise exception.InvalidInput(
                reason="a replica's %s cannot change"
                       % ', '.join(sorted(fixed)))
        values.setdefault('updated_at', timeutils.utcnow())
        with self.writer() as session:
            obj = session.get(models.Replica, replica_id)
            if obj is None:
                return None
            for key, value in values.items():
                setattr(obj, key, value)
            session.flush()
            return _replica(obj)

    @common.wrap
    def replica_get(self, direction, peer, source_image_id, policy_id=None,
                    project_id=None):
        """The replica of ``source_image_id`` that ``policy_id`` owns
        (else ``project_id``: a migration that served no policy), or
        None.
        """
        with self.reader() as session:
            return _replica(_replica_obj(
                session, direction, peer, source_image_id,
                owner_key(policy_id, project_id)))

    @common.wrap
    def replica_get_all(self, filters=None, marker=None, limit=None,
                        project_id=None):
        """Replicas, newest first (created_at, id); ``marker``: the id
        (an integer) of the replica the previous page ended on.
        """
        common.check_limit(limit)
        Replica = models.Replica
        with self.reader() as session:
            query = session.query(Replica)
            if project_id is not None:
                query = query.filter(Replica.project_id == project_id)
            query = _filter(query, Replica, filters, REPLICA_FILTER_KEYS)
            marker_obj = None
            if marker is not None:
                try:
                    key = int(marker)
                except (TypeError, ValueError):
                    raise exception.MarkerNotFound(marker=marker)
                marker_obj = common.marker_row(session, Replica, marker,
                                               project_id, key=key)
            query = common.paged(
                query, Replica, ['created_at', 'id'], ['desc', 'desc'],
                marker_obj, _NOT_NULL, limit)
            return [_replica(obj) for obj in query.all()]
