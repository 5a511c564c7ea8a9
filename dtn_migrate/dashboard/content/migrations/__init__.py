"""The migrations panel."""
