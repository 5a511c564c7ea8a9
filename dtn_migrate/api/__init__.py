"""dtn-migrate-api: the v1 REST API of dtn-migrate (WSGI)."""
