"""Panels of the plugin: one package per panel."""
