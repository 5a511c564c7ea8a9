"""The migration engine's client of its own cloud's Glance.

Metadata calls go through python-glanceclient, whose keystoneauth1
Adapter retries HTTP 429/502/503/504 (honouring Retry-After) and
connection failures, and re-authenticates once after a 401.  Image data
moves through a plain keystoneauth1 Adapter on the same session:
downloads stream from any byte offset (HTTP Range) and resume where a
broken connection left them; uploads re-open their source and start
over, after checking what Glance made of the image.  Errors become
dtn_migrate exceptions naming the cloud.

Tokens are never copied out of the session: with a password plugin
keystoneauth1 renews them before they expire, however long a migration.
"""

import contextlib
import email.utils
import http.client
import random
import re
import time
import urllib.parse

from glanceclient import client as glance_client
from glanceclient import exc as glance_exc
from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
from oslo_log import log as logging
import requests
import tenacity
import urllib3

from dtn_migrate.conf import glance as glance_conf
from dtn_migrate import exception
from dtn_migrate.i18n import _

LOG = logging.getLogger(__name__)

MiB = 1 << 20
RETRY_STATUSES = (429, 502, 503, 504)
#: What metadata calls also retry: Glance answers 500 to a database
#: error of a moment (a deadlock, a lock held too long, a lost
#: connection).  A create asked twice: the import names the image's id,
#: so the second one gets 409 and the import takes the first one's.
METADATA_RETRY_STATUSES = RETRY_STATUSES + (500,)
FIRST_DELAY = 0.5
# States in which Glance takes (or will take again) an upload.
UPLOADABLE = ('queued', 'saving', 'uploading', 'importing')
# Query parameters of GET /v2/images: properties of these names are
# matched in the client only.
_LIST_PARAMS = frozenset((
    'limit', 'marker', 'sort', 'sort_key', 'sort_dir', 'page_size',
    'status', 'tag', 'os_hidden', 'visibility', 'member_status',
    'size_min', 'size_max', 'created_at', 'updated_at'))
_CONTENT_RANGE = re.compile(r'^bytes (\d+)-(\d+)/(\d+)$')
_TRANSIENT = (ks_exc.ConnectionError, requests.RequestException, OSError)
# Reading an answer's body below requests: http.client and urllib3 raise
# their own.
_TRANSIENT_READ = _TRANSIENT + (http.client.HTTPException,
                                urllib3.exceptions.HTTPError)


class _Retry(Exception):
    """A data request to try again: WHAT it was, WHY it failed, and the
    Retry-After the answer asked for.
    """

    def __init__(self, what, why, retry_after=None):
        super().__init__(why)
        self.what = what
        self.why = why
        self.retry_after = retry_after


def _quote(image_id):
    return urllib.parse.quote(str(image_id), safe='')


def _retry_after(resp):
    """Seconds asked by a Retry-After header (delta or HTTP date)."""
    value = resp.headers.get('Retry-After')
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _matches(image, tags, properties):
    return (set(tags) <= set(image.get('tags') or ()) and
            all(image.get(k) == v for k, v in properties.items()))


class _Body:
    """An upload body: exactly SIZE bytes from STREAM (an iterable of
    bytes or a file), sent with a Content-Length.  A stream that gives
    more or fewer bytes aborts the request; its own errors are kept in
    ``error`` so they are not taken for network failures.

    An iterable stream is iterated, even if it also has ``read``: its
    pieces go out as they are, without being cut again or copied (a
    memoryview stays one: each is sent before the next is asked for).
    Files (which iterate by lines: anything with ``readline``) are read
    in ``chunk_size`` pieces.
    """

    def __init__(self, stream, size, chunk_size):
        self.stream = stream
        self.size = size
        self.chunk_size = chunk_size
        self.sent = 0
        self.error = None

    def __len__(self):
        return self.size

    def __iter__(self):
        stream = self.stream
        if hasattr(stream, 'readline') or not hasattr(stream, '__iter__'):
            stream = iter(lambda: self.stream.read(self.chunk_size), b'')
        try:
            for chunk in stream:
                self.sent += len(chunk)
                if self.sent > self.size:
                    raise exception.InvalidInput(reason=_(
                        'the image data is longer than %d bytes')
                        % self.size)
                if chunk:
                    yield chunk if isinstance(chunk, (bytes, memoryview)) \
                        else bytes(chunk)
            if self.sent != self.size:
                raise exception.InvalidInput(reason=_(
                    'the image data ended after %(sent)d of %(size)d '
                    'bytes') % {'sent': self.sent, 'size': self.size})
        except Exception as e:
            self.error = e
            raise

    def close(self):
        close = getattr(self.stream, 'close', None)
        if close is not None:
            close()


