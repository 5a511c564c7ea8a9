"""Running a dtn-migrate service process (agent or engine).

Import this only after ``oslo_service.backend.init_backend`` (the console
entry points do it first thing).
"""

import sys

from oslo_log import log as logging
from oslo_service import service

from dtn_migrate import config
from dtn_migrate import exception
from dtn_migrate import rpc

CONF = config.CONF
LOG = logging.getLogger(__name__)


def serve(make_server, argv=None):
    """Parse the command line, set up logging and the bus, build the
    service with ``make_server(CONF)`` and run it until it stops.  A
    configuration error exits with status 2 and its message.
    """
    config.parse_args(argv or sys.argv)
    logging.setup(CONF, 'dtn-migrate')
    rpc.init(CONF)
    try:
        server = make_server(CONF)
    except exception.DtnMigrateException as exc:
        LOG.error("%s", exc)
        sys.exit(2)
    launcher = service.launch(CONF, server, workers=1, no_fork=True)
    launcher.wait()
    rpc.cleanup()
