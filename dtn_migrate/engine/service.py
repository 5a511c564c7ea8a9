"""The engine service: database, migrations and the RPC server."""

import threading

import oslo_messaging as messaging
from oslo_log import log as logging
from oslo_service import service

from dtn_migrate.coordination import leader
from dtn_migrate.db import api as db_api
from dtn_migrate.engine import jobs
from dtn_migrate.engine import lock
from dtn_migrate.engine import manager
from dtn_migrate.engine import migrations
from dtn_migrate.engine import persistence
from dtn_migrate.engine.protection import drills
from dtn_migrate.engine.protection import failover
from dtn_migrate.engine.protection import listener as listener_mod
from dtn_migrate.engine.protection import sync as protection
from dtn_migrate.engine import resources
from dtn_migrate.engine import rpcapi
from dtn_migrate import exception
from dtn_migrate.image import glance
from dtn_migrate import rpc

LOG = logging.getLogger(__name__)


#: Seconds an engine that shares its database waits for another one's
#: schema upgrade.
SHARED_SYNC_TIMEOUT = 120.0


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
        #: Set when another engine took the database's lock.
        self.lock_lost = False
        #: Engines share the migrations through a jobboard, or one holds
        #: the database's lock.
        self.shared = conf.task_flow.jobboard_enabled
        # Before anything touches the database: a second engine on it
        # refuses to start (PersistenceInUse).  Engines that share it
        # hold the lock only while one brings the schema up to date.
        connection = db_api.connection_url(conf)
        self.lock = lock.EngineLock(
            connection, conf.engine.lock_timeout if not self.shared
            else max(conf.engine.lock_timeout, SHARED_SYNC_TIMEOUT))
        self.lock.acquire()
        try:
            # Brings the schema up to date (as dtn-migrate-manage db
            # sync does).
            self.store = persistence.Store(conf)
        except BaseException:
            self.lock.release()
            raise
        if self.shared:
            self.lock.release()
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
        #: The election of the engine that runs the cloud's timers (None:
        #: this engine is the cloud's only one).
        self.leadership = None
        if self.shared:
            self.migrations.jobs = jobs.Jobs(conf, self.migrations,
                                             self.host)
            self.leadership = leader.Leadership(leader.backend_url(conf),
                                                self.host)
            self.migrations.holding = self.leadership.holding
        self.protection = protection.Protection(
            conf, self.store.db, self.migrations, notifier)
        self.drills = drills.Drills(conf, self.store.db, self.resources,
                                    notifier)
        if self.shared:
            # Drills are jobs too.
            self.drills.jobs = self.migrations.jobs
            self.migrations.jobs.drills = self.drills
        self.manager = manager.EngineManager(
            self.host, self.migrations, self.protection, self.drills,
            failover.Failover(self.protection))
        self.rpcserver = None
        self.listener = None
        self._stopped = threading.Event()

    def start(self):
        super().start()
        target = messaging.Target(topic=rpcapi.TOPIC, server=self.host)
        self.rpcserver = rpc.get_server(target, [self.manager],
                                        transport=self.transport)
        self.rpcserver.start()
        if self.shared:
            self.migrations.jobs.start()
            self.leadership.start()
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
        if self.shared:
            # Jobs a backend lost (a Redis restart): the leader posts them
            # again.
            self.tg.add_timer_args(
                self.conf.engine.reconcile_interval,
                self._leading(self.migrations.jobs.orphans),
                initial_delay=self.conf.engine.reconcile_interval,
                stop_on_exception=False)
        interval = self.conf.engine.database_check_interval
        self.tg.add_timer_args(interval, self.check_database,
                               initial_delay=interval,
                               stop_on_exception=False)
        self.start_protection()

    def start_protection(self):
        """Glance's notifications, the reconciliation scan (now, then
        every scan_interval), the recovery points and mirror deletions.
        """
        group = self.conf.protection
        if not self.shared:
            # Shared: a drill left running is its job's, which another
            # engine claims when this one's claim ends.
            try:
                self.drills.recover()
            except exception.DtnMigrateException as exc:
                LOG.warning("drills left running not recovered: %s", exc)
        self.protection.start()
        if group.listen:
            transport = self.transport or rpc.NOTIFICATION_TRANSPORT
            self.listener = listener_mod.get_listener(
                self.conf, transport, self.protection)
            self.listener.start()
            LOG.info("following Glance's notifications (exchange %s, "
                     "topics %s, pool %s)", group.glance_exchange,
                     ", ".join(group.notification_topics),
                     group.listener_pool)
        self.tg.add_timer_args(group.scan_interval,
                               self._leading(self.protection.request_scan),
                               initial_delay=1.0, stop_on_exception=False)
        self.tg.add_timer_args(group.rpo_interval,
                               self._leading(self.protection.check_rpo),
                               initial_delay=group.rpo_interval,
                               stop_on_exception=False)
        # Its own timer: a peer slow to answer never delays the grades.
        self.tg.add_timer_args(group.rpo_interval,
                               self._leading(self.protection.send_deletions),
                               initial_delay=group.rpo_interval,
                               stop_on_exception=False)

    def _leading(self, call):
        """``call``, run only by the engine that leads the cloud's."""
        if self.leadership is None:
            return call

        def run():
            if self.leadership.is_leader():
                return call()
        return run

    def check_database(self):
        """Take the lock again after a database restart, and reconcile
        the migrations a database outage stranded.  Another engine that
        took the lock meanwhile stops this one.
        """
        try:
            if not self.shared:
                self.lock.check()
        except exception.PersistenceInUse as exc:
            LOG.critical("%s This engine stops.", exc)
            self.lock_lost = True
            threading.Thread(target=self.stop, name="lock-lost").start()
            return
        self.migrations.recover()

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
        if self.shared:
            # Its flows stop here and go back to the board.
            self.migrations.jobs.stop()
            self.leadership.stop()
        for server in (self.listener, self.rpcserver):
            if server is not None:
                server.stop()
                server.wait()
        self.protection.stop()
        super().stop(graceful)
        self.resources.close()
        self.store.close()
        if not self.shared:
            self.lock.release()

    def wait(self):
        self._stopped.wait()
