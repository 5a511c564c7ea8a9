"""The "Create Policy" form."""

from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from horizon import exceptions
from horizon import forms
from horizon import messages

from dtn_migrate.dashboard.content.migrations import forms as mig_forms
from dtn_migrate.dashboard import api
from dtn_migrate.dashboard import policy

MODE_CHOICES = (
    ("continuous", _("Continuous (on every image change)")),
    ("scheduled", _("Scheduled (cron expression)")),
    ("manual", _("Manual (Sync Now only)")),
)
INDEX_URL = "horizon:project:dtn_policies:index"
#: The API's bounds of the RPO target, in minutes (one year at most).
RPO_MAX = 525600


def split_tags(text):
    """The tags of ``a, b c`` (commas or spaces), in order, once each."""
    tags = []
    for tag in (text or "").replace(",", " ").split():
        if tag not in tags:
            tags.append(tag)
    return tags


def parse_properties(text):
    """{key: value} of ``key=value`` lines (blank lines skipped);
    ValueError names the first line that is not one.
    """
    found = {}
    for number, line in enumerate((text or "").splitlines(), start=1):
        line = line.strip()
        if not line:
            continue
        key, sep, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            raise ValueError(_("Line %(n)d is not key=value: %(line)s")
                             % {"n": number, "line": line})
        found[key] = value
    return found


class CreatePolicyForm(forms.SelfHandlingForm):
    """A policy's name, peer, selector (tags, properties), mode and RPO
    target.
    """

    name = forms.CharField(label=_("Name"), max_length=255)
    description = forms.CharField(
        label=_("Description"), required=False,
        widget=forms.Textarea(attrs={"rows": 2}))
    peer = forms.ChoiceField(label=_("Peer cloud"))
    tags = forms.CharField(
        label=_("Tags"), required=False, max_length=1024,
        help_text=_("The images carrying every one of these tags "
                    "(separated by commas or spaces)."))
    properties = forms.CharField(
        label=_("Properties"), required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=_("The images with these property values: one "
                    "key=value a line."))
    mode = forms.ChoiceField(label=_("Mode"), choices=MODE_CHOICES,
                             initial="continuous")
    schedule = forms.CharField(
        label=_("Schedule"), required=False, max_length=255,
        help_text=_("For the scheduled mode: a cron expression of five "
                    "fields, in UTC (for instance 0 2 * * *)."))
    rpo_minutes = forms.IntegerField(
        label=_("RPO target (minutes)"), min_value=1, max_value=RPO_MAX,
        initial=60,
        help_text=_("How old the peer's copy may get before the policy's "
                    "recovery point is breached."))
    keep_id = forms.BooleanField(
        label=_("Keep the image ID"), required=False,
        help_text=_("Create the peer images with the same IDs."))

    def __init__(self, request, *args, **kwargs):
        super().__init__(request, *args, **kwargs)
        peers = mig_forms.peer_choices(request)
        if not peers:
            peers = [("", _("No peer available"))]
        self.fields["peer"].choices = peers
        mig_forms.offer(self, request, "keep_id", policy.POLICY_KEEP_ID)

    def clean(self):
        data = super().clean()
        data["tags"] = split_tags(data.get("tags"))
        try:
            data["properties"] = parse_properties(data.get("properties"))
        except ValueError as exc:
            self.add_error("properties", str(exc))
            data["properties"] = {}
        if not data["tags"] and not data["properties"] and \
                not self.errors.get("properties"):
            raise forms.ValidationError(
                _("Give tags or properties: a policy never selects every "
                  "image."))
        schedule = (data.get("schedule") or "").strip()
        if data.get("mode") == "scheduled" and not schedule:
            self.add_error("schedule",
                           _("The scheduled mode needs a schedule."))
        data["schedule"] = schedule if data.get("mode") == "scheduled" \
            else None
        return data

    def handle(self, request, data):
        selector = {}
        if data["tags"]:
            selector["tags"] = data["tags"]
        if data["properties"]:
            selector["properties"] = data["properties"]
        fields = {"name": data["name"], "peer": data["peer"],
                  "mode": data["mode"], "rpo_minutes": data["rpo_minutes"],
                  "selector": selector,
                  "options": {}}
        if "keep_id" in self.fields:
            fields["options"]["keep_id"] = bool(data.get("keep_id"))
        if data.get("description"):
            fields["description"] = data["description"]
        if data.get("schedule"):
            fields["schedule"] = data["schedule"]
        try:
            created = api.policy_create(request, **fields)
        except Exception:
            exceptions.handle(request, _("Unable to create policy %s.")
                              % data["name"], redirect=reverse(INDEX_URL))
            return False
        messages.success(request, _("Created policy %s.") % data["name"])
        return created
