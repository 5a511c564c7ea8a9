"""Horizon plugin of dtn-migrate: a "Disaster Recovery" panel group in
the Project and Admin dashboards (migrations, their progress and stage
timeline, peer health) and a "Migrate to peer cloud" row action on the
Images table.

Install with ``python -m dtn_migrate.dashboard.install``, which copies
the ``enabled/`` files and the ``local_settings.d/`` snippet into
Horizon's local directories.
"""
