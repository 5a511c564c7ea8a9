# The "Disaster Recovery" panel group of the Project dashboard.
from django.utils.translation import gettext_lazy as _

from dtn_migrate.client import exceptions as dtn_exc

PANEL_GROUP = 'disaster_recovery'
PANEL_GROUP_NAME = _('Disaster Recovery')
PANEL_GROUP_DASHBOARD = 'project'

ADD_INSTALLED_APPS = ['dtn_migrate.dashboard']

# Ellipses for long names and hashes, the form's image list.
ADD_SCSS_FILES = ['dtn_migrate/scss/dtn_migrate.scss']

# API errors become Horizon messages: 401 logs the user out, 404 and
# every other client error are recoverable (a message, no traceback).
ADD_EXCEPTIONS = {
    'unauthorized': (dtn_exc.HttpUnauthorized,),
    'not_found': (dtn_exc.HttpNotFound,),
    'recoverable': (dtn_exc.ClientException,),
}
