"""The peers panel."""
