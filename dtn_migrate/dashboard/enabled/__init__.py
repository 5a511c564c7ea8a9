"""Horizon ``enabled`` files of the plugin.

``python -m dtn_migrate.dashboard.install`` copies them into
``openstack_dashboard/local/enabled/``; a test settings module may also
pass this package to ``update_dashboards``.
"""
