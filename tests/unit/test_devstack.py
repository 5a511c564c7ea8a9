"""The devstack plugin and the tools' shell scripts.

* shellcheck finds nothing in devstack/plugin.sh, devstack/settings and
  tools/*.sh.  Without shellcheck (Debian package ``shellcheck``, which
  tools/bootstrap installs) the test skips and says so, or fails under
  ``DTN_REQUIRE_ALL=1``.
* Every option the plugin writes into dtn-migrate.conf, with ``iniset`` or
  through DevStack's helpers, is an option of the sample configuration
  that ``tox -e genconfig`` generates.
"""

import os
import pathlib
import re
import shutil
import subprocess
import tempfile

from keystoneauth1 import loading as ks_loading
from oslo_config import generator
import testtools

TOP = pathlib.Path(__file__).resolve().parents[2]
PLUGIN = TOP / "devstack" / "plugin.sh"
SETTINGS = TOP / "devstack" / "settings"
GENERATOR_CONF = (TOP / "etc" / "dtn-migrate" /
                  "dtn-migrate-config-generator.conf")

#: The configuration file variable of the plugin.
CONF_VAR = "DTN_MIGRATE_CONF"

#: Options DevStack's helpers write: name -> (index of the section
#: argument, or None for a fixed one; fixed section; options).
KEYSTONEAUTH = ("auth_type", "interface", "auth_url", "username",
                "password", "user_domain_name", "project_name",
                "project_domain_name")
HELPERS = {
    # iniset_rpc_backend PACKAGE FILE [SECTION]
    "iniset_rpc_backend": (2, "DEFAULT", ("transport_url",)),
    # configure_keystoneauth FILE USER SECTION
    "configure_keystoneauth": (2, None, KEYSTONEAUTH),
    # configure_keystone_authtoken_middleware FILE USER [SECTION] [TYPE]
    "configure_keystone_authtoken_middleware": (
        2, "keystone_authtoken",
        KEYSTONEAUTH + ("www_authenticate_uri", "cafile",
                        "memcached_servers", "service_type")),
}


def _require(reason):
    """Skip with ``reason``, or fail under DTN_REQUIRE_ALL=1."""
    if os.environ.get("DTN_REQUIRE_ALL") == "1":
        raise AssertionError("DTN_REQUIRE_ALL=1 and " + reason)
    raise testtools.TestCase.skipException(reason)


def shell_words(path):
    """The commands of a shell file as lists of words (continuation lines
    joined, comments dropped, quotes removed from simple words).
    """
    text = re.sub(r"\\\n\s*", " ", path.read_text())
    commands = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        words = re.findall(r'"[^"]*"|\'[^\']*\'|\S+', line)
        commands.append([w.strip("\"'") for w in words])
    return commands


def _section(word):
    """A section argument as the sample names it: peer:$name and
    "peer:${name}" are the sample's [peer:<name>].
    """
    return re.sub(r"\$\{?\w+\}?", "<name>", word)


def plugin_options(path=PLUGIN):
    """{(section, option)} the plugin writes into $DTN_MIGRATE_CONF."""
    conf_word = {"$" + CONF_VAR, "${%s}" % CONF_VAR}
    found = set()
    for words in shell_words(path):
        cmd, args = words[0], words[1:]
        if cmd == "iniset" and args and args[0] in conf_word:
            found.add((_section(args[1]), args[2]))
        elif cmd in HELPERS:
            index, fixed, options = HELPERS[cmd]
            if conf_word.isdisjoint(args):
                continue
            section = args[index] if len(args) > index else fixed
            found.update((_section(section), o) for o in options)
    return found


def sample_options():
    """{(section, option)} of the sample configuration, generated from
    the generator configuration as ``tox -e genconfig`` does.
    """
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "dtn-migrate.conf.sample"
        conf = generator.cfg.ConfigOpts()
        generator.register_cli_opts(conf)
        conf(["--config-file", str(GENERATOR_CONF),
              "--output-file", str(out)])
        generator.generate(conf)
        text = out.read_text()
    found = set()
    section = None
    for line in text.splitlines():
        header = re.match(r"^\[(.+)\]$", line)
        if header:
            section = header.group(1)
            continue
        option = re.match(r"^#?([A-Za-z_][\w-]*) =( |$)", line)
        if option and section:
            found.add((section, option.group(1)))
    return found


def unknown_options(written, sample):
    """What of ``written`` the sample lacks.  In a section with auth_type,
    the options of the password plugin (the one DevStack sets) count as
    known: keystoneauth registers them when it loads the plugin.
    """
    password = {o.dest for o in
                ks_loading.get_auth_plugin_conf_options("password")}
    return sorted(
        (section, option) for section, option in written - sample
        if not (option.replace("-", "_") in password and
                (section, "auth_type") in sample))


class TestShellcheck(testtools.TestCase):

    def test_scripts_are_shellcheck_clean(self):
        shellcheck = shutil.which("shellcheck")
        if not shellcheck:
            _require("shellcheck is not installed (Debian package "
                     "shellcheck; tools/bootstrap installs it)")
        files = [PLUGIN, SETTINGS] + sorted((TOP / "tools").glob("*.sh"))
        proc = subprocess.run(
            [shellcheck, "--external-sources", "--source-path=SCRIPTDIR",
             "--shell=bash", "--format=gcc"] +
            [str(f.relative_to(TOP)) for f in files],
            cwd=TOP, capture_output=True, text=True, timeout=120)
        self.assertEqual(
            ("", 0), (proc.stdout, proc.returncode),
            "shellcheck found problems:\n%s%s" % (proc.stdout, proc.stderr))


class TestPluginOptions(testtools.TestCase):

    def test_plugin_options_are_in_the_sample(self):
        written = plugin_options()
        # The plugin does write the configuration the services need.
        for expected in [("DEFAULT", "transport_url"),
                         ("database", "connection"),
                         ("engine", "agent_host"),
                         ("agent", "staging_root"),
                         ("keystone_authtoken", "auth_url"),
                         ("peer:<name>", "key_file")]:
            self.assertIn(expected, written)
        unknown = unknown_options(written, sample_options())
        self.assertEqual([], unknown,
                         "devstack/plugin.sh sets options that the sample "
                         "configuration does not have")

    def test_unknown_option_is_found(self):
        # The check sees a misspelt option and a section placeholder.
        with tempfile.TemporaryDirectory() as tmp:
            script = pathlib.Path(tmp) / "plugin.sh"
            script.write_text(
                'iniset "$DTN_MIGRATE_CONF" engine agent_hots x\n'
                'iniset $DTN_MIGRATE_CONF "peer:$name" \\\n'
                '    port "$port"\n'
                'iniset "$OTHER_CONF" engine agent_host y\n'
                'configure_keystoneauth "$DTN_MIGRATE_CONF" u glance\n')
            written = plugin_options(script)
        self.assertIn(("engine", "agent_hots"), written)
        self.assertIn(("peer:<name>", "port"), written)
        self.assertIn(("glance", "auth_url"), written)
        self.assertNotIn(("engine", "agent_host"), written)
        # configure_keystoneauth writes the deprecated "interface", which
        # [glance] does not register (it has valid_interfaces).
        self.assertEqual([("engine", "agent_hots"), ("glance", "interface")],
                         unknown_options(written, sample_options()))
