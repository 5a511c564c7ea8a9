"""The service's own secrets (the key of the import seal).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

from alembic import op
import sqlalchemy as sa

from dtn_migrate.db import models

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'service_keys',
        sa.Column('name', sa.String(64), primary_key=True),
        sa.Column('value', sa.String(128), nullable=False),
        sa.Column('created_at', models.DateTime),
        mysql_engine='InnoDB', mysql_charset='utf8mb4',
    )
