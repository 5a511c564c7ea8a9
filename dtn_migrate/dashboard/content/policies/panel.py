"""The project's "Protection Policies" panel."""

from django.utils.translation import gettext_lazy as _
import horizon

from dtn_migrate.dashboard import policy


class PoliciesPanel(horizon.Panel):
    name = _("Protection Policies")
    slug = "dtn_policies"
    permissions = ("openstack.services.dtn-migration",)
    policy_rules = policy.POLICY_LIST
