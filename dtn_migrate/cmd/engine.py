"""Console entry point: dtn-migrate-engine."""

from oslo_service import backend

backend.init_backend(backend.BackendType.THREADING)

from dtn_migrate.engine import service as engine_service  # noqa: E402
from dtn_migrate import service  # noqa: E402


def main():
    service.serve(engine_service.EngineService)
