"""JSON error responses: ``{"error": {"code", "title", "message"}}``."""

from oslo_serialization import jsonutils
import webob
import webob.exc

JSON = 'application/json'


def title(code):
    cls = webob.exc.status_map.get(code)
    if cls is not None:
        return cls.title
    return 'Error'


def explanation(code):
    cls = webob.exc.status_map.get(code)
    return getattr(cls, 'explanation', '') or title(code)


def response(code, message, headers=None):
    """A webob Response for error ``code`` saying ``message``."""
    body = {'error': {'code': code, 'title': title(code),
                      'message': message}}
    resp = webob.Response(status=code, content_type=JSON, charset='UTF-8')
    resp.body = jsonutils.dump_as_bytes(body)
    for name, value in (headers or {}).items():
        resp.headers[name] = value
    return resp
