"""The receiving cloud's rules for what a peer DTN imports: the project
and visibility of the image (``[peer:<name>]`` import_project,
allowed_projects, project_map, allowed_visibilities).

One function, :func:`import_target`, decides for both the import on
arrival (``tasks.incoming.ReadDescriptor``) and the preflight a peer
asks before its first byte (``preflight.answer``): the early answer and
the arrival check cannot drift apart.
"""

from oslo_log import log as logging

from dtn_migrate.conf import peer as peer_conf
from dtn_migrate import exception

LOG = logging.getLogger(__name__)


def _listed(values):
    return ", ".join(values) if values else "none"


def _projects(rules, source_project):
    """(default owner, the projects that may be asked for) of an import
    from ``source_project`` under ``rules``: its mapped project when
    ``project_map`` names it, else import_project (None: the engine's
    own) and allowed_projects.
    """
    mapped = rules.project_map.get(source_project) \
        if source_project else None
    if mapped:
        return mapped, [mapped]
    allowed = list(rules.allowed_projects)
    if rules.import_project and rules.import_project not in allowed:
        allowed.insert(0, rules.import_project)
    return rules.import_project, allowed


def import_target(conf, peer, descriptor, options, transfer_id=None,
                  source_project=None):
    """Where the receiving cloud's rules let ``peer`` import an image
    that ``source_project`` (a project of the peer cloud, as the
    descriptor names it; None when it does not) migrates:
    ``{"owner": project id or None (the engine's own project),
    "visibility": ...}`` from the source's ``options`` (target_project,
    visibility) and ``descriptor`` (the source image's visibility).

    Raises ImportNotAllowed, logged, when the peer asks for a project or
    a visibility that its ``[peer:<name>]`` section does not allow.  The
    refusal travels back to the source, where the project's members
    read it: it names what was refused, never what is allowed (other
    projects' ids); this cloud's log names both.
    """
    try:
        rules = peer_conf.import_rules(conf, peer)
    except ValueError as exc:
        raise exception.ConfigError(reason=str(exc))
    group = peer_conf.group_name(peer)
    source = "source project %s" % source_project if source_project \
        else "no source project"

    def refuse(what, reason, allowed):
        exc = exception.ImportNotAllowed(peer=peer, what=what,
                                         reason=reason)
        LOG.warning("import of %s refused: %s (%s; allowed: %s)",
                    "transfer %s" % transfer_id if transfer_id
                    else "a protection policy's images (preflight)", exc,
                    source, _listed(allowed))
        return exc

    owner, projects = _projects(rules, source_project)
    asked = options.get("target_project") or None
    if asked is not None:
        if asked not in projects:
            raise refuse("into project %s" % asked,
                         "[%s] does not allow it for %s"
                         % (group, source), projects)
        owner = asked
    visibility = options.get("visibility") or None
    how = "asked for"
    if visibility is None:
        visibility = descriptor.get("visibility") or None
        how = "the source image's"
    allowed = rules.allowed_visibilities
    if visibility is None:
        if not allowed:
            raise refuse("any image", "[%s] allowed_visibilities is empty"
                         % group, allowed)
        visibility = "private" if "private" in allowed else allowed[0]
    elif visibility not in allowed:
        raise refuse(
            "with visibility %s (%s)" % (visibility, how),
            "[%s] allowed_visibilities does not list it" % group, allowed)
    return {"owner": owner, "visibility": visibility}
