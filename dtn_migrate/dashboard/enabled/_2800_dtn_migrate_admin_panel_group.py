# The "Disaster Recovery" panel group of the Admin dashboard.
from django.utils.translation import gettext_lazy as _

PANEL_GROUP = 'disaster_recovery'
PANEL_GROUP_NAME = _('Disaster Recovery')
PANEL_GROUP_DASHBOARD = 'admin'
