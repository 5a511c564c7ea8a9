"""Replicas keyed by their owner: the policy they serve, or the project
whose migration made them.

Rows were keyed by (direction, peer, source image) alone, so that one
project's migration of an image another project's policy protects
overwrote that policy's replica.  Each existing row gets the owner its
columns name (its policy, else its project); no two existing rows can
share a key, since the old key was narrower.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from alembic import op
import sqlalchemy as sa

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None

OLD = 'uniq_replicas0direction0peer0source_image_id'
NEW = 'uniq_replicas0direction0peer0source_image_id0owner_key'


def upgrade():
    op.add_column('replicas', sa.Column('owner_key', sa.String(80)))
    replicas = sa.table('replicas', sa.column('policy_id', sa.String),
                        sa.column('project_id', sa.String),
                        sa.column('owner_key', sa.String))
    # As db.protection.owner_key: the policy when there is one.
    served = sa.and_(replicas.c.policy_id.isnot(None),
                     replicas.c.policy_id != '')
    op.execute(replicas.update().where(served).values(
        owner_key=sa.literal('policy:', sa.String) + replicas.c.policy_id))
    op.execute(replicas.update().where(sa.not_(served)).values(
        owner_key=sa.literal('project:', sa.String) +
        sa.func.coalesce(replicas.c.project_id, '')))
    with op.batch_alter_table('replicas') as batch:
        batch.alter_column('owner_key', existing_type=sa.String(80),
                           nullable=False)
        batch.drop_constraint(OLD, type_='unique')
        batch.create_unique_constraint(
            NEW, ['direction', 'peer', 'source_image_id', 'owner_key'])
