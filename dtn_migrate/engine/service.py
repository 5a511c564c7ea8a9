"""The engine service: persistence, migrations and the RPC server."""

import threading

import oslo_messaging as messaging
from oslo_log import log as logging
from oslo_service import service

from dtn_migrate.engine import manager
from dtn_migrate.engine import migrations
from dtn_migrate.engine import persistence
from dtn_migrate.engine import resources
from dtn_migrate.engine import rpcapi
from dtn_migrate.image import glance
from dtn_migrate import rpc

LOG = logging.getLogger(__name__)


class EngineService(service.Service):
    def __init__(self, conf, images=None, agent=None, backend=None,
                 transport=None):
        """``transport``: RPC and notification transport (default: the
        ones of ``rpc.init``).
        """
        super().__init__()
        self.conf = conf
        self.transport = transport
        self.host = conf.host
        self.store = persistence.Store(conf.engine.persistence_connection)
        if images is None:
            images = glance.ImageService.from_conf(conf, 'glance')
        self.resources = resources.Resources(conf, images, agent, backend,
                                             transport=transport)
        publisher = 'dtn-migrate-engine.%s' % self.host
        if transport is None:
            notifier = rpc.get_notifier(publisher)
        else:
            notifier = messaging.Notifier(transport, publisher_id=publisher)
        self.migrations = migrations.Migrations(conf, self.store,
                                                self.resources, notifier)
        self.manager = manager.EngineManager(self.host, self.migrations)
        self.rpcserver = None
        self._stopped = threading.Event()

    def start(self):
        super().start()
        target = messaging.Target(topic=rpcapi.TOPIC, server=self.host)
        self.rpcserver = rpc.get_server(target, [self.manager],
                                        transport=self.transport)
        self.rpcserver.start()
        resumed = self.migrations.resume_unfinished()
        LOG.info("dtn-migrate-engine %s ready (agent %s); %d migrations "
                 "resumed", self.host, self.conf.engine.agent_host,
                 len(resumed))
        # Timers of the service's thread group (a failed run is logged
        # and the timer goes on).
        interval = self.conf.engine.progress_interval
        self.tg.add_timer_args(interval, self.migrations.report_progress,
                               initial_delay=interval,
                               stop_on_exception=False)
        self.tg.add_timer_args(self.conf.engine.reconcile_interval,
                               self.migrations.reconcile, initial_delay=1.0,
                               stop_on_exception=False)

    def stop(self, graceful=True):
        """Stop serving; running flows stay 'running' in the database and
        resume at the next start.
        """
        if self._stopped.is_set():
            return
        LOG.info("dtn-migrate-engine %s stopping", self.host)
        self._stopped.set()
        # A timer's run may wait for the agent (rpc_timeout): not joined.
        self.tg.stop_timers()
        if self.rpcserver is not None:
            self.rpcserver.stop()
            self.rpcserver.wait()
        super().stop(graceful)
        self.resources.close()
        self.store.close()

    def wait(self):
        self._stopped.wait()
