"""SQLAlchemy models of dtn-migrate's tables."""

from oslo_utils import timeutils
import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy import orm

#: Times with microseconds (MariaDB's DATETIME keeps none by default):
#: listings sort and page on them.
DateTime = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mysql')


class Base(orm.DeclarativeBase):
    pass


def _now():
    return timeutils.utcnow()


class Migration(Base):
    """One migration of one image, outgoing or incoming."""

    __tablename__ = 'migrations'

    id = sa.Column(sa.String(36), primary_key=True)
    request_id = sa.Column(sa.String(36), index=True)
    image_id = sa.Column(sa.String(36), index=True)
    image_name = sa.Column(sa.String(255))
    peer = sa.Column(sa.String(255), index=True)
    direction = sa.Column(sa.String(16), nullable=False)
    state = sa.Column(sa.String(16), nullable=False, index=True)
    stage = sa.Column(sa.String(16))
    mode = sa.Column(sa.String(16))
    transfer_id = sa.Column(sa.String(36), index=True)
    #: 'pending' from the save of a migration's outcome until its staged
    #: files are removed (an engine that stopped in between, or a removal
    #: that failed, leaves it for the engine's sweep); NULL otherwise.
    cleanup = sa.Column(sa.String(16), index=True)
    attempt = sa.Column(sa.Integer)
    size = sa.Column(sa.BigInteger)
    os_hash_value = sa.Column(sa.String(128))
    bytes_export = sa.Column(sa.BigInteger)
    bytes_transfer = sa.Column(sa.BigInteger)
    bytes_import = sa.Column(sa.BigInteger)
    progress = sa.Column(sa.Float)
    rate = sa.Column(sa.Float)
    eta = sa.Column(sa.Float)
    error = sa.Column(sa.Text)
    peer_image_id = sa.Column(sa.String(36))
    peer_image_hash = sa.Column(sa.String(128))
    options = sa.Column(sa.Text)
    #: JSON: what the engine keeps beyond the columns (per-stage state
    #: and rate, the peer's verification, an import's source image).
    details = sa.Column(sa.Text)
    project_id = sa.Column(sa.String(64), index=True)
    user_id = sa.Column(sa.String(64))
    #: The engine (its host name) that claimed the migration last, and
    #: the epoch of that claim: each claim or takeover adds one to it
    #: (db.api's migration_claim), and a write that carries an older
    #: epoch than the row's is refused, so that an engine that lost the
    #: migration to another cannot overwrite it (issue 39).  Written
    #: only by migration_claim; NULL and 0 until the first claim.
    owner = sa.Column(sa.String(255))
    epoch = sa.Column(sa.Integer, nullable=False, default=0,
                      server_default='0')
    created_at = sa.Column(DateTime, index=True, default=_now)
    updated_at = sa.Column(DateTime, index=True, default=_now,
                           onupdate=_now)
    started_at = sa.Column(DateTime)
    finished_at = sa.Column(DateTime)

    __table_args__ = (
        sa.Index('migrations_created_at_id_idx', 'created_at', 'id'),
        sa.Index('migrations_project_id_created_at_idx', 'project_id',
                 'created_at'),
    )


class ServiceKey(Base):
    """A secret of the service itself, made at its first use: only the
    service's components, which hold the database's credentials, read
    it (the import seal's key, see dtn_migrate.image.marker).
    """

    __tablename__ = 'service_keys'

    name = sa.Column(sa.String(64), primary_key=True)
    value = sa.Column(sa.String(128), nullable=False)
    created_at = sa.Column(DateTime, default=_now)


class MigrationEvent(Base):
    """A step of a migration's timeline."""

    __tablename__ = 'migration_events'

    id = sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    migration_id = sa.Column(sa.String(36), sa.ForeignKey('migrations.id'),
                             index=True, nullable=False)
    stage = sa.Column(sa.String(16))
    event = sa.Column(sa.String(32), nullable=False)
    message = sa.Column(sa.Text)
    bytes = sa.Column(sa.BigInteger)
    created_at = sa.Column(DateTime, default=_now)


class ProtectionPolicy(Base):
    """A protection policy: which images of a project to keep replicated
    at a peer, how (continuous, scheduled, manual) and how fresh (RPO).
    """

    __tablename__ = 'protection_policies'

    id = sa.Column(sa.String(36), primary_key=True)
    name = sa.Column(sa.String(255), nullable=False)
    description = sa.Column(sa.Text)
    project_id = sa.Column(sa.String(64), index=True)
    user_id = sa.Column(sa.String(64))
    peer = sa.Column(sa.String(255), nullable=False)
    mode = sa.Column(sa.String(16), nullable=False)
    schedule = sa.Column(sa.String(255))
    rpo_minutes = sa.Column(sa.Integer, nullable=False)
    #: JSON: which images the policy selects.
    selector = sa.Column(sa.Text)
    #: JSON: how it replicates them (keep_id, target_project, deletion).
    options = sa.Column(sa.Text)
    enabled = sa.Column(sa.Boolean, nullable=False, default=True,
                        server_default=sa.true())
    role = sa.Column(sa.String(16), nullable=False, default='primary',
                     server_default='primary')
    rpo_state = sa.Column(sa.String(16))
    rpo_seconds = sa.Column(sa.Float)
    rpo_checked_at = sa.Column(DateTime)
    last_sync_at = sa.Column(DateTime)
    last_error = sa.Column(sa.Text)
    created_at = sa.Column(DateTime, default=_now)
    updated_at = sa.Column(DateTime, default=_now, onupdate=_now)

    __table_args__ = (
        sa.UniqueConstraint('project_id', 'name',
                            name='uniq_protection_policies0project_id0name'),
    )


