"""The devstack plugin and the tools' shell scripts.

* shellcheck finds nothing in devstack/plugin.sh, devstack/settings and
  tools/*.sh.  Without shellcheck (Debian package ``shellcheck``, which
  tools/bootstrap installs) the test skips and says so, or fails under
  ``DTN_REQUIRE_ALL=1``.
* Every option the plugin writes into dtn-migrate.conf, with ``iniset`` or
  through DevStack's helpers, is an option of the sample configuration
  that ``tox -e genconfig`` generates.
* The plugin's phases, run by bash with stand-ins for the DevStack
  functions they call (each records its call; ``iniset`` writes the INI
  file), write a configuration that dtn-migrate loads with the values
  asked for, sync a real (SQLite) database with the real
  ``dtn-migrate-manage db sync``, register the service and endpoints,
  and start the API under uwsgi, the engine and the agent only where
  they are enabled.
* Where horizon is enabled, the real dashboard installer puts the
  panel's enabled files and settings snippet into $HORIZON_DIR at
  post-config, also on a Horizon-only node, and ``clean`` removes them.
"""

import configparser
import os
import pathlib
import re
import shlex
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading

import fixtures
from keystoneauth1 import loading as ks_loading
from oslo_config import cfg
from oslo_config import generator
from oslo_log import log
from oslo_messaging import opts as messaging_opts

from dtn_migrate.agent import peers
from dtn_migrate import conf as dtn_conf
from dtn_migrate.dashboard import install as dashboard_install
from dtn_migrate.conf import peer as peer_conf
from dtn_migrate.transfer.wire import auth

from tests.unit import testcase

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
    raise testcase.TestCase.skipException(reason)


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


class TestShellcheck(testcase.TestCase):

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


class TestPluginOptions(testcase.TestCase):

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


#: Stand-ins for the DevStack functions plugin.sh and settings call.  Each
#: appends "name args..." to $CALLS; iniset writes the file (Python's
#: configparser); is_service_enabled/enable_service/disable_service
#: follow DevStack's rules (a disabled service stays disabled), and so
#: does run_process (a service not enabled does not start).
FAKE_DEVSTACK = r"""
record() { printf '%s\n' "$*" >> "$CALLS"; }
define_plugin() { record define_plugin "$@"; }
is_service_enabled() {
    local s
    for s in "$@"; do
        [[ ",$ENABLED_SERVICES," == *",$s,"* ]] && return 0
    done
    return 1
}
enable_service() {
    local s
    for s in "$@"; do
        [[ ",$DISABLED_SERVICES," == *",$s,"* ]] && continue
        is_service_enabled "$s" || ENABLED_SERVICES="$ENABLED_SERVICES,$s"
    done
}
disable_service() {
    local s
    for s in "$@"; do
        DISABLED_SERVICES="$DISABLED_SERVICES,$s"
        ENABLED_SERVICES=$(echo ",$ENABLED_SERVICES," | sed "s/,$s,/,/g")
    done
}
get_python_exec_prefix() { echo "$FAKE_BIN"; }
iniset() {
    "$PYTHON" - "$@" <<'PY'
import configparser, sys
path, section, option, value = sys.argv[1:5]
c = configparser.RawConfigParser()
c.optionxform = str
c.read(path)
if section != "DEFAULT" and not c.has_section(section):
    c.add_section(section)
c.set(section, option, value)
with open(path, "w") as f:
    c.write(f)
PY
}
iniset_rpc_backend() {
    record iniset_rpc_backend "$@"
    iniset "$2" "${3:-DEFAULT}" transport_url "rabbit://stack:x@127.0.0.1/"
}
configure_keystone_authtoken_middleware() {
    record configure_keystone_authtoken_middleware "$@"
    local s=${3:-keystone_authtoken}
    iniset "$1" "$s" auth_type password
    iniset "$1" "$s" auth_url "$KEYSTONE_SERVICE_URI"
    iniset "$1" "$s" username "$2"
    iniset "$1" "$s" password "$SERVICE_PASSWORD"
    iniset "$1" "$s" www_authenticate_uri "$KEYSTONE_SERVICE_URI"
    [[ -n "$4" ]] && iniset "$1" "$s" service_type "$4"
    return 0
}
database_connection_url() { echo "sqlite:///$DATA_DIR/$1.sqlite"; }
recreate_database() {
    record recreate_database "$@"
    rm -f "$DATA_DIR/$1.sqlite"
}
setup_develop() { record setup_develop "$@"; }
install_apache_uwsgi() { record install_apache_uwsgi; }
install_package() { record install_package "$@"; }
write_uwsgi_config() { record write_uwsgi_config "$@"; : > "$1"; }
remove_uwsgi_config() { record remove_uwsgi_config "$@"; rm -f "$1"; }
create_service_user() { record create_service_user "$@"; }
get_or_create_service() { record get_or_create_service "$@"; echo svc-1; }
get_or_create_endpoint() { record get_or_create_endpoint "$@"; echo ep-1; }
openstack() { record openstack "$@"; echo 0123456789abcdef0123456789abcdef; }
run_process() { is_service_enabled "$1" || return 0; record run_process "$@"; }
stop_process() { record stop_process "$@"; }
wait_for_service() { record wait_for_service "$@"; }
die() { record die "$@"; exit 1; }
start_service() { record start_service "$@"; }
echo_summary() { :; }
sudo() { "$@"; }
"""


