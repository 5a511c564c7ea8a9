# Sphinx configuration for the dtn-migrate documentation.
project = 'dtn-migrate'
copyright = '2026, dtn-migrate developers'
extensions = []
master_doc = 'index'
exclude_patterns = []
html_theme = 'alabaster'
