"""Two real clouds with their REST APIs.

Each cloud has its own Keystone (the personas of
:func:`devcloud.api.personas`), a Glance behind it, a DTN
agent, an engine and ``dtn-migrate-api`` under uwsgi, all on the cloud's
own RabbitMQ vhost; engine and API share the cloud's ``[database]``.
Cloud A's agent sends at ``RATE`` bytes/s, so that a migration lasts
long enough to be cancelled or to outlive a restart.  The clouds of
:func:`start_pair` belong to a :class:`devcloud.pair.Scope` (a test
class's, a benchmark's).
"""

import os
import subprocess
import sys

from devcloud import api as devcloud_api
from devcloud import pair
from devcloud import relay as relay_mod

MiB = 1 << 20
MANAGE = os.path.join(os.path.dirname(sys.executable), "dtn-migrate-manage")
#: Cloud A's DTN agent's send rate (bytes/s, [transfer] rate_limit).
RATE = 8 * MiB


class ApiCloud(pair.Cloud):
    """A cloud of pair.Cloud plus its Keystone personas, a shared
    ``[database]`` and dtn-migrate-api.
    """

    def __init__(self, case, name, peer_name, database, notifications=False,
                 relay=False, extra=None, **kwargs):
        """NOTIFICATIONS: Glance publishes its notifications on the
        cloud's bus.  RELAY: the agent reaches its peer through a
        devcloud/relay.py ``Relay`` (``self.relay``) that can cut the DTN
        link.  EXTRA: more engine configuration.
        """
        super().__init__(case, name, peer_name, **kwargs)
        self.database = database
        if notifications:
            self.notifications_url = self.broker.url()
        self.use_relay = relay
        self.extra = extra or {}

    def peer_address(self, peer):
        address = super().peer_address(peer)
        if not self.use_relay:
            return address
        self.relay = relay_mod.Relay(address)
        self.case.addCleanup(self.relay.close)
        return ("127.0.0.1", self.relay.port)

    def glance_auth(self):
        # The engine reads and writes every project's images: the
        # service user (admin and service roles), as deployed.
        user = self.keystone.service_user(devcloud_api.SERVICE_USER)
        return {"auth_type": "password",
                "auth_url": self.keystone.auth_url,
                "username": user["username"],
                "password": user["password"],
                "project_name": user["project_name"],
                "user_domain_id": "default",
                "project_domain_id": "default",
                "region_name": self.glance.region,
                "valid_interfaces": "public",
                "cloud_name": self.name, "retry_max_delay": 5}

    def engine_extra(self):
        return dict(self.extra, database={"connection": self.database})

    def start_engine(self):
        self.engine = pair.Engine(
            self.case.workdir, self.engine_name, self.broker.url(),
            self.agent_name, self.glance_auth(), self.staging,
            self.database, extra=self.engine_extra())
        self.case.addCleanup(self.engine.discard)
        subprocess.run([MANAGE, "--config-file", self.engine.conf, "db",
                        "sync"], check=True, capture_output=True,
                       timeout=120)
        self.engine.start()

    def start_api(self, threads=4):
        self.api = devcloud_api.ApiServer(
            self.case.workdir, self.keystone, self.broker.url(),
            self.database, name=self.name, region=self.glance.region,
            extra_conf={"api": {"engine_timeout": 30}}, threads=threads)
        self.case.addCleanup(self.api.close)
        self.api.start()

    def env(self, persona, **kwargs):
        """The ``openstack`` environment of PERSONA on this cloud."""
        return self.api.openstack_env(self.users[persona], **kwargs)


def start_pair(scope, database_a=None, rate=RATE, api_threads=4,
               prepare=None, **cloud_kwargs):
    """Start clouds A and B of SCOPE (a :class:`devcloud.pair.Scope`); A's
    database is DATABASE_A (default SQLite), its agent sends at RATE;
    CLOUD_KWARGS go to both clouds (see :class:`ApiCloud`).  PREPARE,
    when given, is called with (a, b) once both clouds' personas and
    agents exist, before the engines start (to add engine configuration
    that names their projects, in ``cloud.extra``).  Returns (a, b).
    """
    brokers = scope.brokers(2)
    ks = {n: scope.keystone(name="ks-%s" % n, region="Region%s"
                            % n.upper()) for n in ("a", "b")}
    a = ApiCloud(scope, "a", "b", database_a or "sqlite:///%s/a.sqlite"
                 % scope.workdir, keystone=ks["a"], broker=brokers[0],
                 transfer={"rate_limit": rate}, **cloud_kwargs)
    b = ApiCloud(scope, "b", "a", "sqlite:///%s/b.sqlite"
                 % scope.workdir, keystone=ks["b"], broker=brokers[1],
                 **cloud_kwargs)
    for c in (a, b):
        scope.addCleanup(c.bus.close)
        c.users = devcloud_api.personas(c.keystone)
        c.start_glance()
        c.start_staging()
    a.make_agent(b)
    b.make_agent(a)
    pair.start_agents((a, b))
    if prepare is not None:
        prepare(a, b)
    for c in (a, b):
        c.start_engine()
    for c in (a, b):
        c.wait_ready()
        c.start_api(threads=api_threads)
    scope.addCleanup(pair.in_parallel, [
        a.engine.discard, b.engine.discard, a.agent.discard,
        b.agent.discard])
    return a, b
