"""Console entry point: dtn-migrate-transfer (standalone engine CLI)."""

import sys

from dtn_migrate.transfer import cli


def main():
    sys.exit(cli.main())