class PluginPhasesBase(testcase.TestCase):
    """Runs plugin.sh's phases under the stand-ins above."""

    def setUp(self):
        super().setUp()
        self.tmp = pathlib.Path(self.useFixture(fixtures.TempDir()).path)
        self.bin = self.tmp / "bin"
        self.bin.mkdir()
        # The real dtn-migrate-manage of this virtualenv.
        (self.bin / "dtn-migrate-manage").symlink_to(
            pathlib.Path(sys.executable).parent / "dtn-migrate-manage")
        self.conf_dir = self.tmp / "etc"
        self.calls = self.tmp / "calls"
        (self.tmp / "fake.sh").write_text(FAKE_DEVSTACK)

    def run_phases(self, phases, disabled=(), peers="", check=True,
                   **extra_env):
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.tmp),
            "PYTHON": sys.executable,
            "CALLS": str(self.calls),
            "FAKE_BIN": str(self.bin),
            "DEST": str(self.tmp / "opt"),
            "DATA_DIR": str(self.tmp / "data"),
            "DTN_MIGRATE_CONF_DIR": str(self.conf_dir),
            "DTN_MIGRATE_PEERS": peers,
            "DTN_MIGRATE_AGENT_HOST": "dtn-east",
            "STACK_USER": subprocess.run(
                ["id", "-un"], capture_output=True, text=True).stdout.strip(),
            "SERVICE_HOST": "192.0.2.10",
            "SERVICE_PROTOCOL": "http",
            "SERVICE_LISTEN_ADDRESS": "0.0.0.0",
            "SERVICE_PASSWORD": "secretsecret",
            "SERVICE_DOMAIN_NAME": "Default",
            "SERVICE_PROJECT_NAME": "service",
            "SERVICE_TIMEOUT": "60",
            "KEYSTONE_SERVICE_URI": "http://192.0.2.10/identity",
            "REGION_NAME": "RegionOne",
            "ENABLE_DEBUG_LOG_LEVEL": "True",
            "ENABLED_SERVICES": "key,g-api",
        }
        env.update(extra_env)
        (self.tmp / "data").mkdir(exist_ok=True)
        script = ["set -e",
                  "source %s" % shlex.quote(str(self.tmp / "fake.sh"))]
        if disabled:
            script.append("disable_service %s" % " ".join(disabled))
        script.append("source %s" % shlex.quote(str(SETTINGS)))
        for phase in phases:
            script.append("source %s %s" % (shlex.quote(str(PLUGIN)), phase))
        proc = subprocess.run(["bash", "-c", "\n".join(script)], env=env,
                              capture_output=True, text=True, timeout=300)
        if check:
            self.assertEqual(0, proc.returncode, proc.stdout + proc.stderr)
        return [line.split(" ", 1) for line in
                self.calls.read_text().splitlines()]

    def load_conf(self):
        conf = cfg.ConfigOpts()
        dtn_conf.register_opts(conf)
        log.register_options(conf)
        conf.register_opts(messaging_opts.list_opts()[0][1])
        # What keystoneauth registers once it loads auth_type = password.
        conf.register_opts(
            ks_loading.get_auth_plugin_conf_options("password"),
            group="glance")
        conf([], project="dtn-migrate", default_config_files=[
            str(self.conf_dir / "dtn-migrate.conf")])
        peer_conf.register_opts(conf)
        return conf


