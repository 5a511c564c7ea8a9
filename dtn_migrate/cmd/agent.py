"""Console entry point: dtn-migrate-agent."""

from oslo_service import backend

backend.init_backend(backend.BackendType.THREADING)

from dtn_migrate.agent import service as agent_service  # noqa: E402
from dtn_migrate import service  # noqa: E402


def main():
    service.serve(agent_service.AgentService)
