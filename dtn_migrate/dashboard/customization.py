"""Horizon customization module of the plugin.

The settings snippet sets ``HORIZON_CONFIG['customization_module']`` to
this module unless the deployment has its own; a deployment that has
one imports this module from it.  Horizon imports it while building
its URLs, after every dashboard is loaded.
"""

from dtn_migrate.dashboard import images

images.register()
