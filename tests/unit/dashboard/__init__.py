"""Unit tests of the Horizon plugin (dtn_migrate.dashboard).

Django is configured here, once per test process, with
tests.unit.dashboard.settings (Horizon's test settings plus the plugin),
and its test environment is set up as Django's test runner would
(``testserver`` host, template rendering signals, locmem e-mail).
"""

import os

import django
from django.conf import settings
from django.test import utils as django_test_utils

if not settings.configured:
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.unit.dashboard.settings"
    django.setup()
    try:
        django_test_utils.setup_test_environment()
    except RuntimeError:
        pass  # already set up by a Django test runner
