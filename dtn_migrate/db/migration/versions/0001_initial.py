"""Migration records and their events.

Revision ID: 0001
Revises:
Create Date: 2026-11-24
"""

from alembic import op
import sqlalchemy as sa

from dtn_migrate.db import models

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade():
    dt = models.DateTime
    op.create_table(
        'migrations',
        sa.Column('id', sa.String(36), primary_key=True),
        sa.Column('request_id', sa.String(36), index=True),
        sa.Column('image_id', sa.String(36), index=True),
        sa.Column('image_name', sa.String(255)),
        sa.Column('peer', sa.String(255), index=True),
        sa.Column('direction', sa.String(16), nullable=False),
        sa.Column('state', sa.String(16), nullable=False, index=True),
        sa.Column('stage', sa.String(16)),
        sa.Column('mode', sa.String(16)),
        sa.Column('transfer_id', sa.String(36), index=True),
        sa.Column('attempt', sa.Integer),
        sa.Column('size', sa.BigInteger),
        sa.Column('os_hash_value', sa.String(128)),
        sa.Column('bytes_export', sa.BigInteger),
        sa.Column('bytes_transfer', sa.BigInteger),
        sa.Column('bytes_import', sa.BigInteger),
        sa.Column('progress', sa.Float),
        sa.Column('rate', sa.Float),
        sa.Column('eta', sa.Float),
        sa.Column('error', sa.Text),
        sa.Column('peer_image_id', sa.String(36)),
        sa.Column('peer_image_hash', sa.String(128)),
        sa.Column('options', sa.Text),
        sa.Column('details', sa.Text),
        sa.Column('project_id', sa.String(64), index=True),
        sa.Column('user_id', sa.String(64)),
        sa.Column('created_at', dt, index=True),
        sa.Column('updated_at', dt, index=True),
        sa.Column('started_at', dt),
        sa.Column('finished_at', dt),
        mysql_engine='InnoDB', mysql_charset='utf8mb4',
    )
    op.create_index('migrations_created_at_id_idx', 'migrations',
                    ['created_at', 'id'])
    op.create_index('migrations_project_id_created_at_idx', 'migrations',
                    ['project_id', 'created_at'])
    op.create_table(
        'migration_events',
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('migration_id', sa.String(36),
                  sa.ForeignKey('migrations.id'), nullable=False,
                  index=True),
        sa.Column('stage', sa.String(16)),
        sa.Column('event', sa.String(32), nullable=False),
        sa.Column('message', sa.Text),
        sa.Column('bytes', sa.BigInteger),
        sa.Column('created_at', dt),
        mysql_engine='InnoDB', mysql_charset='utf8mb4',
    )
