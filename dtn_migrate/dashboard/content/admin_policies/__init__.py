"""The admin_policies panel."""
