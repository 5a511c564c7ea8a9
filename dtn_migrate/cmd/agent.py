"""Console entry point: dtn-migrate-agent."""

import sys

from oslo_service import backend

backend.init_backend(backend.BackendType.THREADING)

from oslo_log import log as logging  # noqa: E402
from oslo_service import service  # noqa: E402

from dtn_migrate.agent import service as agent_service  # noqa: E402
from dtn_migrate import config  # noqa: E402
from dtn_migrate import exception  # noqa: E402
from dtn_migrate import rpc  # noqa: E402

CONF = config.CONF
LOG = logging.getLogger(__name__)


def main():
    config.parse_args(sys.argv)
    logging.setup(CONF, 'dtn-migrate')
    rpc.init(CONF)
    try:
        server = agent_service.AgentService(CONF)
    except exception.DtnMigrateException as exc:
        LOG.error("%s", exc)
        sys.exit(2)
    launcher = service.launch(CONF, server, workers=1, no_fork=True)
    launcher.wait()
    rpc.cleanup()
