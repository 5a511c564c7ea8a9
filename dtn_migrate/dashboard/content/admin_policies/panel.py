"""The admin "Protection Policies" panel: every project's policies."""

from django.utils.translation import gettext_lazy as _
import horizon

from dtn_migrate.dashboard import policy


class AdminPoliciesPanel(horizon.Panel):
    name = _("Protection Policies")
    slug = "dtn_policies"
    permissions = ("openstack.services.dtn-migration",)
    policy_rules = policy.POLICY_LIST_ALL