class PolicyImage(Base):
    """An image a policy selects, and how far its replication is."""

    __tablename__ = 'policy_images'

    id = sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    policy_id = sa.Column(sa.String(36),
                          sa.ForeignKey('protection_policies.id',
                                        ondelete='CASCADE'),
                          index=True, nullable=False)
    #: Indexed on its own: a Glance notification names an image, not a
    #: policy.
    image_id = sa.Column(sa.String(36), nullable=False, index=True)
    image_name = sa.Column(sa.String(255))
    project_id = sa.Column(sa.String(64))
    os_hash_value = sa.Column(sa.String(128))
    size = sa.Column(sa.BigInteger)
    state = sa.Column(sa.String(16), nullable=False)
    #: The oldest change not replicated yet; None once replicated.
    changed_at = sa.Column(DateTime)
    replicated_at = sa.Column(DateTime)
    migration_id = sa.Column(sa.String(36), index=True)
    error = sa.Column(sa.Text)
    created_at = sa.Column(DateTime, default=_now)
    updated_at = sa.Column(DateTime, default=_now, onupdate=_now)

    __table_args__ = (
        sa.UniqueConstraint('policy_id', 'image_id',
                            name='uniq_policy_images0policy_id0image_id'),
    )


class Replica(Base):
    """A copy of an image between this cloud and a peer: ``outgoing``
    (this cloud holds the source), or ``incoming`` (it holds the copy).
    """

    __tablename__ = 'replicas'

    id = sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    direction = sa.Column(sa.String(16), nullable=False)
    peer = sa.Column(sa.String(255), nullable=False)
    source_image_id = sa.Column(sa.String(36), nullable=False)
    #: Indexed: "is this image a replica?" names the copy.
    replica_image_id = sa.Column(sa.String(36), index=True)
    project_id = sa.Column(sa.String(64), index=True)
    image_name = sa.Column(sa.String(255))
    size = sa.Column(sa.BigInteger)
    hash_algo = sa.Column(sa.String(16))
    hash_value = sa.Column(sa.String(128))
    migration_id = sa.Column(sa.String(36))
    #: No foreign key: the replica outlives its policy.
    policy_id = sa.Column(sa.String(36), index=True)
    state = sa.Column(sa.String(16), nullable=False, default='current',
                      server_default='current')
    verified_at = sa.Column(DateTime)
    created_at = sa.Column(DateTime, default=_now)
    updated_at = sa.Column(DateTime, default=_now, onupdate=_now)
    #: What owns the replica, part of its key: ``policy:<id>`` of the
    #: policy it serves, else ``project:<id>`` of the project whose
    #: migration made it (db.protection.owner_key).  A project's
    #: migration of an image another project's policy protects makes a
    #: row of its own, and never overwrites that policy's.
    owner_key = sa.Column(sa.String(80), nullable=False)

    __table_args__ = (
        sa.UniqueConstraint(
            'direction', 'peer', 'source_image_id', 'owner_key',
            name='uniq_replicas0direction0peer0source_image_id0owner_key'),
    )


class Drill(Base):
    """A disaster-recovery drill of a policy, run where its replicas are:
    every incoming replica checked, and the time it took (the RTO).
    """

    __tablename__ = 'drills'

    id = sa.Column(sa.String(36), primary_key=True)
    #: No foreign key: the report outlives its policy.
    policy_id = sa.Column(sa.String(36), index=True, nullable=False)
    policy_name = sa.Column(sa.String(255))
    project_id = sa.Column(sa.String(64), index=True)
    #: running, passed, failed (some replica bad), error (could not run).
    state = sa.Column(sa.String(16), nullable=False)
    clone = sa.Column(sa.Boolean, nullable=False, default=False,
                      server_default=sa.false())
    images_total = sa.Column(sa.Integer)
    images_intact = sa.Column(sa.Integer)
    images_bad = sa.Column(sa.Integer)
    rto_seconds = sa.Column(sa.Float)
    #: JSON: the check of every replica.
    report = sa.Column(sa.Text)
    error = sa.Column(sa.Text)
    started_at = sa.Column(DateTime)
    finished_at = sa.Column(DateTime)
    created_at = sa.Column(DateTime, default=_now)
    updated_at = sa.Column(DateTime, default=_now, onupdate=_now)


#: Columns of a migration row, in table order.
MIGRATION_COLUMNS = tuple(c.name for c in Migration.__table__.columns)
EVENT_COLUMNS = ('stage', 'event', 'message', 'bytes', 'created_at')
POLICY_COLUMNS = tuple(c.name for c in ProtectionPolicy.__table__.columns)
POLICY_IMAGE_COLUMNS = tuple(c.name for c in PolicyImage.__table__.columns)
REPLICA_COLUMNS = tuple(c.name for c in Replica.__table__.columns)
DRILL_COLUMNS = tuple(c.name for c in Drill.__table__.columns)
