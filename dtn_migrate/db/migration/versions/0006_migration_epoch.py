"""The owner and epoch of a migration: the fencing of active/active
engines (issue 39).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02
"""

from alembic import op
import sqlalchemy as sa

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade():
    # Existing rows were never claimed: no owner, epoch 0 (the server
    # default fills them in, on SQLite, MariaDB and PostgreSQL alike).
    op.add_column('migrations', sa.Column('owner', sa.String(255)))
    op.add_column('migrations', sa.Column('epoch', sa.Integer,
                                          nullable=False,
                                          server_default='0'))