def _readinto(resp, view):
    """Read what comes next of RESP's body into VIEW; 0 at its end.

    urllib3's own ``readinto`` reads into a new buffer and copies; its
    http.client answer underneath fills VIEW from the socket directly.
    That is used when nothing needs decoding (no Content-Encoding).
    """
    raw = resp.raw
    fp = getattr(raw, '_fp', None)
    if fp is not None and hasattr(fp, 'readinto') and \
            not resp.headers.get('Content-Encoding'):
        return fp.readinto(view)
    return raw.readinto(view)


class _Download:
    """ImageService.open_download's file object."""

    def __init__(self, service, image_id, offset, stop):
        self.svc = service
        self.image_id = image_id
        self.url = service._file_url(image_id)
        self.pos = self.start = offset
        self.stop = stop
        self.total = None
        self.failed = 0
        self.broken = []
        self.resp = None
        self.retrying = None
        self.ended = False

    def readable(self):
        return True

    def readinto(self, buf):
        view = memoryview(buf).cast('B')
        if not view.nbytes:
            return 0
        while not self.ended:
            if self.resp is None and not self._open():
                break
            try:
                n = _readinto(self.resp, view)
                if n:
                    self.pos += n
                    return n
                if self.total is None or self.pos == self.total:
                    self.ended = True
                    break
                why = _('answer ended at byte %(pos)d of %(total)d') % {
                    'pos': self.pos, 'total': self.total}
            except _TRANSIENT_READ as e:
                why = str(e) or type(e).__name__
            self._resume(why)
        self.close()
        return 0

    def read(self, size=-1):
        if size is None or size < 0:
            size = self.svc.chunk_size
        buf = bytearray(size)
        n = self.readinto(buf)
        return bytes(buf) if n == size else bytes(buf[:n])

    def _open(self):
        """Ask for the bytes from ``pos``; False once none are left."""
        self.start = self.pos
        self.retrying = self.svc._retrying(self.failed, self.stop)
        self.resp, self.total = self.retrying(
            self.svc._open_data, self.url, self.image_id, self.pos,
            self.total, self.broken)
        if self.resp is None:
            self.ended = True
            return False
        return True

    def _resume(self, why):
        """The answer broke: it is the first failure of the next run of
        retries, which goes on counting unless bytes came.
        """
        self._close_answer()
        self.failed = 0 if self.pos > self.start else self.failed + \
            self.retrying.statistics.get('attempt_number', 1) - 1
        self.broken.append(_Retry(
            self.svc._what_download(self.image_id, self.pos), why))

    def _close_answer(self):
        resp, self.resp = self.resp, None
        if resp is not None:
            resp.close()

    def close(self):
        self.ended = True
        self._close_answer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class ImageService:
    """Glance of one cloud, on a keystoneauth1 SESSION.

    ``cloud_name`` labels errors and logs.  ``retries`` bounds the
    retries of a call after HTTP 429/502/503/504 (and 500 for metadata
    calls) or a connection error;
    data transfers wait up to ``retry_max_delay`` seconds between two
    (exponential with jitter, or Retry-After); downloads are read in
    ``chunk_size`` pieces.  ``sleep`` waits out a pause between two tries
    of a data request that has no stop event.
    """

    def __init__(self, session, cloud_name='local', endpoint_override=None,
                 region_name=None, interface=None, service_type='image',
                 service_name=None, retries=8, retry_max_delay=30.0,
                 chunk_size=MiB, sleep=time.sleep):
        self.session = session
        self._sleep = sleep
        self.cloud_name = cloud_name
        self.retries = retries
        self.retry_max_delay = retry_max_delay
        self.chunk_size = chunk_size
        endpoint = dict(service_type=service_type, service_name=service_name,
                        interface=interface, region_name=region_name,
                        endpoint_override=endpoint_override, logger=LOG)
        self.client = glance_client.Client(
            '2', session=session, connect_retries=retries,
            status_code_retries=retries,
            retriable_status_codes=list(METADATA_RETRY_STATUSES),
            **endpoint)
        self._http = ks_adapter.Adapter(session, **endpoint)

    @classmethod
    def from_conf(cls, conf, group=glance_conf.GROUP):
        """An ImageService from the keystoneauth1 options of GROUP."""
        opts = conf[group]
        try:
            auth = ks_loading.load_auth_from_conf_options(conf, group)
            session = ks_loading.load_session_from_conf_options(
                conf, group, auth=auth)
            adapter = ks_loading.load_adapter_from_conf_options(
                conf, group, session=session)
        except (ks_exc.NoMatchingPlugin, ks_exc.MissingRequiredOptions,
                TypeError) as e:
            raise exception.ConfigError(reason='[%s] %s' % (group, e))
        if auth is None and not adapter.endpoint_override:
            raise exception.ConfigError(reason=_(
                '[%s] auth_type is not set') % group)
        return cls(session, cloud_name=opts.cloud_name,
                   endpoint_override=adapter.endpoint_override,
                   region_name=adapter.region_name,
                   interface=adapter.interface,
                   service_type=adapter.service_type,
                   service_name=adapter.service_name,
                   retries=opts.retries,
                   retry_max_delay=opts.retry_max_delay,
                   chunk_size=opts.chunk_size)

    def for_token(self, token):
        """This Glance as the caller whose Keystone ``token`` it is (the
        API passes it on): what the caller may see and read.  The
        endpoint is the one this service uses; the token is only sent.
        """
        with self._errors():
            endpoint = self._http.get_endpoint()
        if not endpoint:
            raise self._unavailable(_('no image endpoint'))
        session = ks_session.Session(
            auth=token_endpoint.Token(endpoint, token),
            verify=self.session.verify, cert=self.session.cert,
            timeout=self.session.timeout)
        return ImageService(session, cloud_name=self.cloud_name,
                            endpoint_override=endpoint, retries=2,
                            retry_max_delay=self.retry_max_delay,
                            chunk_size=self.chunk_size)

    def readable(self, image_id):
        """The image, if this service's caller may read it: else
        ImageNotFound (Glance hides it) or ImageNotReadable.
        """
        try:
            image = self.get(image_id)
        except exception.ImageServiceAuthFailed as e:
            raise exception.ImageNotReadable(
                image_id=image_id, cloud=self.cloud_name) from e
        return image

    # Errors.

    def _unavailable(self, reason):
        return exception.ImageServiceUnavailable(cloud=self.cloud_name,
                                                 reason=reason)

    def _auth_failed(self, reason):
        return exception.ImageServiceAuthFailed(cloud=self.cloud_name,
                                                reason=reason)

    @contextlib.contextmanager
    def _errors(self, image_id=None):
        """Translate glanceclient and keystoneauth1 errors."""
        try:
            yield
        except glance_exc.HTTPNotFound as e:
            if image_id is None:
                raise self._unavailable(str(e)) from e
            raise exception.ImageNotFound(image_id=image_id,
                                          cloud=self.cloud_name) from e
        except (glance_exc.HTTPUnauthorized, glance_exc.HTTPForbidden) as e:
            raise self._auth_failed(_('Glance answered %(code)s: '
                                      '%(details)s') % {
                'code': e.code, 'details': e.details}) from e
        except glance_exc.HTTPConflict as e:
            raise exception.Conflict(message=_(
                'Image %(id)s in %(cloud)s: %(details)s') % {
                'id': image_id, 'cloud': self.cloud_name,
                'details': e.details}) from e
        except glance_exc.HTTPBadRequest as e:
            raise exception.InvalidInput(reason=e.details) from e
        except (glance_exc.HTTPException, glance_exc.CommunicationError,
                glance_exc.InvalidEndpoint) as e:
            raise self._unavailable(str(e)) from e
        except ks_exc.EndpointNotFound as e:
            raise self._unavailable(_('no image endpoint: %s') % e) from e
        except (ks_exc.Unauthorized, ks_exc.Forbidden,
                ks_exc.AuthorizationFailure, ks_exc.MissingAuthPlugin) as e:
            raise self._auth_failed(_('Keystone refused: %s') % e) from e
        except (ks_exc.ClientException, requests.RequestException) as e:
            raise self._unavailable(str(e)) from e

    def _raise_for(self, resp, image_id):
        """Raise the exception of a failed data request."""
        code = resp.status_code
        text = resp.text[:300].strip()
        if code == 404:
            raise exception.ImageNotFound(image_id=image_id,
                                          cloud=self.cloud_name)
        if code in (401, 403):
            raise self._auth_failed(_('Glance answered %(code)d: '
                                      '%(text)s') % {'code': code,
                                                     'text': text})
        raise self._unavailable(_('HTTP %(code)d on the data of image '
                                  '%(id)s: %(text)s') % {
            'code': code, 'id': image_id, 'text': text})

    # Retries of the data path.

    def _delay(self, attempt, retry_after=None):
        if retry_after is not None:
            return min(retry_after, self.retry_max_delay)
        cap = min(self.retry_max_delay, FIRST_DELAY * 2 ** (attempt - 1))
        return random.uniform(cap / 2, cap)

    def _retrying(self, failed=0, stop=None):
        """A tenacity Retrying of a data request that raises _Retry to
        be tried again, after the failures in a row FAILED made before:
        at most ``retries`` of them in all, then ImageServiceUnavailable.
        Setting the event STOP ends a pause between two tries at once
        (ImageServiceUnavailable).
        """
        def pause(seconds):
            if stop is None:
                self._sleep(seconds)
            elif stop.wait(seconds):
                raise self._unavailable(_('stopped while waiting to retry '
                                          'a data request'))

        def wait(state):
            return self._delay(state.attempt_number + failed,
                               state.outcome.exception().retry_after)

        def log(state):
            exc = state.outcome.exception()
            LOG.warning('%(cloud)s image service: %(what)s: %(why)s; retry '
                        '%(attempt)d of %(retries)d in %(delay).1f s',
                        {'cloud': self.cloud_name, 'what': exc.what,
                         'why': exc.why,
                         'attempt': state.attempt_number + failed,
                         'retries': self.retries,
                         'delay': state.upcoming_sleep})

        def give_up(state):
            exc = state.outcome.exception()
            raise self._unavailable(_('%(what)s: %(why)s (gave up after '
                                      '%(n)d retries)') % {
                'what': exc.what, 'why': exc.why, 'n': self.retries})

        return tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(_Retry),
            stop=tenacity.stop_after_attempt(self.retries + 1 - failed),
            wait=wait, before_sleep=log, retry_error_callback=give_up,
            sleep=pause)

    def _invalidate(self):
        """Drop the session's token; True when a new one can be had."""
        try:
            return bool(self.session.invalidate())
        except ks_exc.MissingAuthPlugin:
            return False

    # Metadata.

    def get(self, image_id):
        """The image as a plain dict."""
        with self._errors(image_id):
            return dict(self.client.images.get(_quote(image_id)))

    def _list(self, filters, tags=(), properties=None):
        """Images matching FILTERS, every tag of TAGS and PROPERTIES,
        hidden ones (os_hidden) included; Glance filters what it can.
        """
        properties = dict(properties or {})
        query = dict(filters)
        for key, value in properties.items():
            if isinstance(value, str) and key not in _LIST_PARAMS:
                query[key] = value
        found = {}
        with self._errors():
            for hidden in ('false', 'true'):
                # glanceclient takes the tags out of the filters it gets.
                page = dict(query, os_hidden=hidden, tag=list(tags))
                for image in self.client.images.list(filters=page):
                    found.setdefault(image['id'], dict(image))
        return [image for image in found.values()
                if _matches(image, tags, properties)]

    def select(self, tag=None, properties=None):
        """Active images with TAG (a tag or a list of tags, all required)
        and PROPERTIES (a dict of exact values).
        """
        tags = [tag] if isinstance(tag, str) else list(tag or ())
        return [image for image in self._list({'status': 'active'}, tags,
                                              properties)
                if image.get('status') == 'active']

    def find(self, property_key, value, owner=None):
        """Images of any status whose property PROPERTY_KEY is VALUE (of
        project OWNER only, when given).
        """
        filters = {'owner': owner} if owner else {}
        found = self._list(filters, properties={property_key: value})
        return [image for image in found
                if not owner or image.get('owner') == owner]

    def own_project(self):
        """The project this service's session is scoped to (where the
        images it creates without an owner go), or None when unknown.
        """
        try:
            return self.session.get_project_id()
        except (ks_exc.ClientException, AttributeError):
            return None

    def create(self, kwargs):
        """Create an image from ``images.create`` KWARGS (see
        ``metadata.create_args``); returns it as a dict.
        """
        kwargs = dict(kwargs)
        # glanceclient would read a property "backend" as a store name.
        backend = kwargs.pop('backend', None)
        with self._errors(kwargs.get('id')):
            try:
                image = self.client.images.create(**kwargs)
                if backend is not None:
                    image = self.client.images.update(image['id'],
                                                      backend=backend)
            except TypeError as e:
                raise exception.InvalidInput(reason=str(e)) from e
        return dict(image)

    def update(self, image_id, changes, remove=()):
        """Set CHANGES (a dict of fields, tags and properties) and remove
        the properties REMOVE of an image; returns it as a dict.
        """
        with self._errors(image_id):
            try:
                return dict(self.client.images.update(
                    _quote(image_id), remove_props=list(remove) or None,
                    **changes))
            except TypeError as e:
                raise exception.InvalidInput(reason=str(e)) from e

    def remove_properties(self, image_id, names):
        """Remove the properties NAMES of an image; absent ones are no
        error.  Returns the image as a dict.
        """
        image = self.get(image_id)
        present = [name for name in names if name in image]
        if not present:
            return image
        with self._errors(image_id):
            return dict(self.client.images.update(_quote(image_id),
                                                  remove_props=present))

    def delete(self, image_id, unprotect=False):
        """Delete an image; a missing one is not an error.  UNPROTECT
        clears ``protected`` first (an image this engine created).
        """
        with self._errors(image_id):
            try:
                if unprotect and self.get(image_id).get('protected'):
                    self.client.images.update(_quote(image_id),
                                              protected=False)
                self.client.images.delete(_quote(image_id))
            except (glance_exc.HTTPNotFound, exception.ImageNotFound):
                LOG.debug('Image %s already gone from %s', image_id,
                          self.cloud_name)
            except glance_exc.HTTPForbidden:
                if not self.get(image_id).get('protected'):
                    raise
                raise exception.Conflict(message=_(
                    'Image %(id)s in %(cloud)s is protected') % {
                    'id': image_id, 'cloud': self.cloud_name})

    # Data.

    def _file_url(self, image_id):
        return '/v2/images/%s/file' % _quote(image_id)

    def download(self, image_id, offset=0, stop=None):
        """Iterate over the image data from byte OFFSET, in pieces of at
        most ``chunk_size`` bytes (see :meth:`open_download`).
        """
        data = self.open_download(image_id, offset, stop)
        try:
            while True:
                chunk = data.read(self.chunk_size)
                if not chunk:
                    return
                yield chunk
        finally:
            data.close()

    def open_download(self, image_id, offset=0, stop=None):
        """The image data from byte OFFSET as a binary file object
        (``readinto``, ``read``, ``close``).

        An offset is asked with ``Range: bytes=OFFSET-`` and must be
        answered 206 with that range.  A broken or short answer is
        resumed from where it stopped (retries count failures in a row).
        Setting the event STOP ends a pause before a retry at once.
        ``readinto`` fills the caller's buffer from the socket, with no
        copy in between where the HTTP library allows it.
        """
        return _Download(self, image_id, offset, stop)

    def _what_download(self, image_id, pos):
        return _('download of image %(id)s at byte %(pos)d') % {
            'id': image_id, 'pos': pos}

    def _open_data(self, url, image_id, pos, total, broken):
        """(answer streaming bytes POS-, image size), or (None, size)
        when nothing is left; raises _Retry for an answer to try again
        (first the failure in BROKEN, if any).
        """
        if broken:
            raise broken.pop()
        what = self._what_download(image_id, pos)
        headers = {'Range': 'bytes=%d-' % pos} if pos else {}
        try:
            resp = self._http.get(url, headers=headers, stream=True,
                                  raise_exc=False)
        except _TRANSIENT as e:
            raise _Retry(what, str(e))
        try:
            if resp.status_code in RETRY_STATUSES:
                raise _Retry(what, 'HTTP %d' % resp.status_code,
                             _retry_after(resp))
            total = self._data_range(resp, image_id, pos, total)
        except BaseException:
            resp.close()
            raise
        if pos == total:
            resp.close()
            return None, total
        return resp, total

    def _data_range(self, resp, image_id, pos, total):
        """Check a data answer for bytes POS-; return the image size
        (None when unknown), POS when nothing is left.
        """
        code = resp.status_code
        if code == 200 and pos == 0:
            length = resp.headers.get('Content-Length')
            return int(length) if length and length.isdigit() else total
        if code == 206:
            match = _CONTENT_RANGE.match(
                resp.headers.get('Content-Range', ''))
            if (match and int(match.group(1)) == pos and
                    int(match.group(2)) == int(match.group(3)) - 1 and
                    total in (None, int(match.group(3)))):
                return int(match.group(3))
            raise self._unavailable(_(
                'image %(id)s: asked for bytes %(pos)d-, got Content-Range '
                '%(range)r') % {'id': image_id, 'pos': pos,
                                'range': resp.headers.get('Content-Range')})
        if code == 416:
            size = self.get(image_id).get('size')
            if size == pos:
                return pos
            raise exception.InvalidInput(reason=_(
                'offset %(pos)d is beyond the %(size)s bytes of image '
                '%(id)s') % {'pos': pos, 'size': size, 'id': image_id})
        if code == 204:
            raise exception.ImageNotActive(
                image_id=image_id, status=self.get(image_id).get('status'))
        if code == 200:
            raise self._unavailable(_(
                'image %(id)s: Glance ignored the range bytes=%(pos)d- '
                '(HTTP 200)') % {'id': image_id, 'pos': pos})
        self._raise_for(resp, image_id)

    def upload(self, image_id, open_stream, size):
        """Upload SIZE bytes of image data; returns the image dict.

        OPEN_STREAM() gives a fresh iterable of bytes (or a file) on each
        call.  After a failure the image's state decides: queued or
        saving, the upload starts over; active, it is done.  A 401 makes
        the session re-authenticate once.
        """
        url = self._file_url(image_id)
        headers = {'Content-Type': 'application/octet-stream',
                   'x-openstack-image-size': '%d' % size}
        reauthenticated = []

        def attempt():
            resp, why, retry_after = self._put(url, open_stream, size,
                                               headers)
            if resp is not None and resp.status_code == 401 and \
                    not reauthenticated:
                reauthenticated.append(True)
                if self._invalidate():
                    LOG.warning('%s image service: upload of image %s got '
                                'HTTP 401, authenticating again',
                                self.cloud_name, image_id)
                    resp, why, retry_after = self._put(url, open_stream,
                                                       size, headers)
            return self._uploaded(image_id, resp, why, retry_after)

        return self._retrying()(attempt)

    def _put(self, url, open_stream, size, headers):
        """One PUT of the data: (answer or None, why, Retry-After)."""
        body = _Body(open_stream(), size, self.chunk_size)
        try:
            resp = self._http.put(url, data=body, headers=headers,
                                  raise_exc=False, allow_reauth=False)
        except _TRANSIENT as e:
            if body.error is not None:
                raise body.error
            return None, str(e), None
        finally:
            body.close()
        return resp, 'HTTP %d' % resp.status_code, _retry_after(resp)

    def _uploaded(self, image_id, resp, why, retry_after):
        """The image after an upload that got RESP (None: no answer);
        raises _Retry when Glance takes the upload again.
        """
        code = resp.status_code if resp is not None else None
        if code is not None and code < 300:
            return self.get(image_id)
        # A 500 on upload is what Glance answers when the body stalls
        # (its WSGI server timed out reading): the image went back to
        # queued and a fresh stream may be sent.
        if code is not None and code not in RETRY_STATUSES + (409, 500):
            self._raise_for(resp, image_id)
        image = self.get(image_id)
        if image['status'] == 'active':
            LOG.info('%s image service: image %s is active after '
                     '%s', self.cloud_name, image_id, why)
            return image
        if image['status'] not in UPLOADABLE:
            raise self._unavailable(_(
                'upload of image %(id)s: %(why)s, and the image is now '
                '%(status)s') % {'id': image_id, 'why': why,
                                 'status': image['status']})
        raise _Retry(_('upload of image %(id)s (%(status)s)') % {
            'id': image_id, 'status': image['status']}, why, retry_after)
