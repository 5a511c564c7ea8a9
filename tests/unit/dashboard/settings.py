"""Django settings of the dashboard unit tests: Horizon's test settings
with the plugin's ``enabled`` files and settings snippet applied.
"""

import copy
import os

from openstack_dashboard import enabled as os_enabled
from openstack_dashboard.test.settings import *  # noqa: F403,H303
from openstack_dashboard.utils import settings as settings_utils

from dtn_migrate.dashboard import enabled as dtn_enabled

# The panel configuration of Horizon's and the plugin's enabled files,
# computed afresh (Horizon's test settings already applied its own).
_scratch = {"exceptions": copy.deepcopy(
    HORIZON_CONFIG.get("exceptions", {}))}  # noqa: F405
_apps = []
settings_utils.update_dashboards([os_enabled, dtn_enabled], _scratch, _apps)
for _key in ("panel_customization", "header_sections", "dashboards",
             "exceptions", "extra_tabs", "extra_steps"):
    HORIZON_CONFIG[_key] = _scratch[_key]  # noqa: F405
_seen = set()
INSTALLED_APPS = [app for app in list(_apps) + list(INSTALLED_APPS)  # noqa
                  if not (app in _seen or _seen.add(app))]

# What the local_settings.d snippet does in a real Horizon.
_SNIPPET = os.path.join(os.path.dirname(dtn_enabled.__file__), os.pardir,
                        "local_settings.d", "_1800_dtn_migrate_settings.py")
with open(_SNIPPET, encoding="utf-8") as _f:
    exec(compile(_f.read(), _SNIPPET, "exec"))

# No test runner creates a test database here: an in-memory one.
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3",
                         "NAME": ":memory:"}}
