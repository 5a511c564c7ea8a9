"""Handlers of the v1 resources: ``handler(api, req, **url_vars)`` ->
webob Response.
"""
