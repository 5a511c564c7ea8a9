"""The playground's openrc files and the text that tells how to use it
(``./tools/demo --serve``, devcloud.playground).

Nothing here starts anything nor imports oslo.service (devcloud.demo
selects its threading backend): the functional test of the playground
and the unit tests read the same names.
"""

import os
import shlex

from devcloud import api as devcloud_api
from devcloud import keystone as devcloud_keystone

#: The tag the playground's images carry (a policy's ``--tag``).
TAG = "dr"
#: Who each persona is (devcloud.api.PERSONAS, and the bootstrap admin).
WHO = {
    "admin": "admin of project admin and of demo",
    "alice": "member of project demo",
    "rita": "reader of project demo",
    "bob": "member of project other",
}
#: The order personas are listed in.
ORDER = ("admin", "alice", "rita", "bob")
#: The line that says the playground is up (then the openrc directory).
READY = "ready: openrc files in"


def password(persona):
    """PERSONA's password in both Keystones."""
    if persona == devcloud_keystone.ADMIN_USER:
        return devcloud_keystone.ADMIN_PASSWORD
    return devcloud_api.PERSONA_PASSWORD


def openrc_text(cloud, persona, env, peer, bin_dir):
    """An openrc file's text: the ``OS_*`` variables of ENV (an
    ``openstack`` environment of PERSONA on CLOUD), ``DTN_PEER`` (the
    other cloud's DTN) and BIN_DIR first on ``PATH``.
    """
    lines = ["# dtn-migrate playground: cloud %s as %s (%s)." % (
        cloud, persona, WHO.get(persona, persona)),
        "# Gone when the playground stops.  Source it: . %s-%s.openrc"
        % (cloud, persona)]
    lines += ["export %s=%s" % (key, shlex.quote(value))
              for key, value in sorted(env.items())
              if key.startswith("OS_")]
    lines += ["# The other cloud's DTN: openstack dtn migrate IMAGE "
              "--peer \"$DTN_PEER\" --wait",
              "export DTN_PEER=%s" % shlex.quote(peer),
              "# The openstack executable with the dtn commands.",
              "export PATH=%s:\"$PATH\"" % shlex.quote(bin_dir)]
    return "\n".join(lines) + "\n"


def usage(openrc_dir, clouds, horizons, images):
    """The text that tells how to use the playground."""
    a, b = clouds
    rc = os.path.join(openrc_dir, "%s-%s.openrc")
    out = [
        "",
        "Try it, in another shell:",
        "  . %s    # cloud a as alice (%s)" % (rc % ("a", "alice"),
                                               WHO["alice"]),
        "  openstack dtn peer list",
        "  openstack image list --tag %s" % TAG,
        "  openstack dtn migrate %s --peer \"$DTN_PEER\" --wait"
        % images[-1]["name"],
        "  openstack dtn migration list",
        "  openstack dtn policy create web --peer \"$DTN_PEER\" --tag %s "
        "--rpo 30" % TAG,
        "  . %s    # cloud b, the DR cloud, as its admin" % (
            rc % ("b", "admin")),
        "  openstack dtn replica list --direction incoming --all-projects",
        "",
        "openrc files, one per cloud and persona (%s):" % openrc_dir,
    ]
    for persona in ORDER:
        out.append("  %-8s %s (%s-%s.openrc, %s-%s.openrc)" % (
            persona, WHO[persona], "a", persona, "b", persona))
    out += ["",
            "Horizon, with the Disaster Recovery panels (Project and "
            "Admin dashboards):"]
    for cloud, horizon in zip(clouds, horizons):
        out.append("  cloud %s: %s/  (DTN %s)" % (
            cloud.name, horizon.endpoint, cloud.agent_name))
    out.append("  users: %s" % ", ".join(
        "%s / %s" % (p, password(p)) for p in ORDER))
    out += ["",
            "Runbooks (doc/source/admin/runbooks/): cloud a is the "
            "protected cloud, cloud b the DR cloud;",
            "'.. runbook: cloud=X user=Y' names the openrc to source "
            "(X-Y.openrc); <peer> is $DTN_PEER",
            "of cloud a (%s), <tag> a tag of your own (or %s, which "
            "both images carry)." % (b.agent_name, TAG),
            ""]
    return "\n".join(out)
