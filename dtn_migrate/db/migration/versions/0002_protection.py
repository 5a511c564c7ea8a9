"""Protection policies, the images they select, the replica catalog and
the drills.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-25
"""

from alembic import op
import sqlalchemy as sa

from dtn_migrate.db import models

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade():
    dt = models.DateTime
    op.create_table(
        'protection_policies',
        sa.Column('id', sa.String(36), primary_key=True),
        sa.Column('name', sa.String(255), nullable=False),
        sa.Column('description', sa.Text),
        sa.Column('project_id', sa.String(64), index=True),
        sa.Column('user_id', sa.String(64)),
        sa.Column('peer', sa.String(255), nullable=False),
        sa.Column('mode', sa.String(16), nullable=False),
        sa.Column('schedule', sa.String(255)),
        sa.Column('rpo_minutes', sa.Integer, nullable=False),
        sa.Column('selector', sa.Text),
        sa.Column('options', sa.Text),
        sa.Column('enabled', sa.Boolean, nullable=False,
                  server_default=sa.true()),
        sa.Column('role', sa.String(16), nullable=False,
                  server_default='primary'),
        sa.Column('rpo_state', sa.String(16)),
        sa.Column('rpo_seconds', sa.Float),
        sa.Column('rpo_checked_at', dt),
        sa.Column('last_sync_at', dt),
        sa.Column('last_error', sa.Text),
        sa.Column('created_at', dt),
        sa.Column('updated_at', dt),
        sa.UniqueConstraint('project_id', 'name',
                            name='uniq_protection_policies0project_id0name'),
        mysql_engine='InnoDB', mysql_charset='utf8mb4',
    )
    op.create_table(
        'policy_images',
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('policy_id', sa.String(36),
                  sa.ForeignKey('protection_policies.id',
                                ondelete='CASCADE'),
                  nullable=False, index=True),
        sa.Column('image_id', sa.String(36), nullable=False, index=True),
        sa.Column('image_name', sa.String(255)),
        sa.Column('project_id', sa.String(64)),
        sa.Column('os_hash_value', sa.String(128)),
        sa.Column('size', sa.BigInteger),
        sa.Column('state', sa.String(16), nullable=False),
        sa.Column('changed_at', dt),
        sa.Column('replicated_at', dt),
        sa.Column('migration_id', sa.String(36), index=True),
        sa.Column('error', sa.Text),
        sa.Column('created_at', dt),
        sa.Column('updated_at', dt),
        sa.UniqueConstraint('policy_id', 'image_id',
                            name='uniq_policy_images0policy_id0image_id'),
        mysql_engine='InnoDB', mysql_charset='utf8mb4',
    )
    op.create_table(
        'replicas',
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('direction', sa.String(16), nullable=False),
        sa.Column('peer', sa.String(255), nullable=False),
        sa.Column('source_image_id', sa.String(36), nullable=False),
        sa.Column('replica_image_id', sa.String(36), index=True),
        sa.Column('project_id', sa.String(64), index=True),
        sa.Column('image_name', sa.String(255)),
        sa.Column('size', sa.BigInteger),
        sa.Column('hash_algo', sa.String(16)),
        sa.Column('hash_value', sa.String(128)),
        sa.Column('migration_id', sa.String(36)),
        sa.Column('policy_id', sa.String(36), index=True),
        sa.Column('state', sa.String(16), nullable=False,
                  server_default='current'),
        sa.Column('verified_at', dt),
        sa.Column('created_at', dt),
        sa.Column('updated_at', dt),
        sa.UniqueConstraint(
            'direction', 'peer', 'source_image_id',
            name='uniq_replicas0direction0peer0source_image_id'),
        mysql_engine='InnoDB', mysql_charset='utf8mb4',
    )
    op.create_table(
        'drills',
        sa.Column('id', sa.String(36), primary_key=True),
        sa.Column('policy_id', sa.String(36), nullable=False, index=True),
        sa.Column('policy_name', sa.String(255)),
        sa.Column('project_id', sa.String(64), index=True),
        sa.Column('state', sa.String(16), nullable=False),
        sa.Column('clone', sa.Boolean, nullable=False,
                  server_default=sa.false()),
        sa.Column('images_total', sa.Integer),
        sa.Column('images_intact', sa.Integer),
        sa.Column('images_bad', sa.Integer),
        sa.Column('rto_seconds', sa.Float),
        sa.Column('report', sa.Text),
        sa.Column('error', sa.Text),
        sa.Column('started_at', dt),
        sa.Column('finished_at', dt),
        sa.Column('created_at', dt),
        sa.Column('updated_at', dt),
        mysql_engine='InnoDB', mysql_charset='utf8mb4',
    )
