"""JSON Schemas of the v1 API: request bodies and query strings (checked
by :mod:`dtn_migrate.api.validation`) and responses.

The OpenAPI document (:mod:`dtn_migrate.api.openapi`) is built from
these same schemas.
"""
