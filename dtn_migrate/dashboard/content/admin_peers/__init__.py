"""The admin_peers panel."""