class TestPluginPhases(PluginPhasesBase):
    """plugin.sh's phases on the services of dtn-migrate itself."""

    def test_stack_on_a_controller_and_dtn(self):
        calls = self.run_phases(
            ["stack install", "stack post-config", "stack extra"],
            peers="west=198.51.100.7:47200 south=198.51.100.9")
        names = [c[0] for c in calls]
        args = {c[0]: c[1] if len(c) > 1 else "" for c in calls}

        conf = self.load_conf()
        self.assertEqual("dtn-east", conf.engine.agent_host)
        self.assertEqual(["west", "south"], conf.agent.peers)
        self.assertEqual("198.51.100.7", conf["peer:west"].address)
        self.assertEqual(47200, conf["peer:west"].port)
        self.assertEqual(47100, conf["peer:south"].port)
        self.assertEqual("0123456789abcdef0123456789abcdef",
                         conf["peer:west"].import_project)
        for name in ("west", "south"):
            key = pathlib.Path(conf["peer:%s" % name].key_file)
            self.assertEqual(0o600, key.stat().st_mode & 0o777)
            self.assertEqual(64, len(key.read_text().strip()))
        self.assertEqual(str(self.tmp / "data" / "dtn-migrate" / "staging"),
                         conf.agent.staging_root)
        self.assertEqual("keystone", conf.api.auth_strategy)
        self.assertEqual(["public"], conf.glance.valid_interfaces)
        self.assertEqual("RegionOne", conf.glance.region_name)
        self.assertEqual("password", conf.glance.auth_type)
        self.assertEqual("http://192.0.2.10/identity", conf.glance.auth_url)
        self.assertEqual("service", conf.glance.project_name)
        self.assertTrue(conf.debug)
        self.assertEqual("rabbit://stack:x@127.0.0.1/", conf.transport_url)

        # db sync ran for real on the database DevStack made.
        db = self.tmp / "data" / "dtn_migrate.sqlite"
        self.assertEqual("sqlite:///%s" % db, conf.database.connection)
        with sqlite3.connect(db) as c:
            tables = {r[0] for r in c.execute(
                "SELECT name FROM sqlite_master WHERE type='table'")}
        self.assertIn("migrations", tables)
        self.assertIn("migration_events", tables)
        self.assertLess(names.index("recreate_database"),
                        names.index("run_process"))

        self.assertIn("create_service_user", names)
        self.assertEqual("dtn-migrate admin", args["create_service_user"])
        self.assertEqual(
            "dtn-migrate dtn-migration Image migration between clouds",
            args["get_or_create_service"])
        url = "http://192.0.2.10/dtn-migration"
        self.assertEqual("svc-1 RegionOne %s %s %s" % (url, url, url),
                         args["get_or_create_endpoint"])
        self.assertEqual(
            "%s dtn_migrate.api.wsgi:application /dtn-migration "
            " dtn-migrate-api" % (self.conf_dir /
                                  "dtn-migrate-api-uwsgi.ini"),
            args["write_uwsgi_config"])
        started = {c[1].split(" ", 1)[0]: c[1].split(" ", 1)[1]
                   for c in calls if c[0] == "run_process"}
        self.assertEqual({"dtn-agent", "dtn-engine", "dtn-api"},
                         set(started))
        conf_arg = "--config-file %s" % (self.conf_dir / "dtn-migrate.conf")
        self.assertEqual("%s/dtn-migrate-agent %s" % (self.bin, conf_arg),
                         started["dtn-agent"])
        self.assertEqual("%s/dtn-migrate-engine %s" % (self.bin, conf_arg),
                         started["dtn-engine"])
        self.assertIn("--ini %s" % (self.conf_dir /
                                    "dtn-migrate-api-uwsgi.ini"),
                      started["dtn-api"])
        self.assertEqual("60 %s" % url, args["wait_for_service"])
        self.assertNotIn("die", names)

    def test_notifications_of_the_engine_and_glance(self):
        # Continuous protection policies need Glance's notifications on
        # the bus; the engine's own (RPO breaches) go there too.
        glance_conf = self.tmp / "glance-api.conf"
        self.run_phases(["stack install", "stack post-config"],
                        GLANCE_API_CONF=str(glance_conf))
        for path in (glance_conf, self.conf_dir / "dtn-migrate.conf"):
            parser = configparser.ConfigParser()
            parser.read(path)
            self.assertEqual("messagingv2", parser.get(
                "oslo_messaging_notifications", "driver"), path)

    def test_controller_without_agent(self):
        calls = self.run_phases(
            ["stack install", "stack post-config", "stack extra"],
            disabled=["dtn-agent"])
        started = [c[1].split(" ", 1)[0] for c in calls
                   if c[0] == "run_process"]
        self.assertEqual(["dtn-engine", "dtn-api"], started)
        self.assertIn(["create_service_user", "dtn-migrate admin"], calls)
        self.assertNotIn(["install_package", "python3-pyverbs"], calls)
        self.assertEqual([], self.load_conf().agent.peers)

    def test_dtn_only_node(self):
        calls = self.run_phases(
            ["stack install", "stack post-config", "stack extra"],
            disabled=["dtn-api", "dtn-engine"])
        names = [c[0] for c in calls]
        started = [c[1].split(" ", 1)[0] for c in calls
                   if c[0] == "run_process"]
        self.assertEqual(["dtn-agent"], started)
        # No API: no uwsgi, no catalog entry; no engine: no database, no
        # service user.
        for absent in ("install_apache_uwsgi", "write_uwsgi_config",
                       "get_or_create_service", "recreate_database",
                       "wait_for_service", "create_service_user"):
            self.assertNotIn(absent, names)
        self.assertIn(["install_package", "python3-pyverbs"], calls)

    # Issue 36 item 13.
    def test_tls_is_on_with_a_self_signed_certificate(self):
        self.run_phases(["stack post-config"],
                        disabled=["dtn-api", "dtn-engine"],
                        peers="west=198.51.100.7", HOST_IP="192.0.2.10",
                        DTN_MIGRATE_TLS_NAMES="dtn-east.example 2001:db8::7")
        conf = self.load_conf()
        tls_dir = self.conf_dir / "tls"
        self.assertEqual(str(tls_dir / "dtn.crt"), conf.tls.cert_file)
        self.assertEqual(str(tls_dir / "dtn.key"), conf.tls.key_file)
        self.assertEqual(str(tls_dir / "peers.pem"), conf.tls.ca_file)
        self.assertTrue(conf["peer:west"].tls)
        self.assertTrue(conf["peer:west"].require_tls)
        key = pathlib.Path(conf.tls.key_file)
        self.assertEqual(0o600, key.stat().st_mode & 0o777)
        cert = pathlib.Path(conf.tls.cert_file).read_text()
        self.assertEqual(cert, pathlib.Path(conf.tls.ca_file).read_text())
        text = subprocess.run(
            ["openssl", "x509", "-noout", "-text", "-in", conf.tls.cert_file],
            capture_output=True, text=True, check=True).stdout
        for name in ("DNS:%s" % socket.gethostname(),
                     "IP Address:192.0.2.10", "DNS:dtn-east.example",
                     "IP Address:2001:DB8:0:0:0:0:0:7"):
            self.assertIn(name, text)
        # The agent's TLS contexts take them, and a client that trusts
        # the bundle completes a mutual TLS handshake with the sink.
        server = auth.server_context(conf.tls.cert_file, conf.tls.key_file,
                                     conf.tls.ca_file)
        client = auth.client_context(conf.tls.ca_file, conf.tls.cert_file,
                                     conf.tls.key_file)
        a, b = socket.socketpair()
        self.addCleanup(a.close)
        self.addCleanup(b.close)
        done = []
        t = threading.Thread(target=lambda: done.append(
            server.wrap_socket(a, server_side=True)))
        t.start()
        tls = client.wrap_socket(b, server_hostname="dtn-east.example")
        t.join(10)
        self.assertEqual(1, len(done))
        self.assertIsNotNone(done[0].getpeercert())
        self.assertIsNotNone(tls.getpeercert())
        # A second run keeps them (the peers hold copies).
        self.run_phases(["stack post-config"],
                        disabled=["dtn-api", "dtn-engine"],
                        peers="west=198.51.100.7")
        self.assertEqual(cert, pathlib.Path(conf.tls.cert_file).read_text())
        self.assertEqual([], peers.check_key_files(self.load_conf()))

    def test_tls_off(self):
        self.run_phases(["stack post-config"],
                        disabled=["dtn-api", "dtn-engine"],
                        peers="west=198.51.100.7", DTN_MIGRATE_TLS="False")
        conf = self.load_conf()
        self.assertIsNone(conf.tls.cert_file)
        self.assertFalse(conf["peer:west"].tls)
        self.assertFalse((self.conf_dir / "tls").exists())

    def test_engine_without_api(self):
        calls = self.run_phases(["stack post-config", "stack extra"],
                                disabled=["dtn-api", "dtn-agent"])
        names = [c[0] for c in calls]
        # The engine's Glance credentials need the user; the catalog
        # entry is the API's.
        self.assertIn(["create_service_user", "dtn-migrate admin"], calls)
        self.assertNotIn("get_or_create_service", names)
        self.assertIn("recreate_database", names)
        self.assertEqual(
            ["dtn-engine"],
            [c[1].split(" ", 1)[0] for c in calls if c[0] == "run_process"])
        conf = self.load_conf()
        self.assertEqual("dtn-migrate", conf.glance.username)

    def started(self, calls):
        """The services run_process started, in order, with their
        commands.
        """
        return [c[1].split(" ", 1) for c in calls if c[0] == "run_process"]

    def test_three_engines_on_a_zookeeper_jobboard(self):
        stack = ["stack install", "stack post-config", "stack extra"]
        calls = self.run_phases(stack, DTN_MIGRATE_ENGINE_COUNT="3")
        self.assertIn(["install_package", "zookeeperd"], calls)
        self.assertIn(["start_service", "zookeeper"], calls)
        conf = self.load_conf()
        self.assertTrue(conf.task_flow.jobboard_enabled)
        self.assertEqual("zookeeper_taskflow_driver",
                         conf.task_flow.jobboard_backend_driver)
        self.assertEqual(["192.0.2.10"], conf.task_flow.jobboard_backend_hosts)
        started = self.started(calls)
        self.assertEqual(["dtn-agent", "dtn-engine", "dtn-engine-2",
                          "dtn-engine-3", "dtn-api"],
                         [name for name, _command in started])
        hosts = set()
        for name, command in started[1:4]:
            files = command.split("--config-file ")[1:]
            self.assertEqual(str(self.conf_dir / "dtn-migrate.conf"),
                             files[0].strip())
            parser = configparser.RawConfigParser()
            parser.read([f.strip() for f in files])
            hosts.add(parser.get("DEFAULT", "host"))
        self.assertEqual(3, len(hosts), hosts)

        calls = self.run_phases(["unstack"], DTN_MIGRATE_ENGINE_COUNT="3")
        self.assertEqual(
            {"dtn-api", "dtn-agent", "dtn-engine", "dtn-engine-2",
             "dtn-engine-3"},
            {c[1] for c in calls if c[0] == "stop_process"})

    def test_redis_on_other_hosts(self):
        calls = self.run_phases(
            ["stack install", "stack post-config"],
            DTN_MIGRATE_JOBBOARD="redis",
            DTN_MIGRATE_JOBBOARD_HOSTS="192.0.2.21 192.0.2.22")
        names = [c[0] for c in calls]
        self.assertNotIn("start_service", names)
        self.assertNotIn(["install_package", "redis-server"], calls)
        conf = self.load_conf()
        self.assertEqual("redis_taskflow_driver",
                         conf.task_flow.jobboard_backend_driver)
        self.assertEqual(["192.0.2.21", "192.0.2.22"],
                         conf.task_flow.jobboard_backend_hosts)

    def test_one_engine_without_a_jobboard(self):
        calls = self.run_phases(["stack install", "stack post-config"],
                                DTN_MIGRATE_JOBBOARD="none")
        self.assertNotIn(["install_package", "zookeeperd"], calls)
        self.assertFalse(self.load_conf().task_flow.jobboard_enabled)
        # More than one engine needs a backend: the stack stops, saying
        # so.
        calls = self.run_phases(["stack post-config"], check=False,
                                DTN_MIGRATE_JOBBOARD="none",
                                DTN_MIGRATE_ENGINE_COUNT="2")
        [die] = [c[1] for c in calls if c[0] == "die"]
        self.assertIn("DTN_MIGRATE_ENGINE_COUNT=2 needs a "
                      "DTN_MIGRATE_JOBBOARD", die)

    def test_no_engine_here_no_engines(self):
        calls = self.run_phases(
            ["stack install", "stack post-config", "stack extra"],
            disabled=["dtn-engine"], DTN_MIGRATE_ENGINE_COUNT="3")
        self.assertEqual(["dtn-agent", "dtn-api"],
                         [name for name, _ in self.started(calls)])
        self.assertNotIn(["install_package", "zookeeperd"], calls)

    def test_api_on_its_own_port(self):
        calls = self.run_phases(["stack post-config"],
                                DTN_MIGRATE_API_PORT="9480")
        args = {c[0]: c[1] for c in calls if len(c) > 1}
        url = "http://192.0.2.10:9480"
        self.assertEqual("svc-1 RegionOne %s %s %s" % (url, url, url),
                         args["get_or_create_endpoint"])
        self.assertTrue(args["write_uwsgi_config"].endswith(
            "/dtn-migration 0.0.0.0:9480 dtn-migrate-api"))

    def test_unstack_and_clean(self):
        self.run_phases(["stack post-config"], peers="west=198.51.100.7")
        self.assertTrue((self.conf_dir / "dtn-migrate.conf").exists())
        self.calls.unlink()
        calls = self.run_phases(["unstack", "clean"])
        self.assertEqual(
            [["stop_process", "dtn-api"], ["stop_process", "dtn-engine"],
             ["stop_process", "dtn-agent"]],
            [c for c in calls if c[0] == "stop_process"])
        self.assertIn(["remove_uwsgi_config", "%s dtn-migrate-api" % (
            self.conf_dir / "dtn-migrate-api-uwsgi.ini")], calls)
        self.assertFalse(self.conf_dir.exists())
        self.assertFalse(
            (self.tmp / "data" / "dtn-migrate" / "staging").exists())
        self.assertFalse(
            (self.tmp / "data" / "dtn-migrate" / "state").exists())


