"""Errors of the dtn-migration API client.

HTTP errors are ``Http<Reason>`` (HttpNotFound, HttpConflict...), all
subclasses of HttpError with ``http_status``; the names differ from the
service's own exceptions (dtn_migrate.exception) on purpose.

Every failure the client reports is a :class:`ClientException`: HTTP
errors carry the status and the message from the API's error body
(``{"error": {"code", "title", "message"}}``); failures to reach the API
at all (no endpoint in the catalog, connection refused, timeout) carry
no status.
"""


class ClientException(Exception):
    """A request to the dtn-migration API failed."""

    #: The HTTP status of the answer, or None when there was none.
    http_status = None
    title = "Error"

    def __init__(self, message=None, http_status=None, title=None,
                 request_id=None, url=None, method=None):
        if http_status is not None:
            self.http_status = http_status
        self.title = title or self.title
        self.message = message or self.title
        self.request_id = request_id
        self.url = url
        self.method = method
        super().__init__(self.message)

    def __str__(self):
        if self.http_status is None:
            return self.message
        return "%s (HTTP %s)" % (self.message, self.http_status)


class CommunicationError(ClientException):
    """The API could not be reached (endpoint, connection, timeout)."""
    title = "Communication error"


class EndpointNotFound(CommunicationError):
    """No dtn-migration endpoint in the service catalog."""
    title = "No dtn-migration endpoint"


class WaitTimeout(ClientException):
    """Migrations did not reach a final state in the time given."""
    title = "Timed out"


class InvalidResponse(ClientException):
    """The API answered with a body the client cannot read."""
    title = "Invalid response"


class HttpError(ClientException):
    """The API answered with an HTTP error status."""
    http_status = 500
    title = "HTTP error"


class HttpBadRequest(HttpError):
    http_status = 400
    title = "Bad Request"


class HttpUnauthorized(HttpError):
    http_status = 401
    title = "Unauthorized"


class HttpForbidden(HttpError):
    http_status = 403
    title = "Forbidden"


class HttpNotFound(HttpError):
    http_status = 404
    title = "Not Found"


class HttpMethodNotAllowed(HttpError):
    http_status = 405
    title = "Method Not Allowed"


class HttpNotAcceptable(HttpError):
    http_status = 406
    title = "Not Acceptable"


class HttpConflict(HttpError):
    http_status = 409
    title = "Conflict"


class HttpRequestEntityTooLarge(HttpError):
    http_status = 413
    title = "Request Entity Too Large"


class HttpUnsupportedMediaType(HttpError):
    http_status = 415
    title = "Unsupported Media Type"


class HttpInternalServerError(HttpError):
    http_status = 500
    title = "Internal Server Error"


class HttpBadGateway(HttpError):
    http_status = 502
    title = "Bad Gateway"


class HttpServiceUnavailable(HttpError):
    http_status = 503
    title = "Service Unavailable"


class HttpGatewayTimeout(HttpError):
    http_status = 504
    title = "Gateway Timeout"


_BY_STATUS = {cls.http_status: cls for cls in (
    HttpBadRequest, HttpUnauthorized, HttpForbidden, HttpNotFound,
    HttpMethodNotAllowed, HttpNotAcceptable, HttpConflict,
    HttpRequestEntityTooLarge, HttpUnsupportedMediaType,
    HttpInternalServerError, HttpBadGateway, HttpServiceUnavailable,
    HttpGatewayTimeout)}


def _error_body(response):
    """(title, message) from an error answer's body, either may be None."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            return error.get("title"), error.get("message")
        # Other services' shapes, e.g. a proxy's {"message": ...}.
        for key in ("message", "detail", "title"):
            if isinstance(body.get(key), str):
                return None, body[key]
        for value in body.values():
            if isinstance(value, dict) and \
                    isinstance(value.get("message"), str):
                return value.get("title"), value["message"]
    text = (response.text or "").strip()
    if text and len(text) <= 1000:
        return None, text.splitlines()[0]
    return None, None


def from_response(response, method=None, url=None):
    """The exception for an HTTP error answer (status >= 400)."""
    status = response.status_code
    cls = _BY_STATUS.get(status, HttpError)
    title, message = _error_body(response)
    return cls(message=message or title or cls.title or response.reason,
               http_status=status, title=title,
               request_id=response.headers.get("x-openstack-request-id"),
               method=method, url=url)
