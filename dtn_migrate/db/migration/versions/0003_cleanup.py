"""Migrations whose staged files are still to be removed.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-28
"""

from alembic import op
import sqlalchemy as sa

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade():
    op.add_column('migrations', sa.Column('cleanup', sa.String(16)))
    op.create_index('ix_migrations_cleanup', 'migrations', ['cleanup'])
