"""The "Migrate to peer cloud" form."""

from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from horizon import exceptions
from horizon import forms
from horizon import messages
from openstack_dashboard.api import glance
from openstack_dashboard import policy as horizon_policy

from dtn_migrate.common import states
from dtn_migrate.common import text
from dtn_migrate.dashboard import api
from dtn_migrate.dashboard import policy

MODE_CHOICES = (
    ("pipelined", _("Pipelined (export, transfer and import overlap)")),
    ("serial", _("Serial (one stage after the other)")),
)
VISIBILITY_CHOICES = (("", _("Private (the default)")),) + tuple(
    (v, v.capitalize()) for v in states.VISIBILITIES if v != "private")
INDEX_URL = "horizon:project:dtn_migrations:index"
#: The options the caller's policy may withhold: (form field, rule).
RESTRICTED_OPTIONS = (
    ("keep_id", policy.MIGRATION_KEEP_ID),
    ("visibility", policy.MIGRATION_VISIBILITY),
    ("target_project", policy.MIGRATION_TARGET_PROJECT),
)


class TitledSelectMultiple(forms.SelectMultiple):
    """A list whose options carry their whole label in ``title``: a
    long image name is cut (CSS) but still readable on hover.
    """

    def create_option(self, name, value, label, *args, **kwargs):
        option = super().create_option(name, value, label, *args, **kwargs)
        option["attrs"]["title"] = str(label)
        return option


def image_choices(request, preselected=None):
    """(id, label) of the project's active images; ``preselected`` ids
    are kept even when Glance's first page does not list them.
    """
    try:
        images, _more, _prev = glance.image_list_detailed(
            request, filters={"status": "active"})
    except Exception:
        images = []
        exceptions.handle(request, _("Unable to retrieve the images."))
    choices = [(i.id, "%s (%s)" % (text.shorten(i.name), i.id)
                if i.name else i.id) for i in images]
    known = {c[0] for c in choices}
    for image_id in preselected or ():
        if image_id not in known:
            choices.append((image_id, image_id))
    return choices


def peer_choices(request):
    """(name, label) of the API's peers; unreachable ones are marked."""
    try:
        peers = api.peer_list(request)
    except Exception:
        exceptions.handle(request, _("Unable to retrieve the peers."))
        return []
    return [(p.name, p.name if p.get("reachable")
             else _("%s (unreachable)") % p.name) for p in peers]


def offer(form, request, field, rule):
    """Offer ``field`` of ``form`` only to who may ask for it (policy
    ``rule``).
    """
    if not horizon_policy.check(rule, request):
        del form.fields[field]


def offer_allowed_options(form, request):
    """Offer keep id, visibility and target project only to who may ask
    for them (an administrator, by default).
    """
    for field, rule in RESTRICTED_OPTIONS:
        offer(form, request, field, rule)


class MigrateForm(forms.SelfHandlingForm):
    """Images by id or by tag, a peer, and the migration's options."""

    images = forms.MultipleChoiceField(
        label=_("Images"), required=False,
        widget=TitledSelectMultiple(attrs={"size": 8,
                                           "class": "dtn-image-list"}),
        help_text=_("The images to migrate; or give a tag instead."))
    tag = forms.CharField(
        label=_("Tag"), required=False, max_length=255,
        help_text=_("Migrate every image of the project carrying this "
                    "tag."))
    peer = forms.ChoiceField(label=_("Peer cloud"))
    keep_id = forms.BooleanField(
        label=_("Keep the image ID"), required=False,
        help_text=_("Create the peer image with the same ID."))
    visibility = forms.ChoiceField(
        label=_("Visibility"), required=False, choices=VISIBILITY_CHOICES,
        help_text=_("Visibility of the images in the peer cloud."))
    target_project = forms.CharField(
        label=_("Target project"), required=False, max_length=64,
        help_text=_("ID of the peer cloud's project to import into "
                    "(the peer decides which it allows); empty: the "
                    "peer's default."))
    mode = forms.ChoiceField(label=_("Mode"), choices=MODE_CHOICES,
                             initial="pipelined")
    force = forms.BooleanField(
        label=_("Migrate again"), required=False,
        help_text=_("Send the image again even when the peer already "
                    "holds a verified copy of it (--force)."))

    def __init__(self, request, *args, **kwargs):
        super().__init__(request, *args, **kwargs)
        preselected = self.initial.get("images") or ()
        self.fields["images"].choices = image_choices(request, preselected)
        peers = peer_choices(request)
        if not peers:
            peers = [("", _("No peer available"))]
        self.fields["peer"].choices = peers
        offer_allowed_options(self, request)

    def clean(self):
        data = super().clean()
        images = data.get("images") or []
        tag = (data.get("tag") or "").strip()
        if bool(images) == bool(tag):
            raise forms.ValidationError(
                _("Choose images or give a tag, not both."))
        data["tag"] = tag
        return data

    def handle(self, request, data):
        options = {"mode": data.get("mode") or "pipelined"}
        if "keep_id" in self.fields:
            options["keep_id"] = bool(data.get("keep_id"))
        if data.get("visibility"):
            options["visibility"] = data["visibility"]
        target_project = (data.get("target_project") or "").strip()
        if target_project:
            options["target_project"] = target_project
        if data.get("force"):
            options["force"] = True
        try:
            started = api.migration_create(
                request, data["peer"], images=data.get("images") or None,
                tag=data.get("tag") or None, options=options)
        except Exception:
            exceptions.handle(
                request, _("Unable to start the migration to %s.")
                % data["peer"], redirect=reverse(INDEX_URL))
            return False
        if not started:
            messages.warning(request, _("No image matched: nothing to "
                                        "migrate."))
            return True
        names = ", ".join(text.shorten(m.name) for m in started)
        messages.success(request, _("Started %(count)d migration(s) to "
                                    "%(peer)s: %(names)s")
                         % {"count": len(started), "peer": data["peer"],
                            "names": names})
        return started
