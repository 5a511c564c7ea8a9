"""Console entry point: dtn-migrate-engine."""

import sys

from oslo_service import backend

backend.init_backend(backend.BackendType.THREADING)

from dtn_migrate.engine import service as engine_service  # noqa: E402
from dtn_migrate import service  # noqa: E402


def main():
    made = []

    def make(conf):
        made.append(engine_service.EngineService(conf))
        return made[-1]
    service.serve(make)
    if made and made[0].lock_lost:
        sys.exit(3)     # another engine took the persistence database
