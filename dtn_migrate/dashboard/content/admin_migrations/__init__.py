"""The admin_migrations panel."""