#: The files the dashboard installer puts into Horizon's local dirs
#: (tests/unit/dashboard/test_install.py checks the list itself).
HORIZON_FILES = sorted(os.path.basename(path)
                       for path, _ in dashboard_install.plugin_files())
HORIZON_SNIPPET = "_1800_dtn_migrate_settings.py"


class TestPluginHorizon(PluginPhasesBase):
    """The panel is installed into $HORIZON_DIR where horizon is enabled
    (by the real installer), at post-config, and removed on clean.
    """

    def setUp(self):
        super().setUp()
        self.horizon = self.tmp / "horizon"
        self.local = self.horizon / "openstack_dashboard" / "local"
        (self.local / "enabled").mkdir(parents=True)

    def installed(self):
        return sorted(p.name for p in self.local.rglob("*_dtn_migrate_*"))

    def test_horizon_gets_the_panel_at_post_config(self):
        calls = self.run_phases(
            ["stack install"], ENABLED_SERVICES="key,g-api,horizon",
            HORIZON_DIR=str(self.horizon))
        self.assertEqual([], self.installed())
        self.assertNotIn(["setup_develop", "%s dashboard" % (
            self.tmp / "opt" / "dtn-migrate")], calls)
        calls = self.run_phases(
            ["stack post-config"], ENABLED_SERVICES="key,g-api,horizon",
            HORIZON_DIR=str(self.horizon))
        self.assertIn(["setup_develop", "%s dashboard" % (
            self.tmp / "opt" / "dtn-migrate")], calls)
        self.assertEqual(HORIZON_FILES, self.installed())
        self.assertTrue(
            (self.local / "local_settings.d" / HORIZON_SNIPPET).exists())

    def test_horizon_only_node(self):
        calls = self.run_phases(
            ["stack install", "stack post-config", "stack extra"],
            disabled=["dtn-api", "dtn-engine", "dtn-agent"],
            ENABLED_SERVICES="key,horizon", HORIZON_DIR=str(self.horizon))
        names = [c[0] for c in calls]
        self.assertEqual(HORIZON_FILES, self.installed())
        for absent in ("run_process", "recreate_database",
                       "get_or_create_service"):
            self.assertNotIn(absent, names)

    def test_no_horizon_no_panel(self):
        calls = self.run_phases(
            ["stack install", "stack post-config"],
            HORIZON_DIR=str(self.horizon))
        self.assertEqual([], self.installed())
        self.assertNotIn("dashboard", " ".join(" ".join(c) for c in calls))

    def test_clean_removes_the_panel(self):
        self.run_phases(["stack post-config"],
                        ENABLED_SERVICES="key,g-api,horizon",
                        HORIZON_DIR=str(self.horizon))
        self.assertNotEqual([], self.installed())
        self.run_phases(["unstack"], ENABLED_SERVICES="key,g-api,horizon",
                        HORIZON_DIR=str(self.horizon))
        self.assertNotEqual([], self.installed())
        self.run_phases(["clean"], ENABLED_SERVICES="key,g-api,horizon",
                        HORIZON_DIR=str(self.horizon))
        self.assertEqual([], self.installed())
        # Clean without a Horizon checkout does not fail.
        self.run_phases(["clean"], ENABLED_SERVICES="key,g-api,horizon",
                        HORIZON_DIR=str(self.tmp / "nowhere"))
