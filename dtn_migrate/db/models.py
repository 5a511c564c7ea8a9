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


#: Columns of a migration row, in table order.
MIGRATION_COLUMNS = tuple(c.name for c in Migration.__table__.columns)
EVENT_COLUMNS = ('stage', 'event', 'message', 'bytes', 'created_at')
