"""The protection policies panel."""
