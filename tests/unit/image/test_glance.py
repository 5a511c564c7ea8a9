"""ImageService without a Glance: retries, ranges, upload bodies, config."""

import email.utils
import io
import re
import tempfile
import threading
import time
import types
from unittest import mock

import fixtures
from glanceclient import exc as glance_exc
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import session as ks_session
import requests
import urllib3

from dtn_migrate.conf import glance as glance_conf
from dtn_migrate import exception
from dtn_migrate.image import glance
from tests.unit import utils
from tests.unit import testcase

IMAGE_ID = '11111111-2222-3333-4444-555555555555'


class FakeRaw:
    """urllib3's answer: ``readinto`` (which copies), and the http.client
    answer under it (``_fp``) unless ``direct`` is False.  A ``cut``
    answer breaks at that byte: urllib3 raises ProtocolError, http.client
    its socket's error.
    """

    def __init__(self, body, cut, direct):
        self.body, self.cut, self.pos = body, cut, 0
        self.reads = []
        if direct:
            self._fp = types.SimpleNamespace(
                readinto=lambda view: self._fill(view, "fp",
                                                 ConnectionResetError))

    def readinto(self, view):
        return self._fill(view, "urllib3", urllib3.exceptions.ProtocolError)

    def _fill(self, view, how, error):
        self.reads.append(how)
        end = len(self.body) if self.cut is None else self.cut
        if self.pos >= end and self.cut is not None:
            raise error("cut")
        n = min(len(view), end - self.pos)
        view[:n] = self.body[self.pos:self.pos + n]
        self.pos += n
        return n


class FakeResponse:
    def __init__(self, status, body=b'', headers=None, cut=None,
                 direct=True):
        self.status_code = status
        self.body = body
        self.headers = requests.structures.CaseInsensitiveDict(headers or {})
        self.cut = cut
        self.closed = False
        self.raw = FakeRaw(body, cut, direct)

    @property
    def text(self):
        return self.body.decode()

    def iter_content(self, size):
        for i in range(0, len(self.body), size):
            if self.cut is not None and i >= self.cut:
                raise requests.exceptions.ChunkedEncodingError('cut')
            yield self.body[i:i + size]

    def close(self):
        self.closed = True


class ServiceTestCase(testcase.TestCase):
    def setUp(self):
        super().setUp()
        # The service's own sleep: a patched time.sleep would also count
        # other threads' (1823 of them in one CI run).
        self.sleeps = []
        self.log = self.useFixture(fixtures.FakeLogger(
            name='dtn_migrate.image.glance'))
        self.session = mock.Mock(spec=ks_session.Session)
        self.svc = glance.ImageService(self.session, cloud_name='east',
                                       retries=3, retry_max_delay=4,
                                       chunk_size=4,
                                       sleep=self.sleeps.append)
        self.svc._http = mock.Mock()
        self.status = []
        self.svc.get = mock.Mock(side_effect=self._get)

    def _get(self, image_id):
        status = self.status.pop(0) if self.status else 'active'
        return {'id': image_id, 'status': status, 'size': 10}


class TestDelays(ServiceTestCase):
    def test_retry_after_forms(self):
        def resp(value):
            return FakeResponse(503, headers={'Retry-After': value})
        self.assertEqual(7.0, glance._retry_after(resp('7')))
        later = email.utils.formatdate(time.time() + 60, usegmt=True)
        self.assertAlmostEqual(60, glance._retry_after(resp(later)),
                               delta=2)
        self.assertIsNone(glance._retry_after(resp('soon')))
        self.assertIsNone(glance._retry_after(FakeResponse(503)))

    def test_exponential_with_jitter_capped(self):
        for attempt, cap in ((1, 0.5), (2, 1), (3, 2), (4, 4), (9, 4)):
            for _ in range(20):
                delay = self.svc._delay(attempt)
                self.assertTrue(cap / 2 <= delay <= cap, (attempt, delay))

    def test_retry_after_is_honoured_up_to_the_cap(self):
        self.assertEqual(2, self.svc._delay(1, retry_after=2))
        self.assertEqual(4, self.svc._delay(1, retry_after=3600))


class TestBody(testcase.TestCase):
    def test_exact_size_from_iterable_or_file(self):
        body = glance._Body(iter([b'ab', b'', b'cd']), 4, 2)
        self.assertEqual(4, len(body))
        self.assertEqual(b'abcd', b''.join(body))
        body = glance._Body(io.BytesIO(b'abcdef'), 6, 4)
        self.assertEqual([b'abcd', b'ef'], list(body))

    def test_iterable_stream_is_not_read(self):
        class Staged:
            """Like stream.StagedStream: blocks, and read() as well."""

            def __init__(self):
                self.blocks = [b'abc', b'defg']

            def __iter__(self):
                return iter(self.blocks)

            def read(self, n=-1):
                raise AssertionError('read() copies the blocks again')

        stream = Staged()
        body = glance._Body(stream, 7, 2)
        chunks = list(body)
        self.assertEqual([b'abc', b'defg'], chunks)
        self.assertIs(stream.blocks[1], chunks[1])

    def test_memoryviews_go_out_as_they_are(self):
        # open_staged(reuse_buffers=True) hands out views of its pooled
        # buffers: a copy into bytes would cost a pass over the image.
        views = [memoryview(bytearray(b'abc')), memoryview(b'defg')]
        chunks = list(glance._Body(iter(views), 7, 2))
        self.assertIs(views[0], chunks[0])
        self.assertIs(views[1], chunks[1])
        self.assertEqual([b'hi'], list(glance._Body(iter([bytearray(b'hi')]),
                                                    2, 2)))

    def test_files_are_read_in_chunks(self):
        with tempfile.TemporaryFile() as f:
            f.write(b'ab\ncd\nef')
            f.seek(0)
            self.assertEqual([b'ab\nc', b'd\nef'],
                             list(glance._Body(f, 8, 4)))

    def test_short_and_long_streams_abort(self):
        for data in ([b'abc'], [b'abcd', b'e']):
            body = glance._Body(iter(data), 4, 2)
            self.assertRaises(exception.InvalidInput, b''.join, body)
            self.assertIsInstance(body.error, exception.InvalidInput)

    def test_stream_errors_are_kept(self):
        def broken():
            yield b'ab'
            raise OSError('disk read error')
        body = glance._Body(broken(), 4, 2)
        self.assertRaises(OSError, b''.join, body)
        self.assertIsInstance(body.error, OSError)


class TestUpload(ServiceTestCase):
    def upload(self, *answers):
        self.svc._http.put.side_effect = list(answers)
        opened = []

        def open_stream():
            opened.append(1)
            return iter([b'0123456789'])
        result = self.svc.upload(IMAGE_ID, open_stream, 10)
        return result, len(opened)

    def test_retries_503_and_429_then_succeeds(self):
        self.status = ['queued', 'queued', 'active']
        result, opened = self.upload(
            FakeResponse(503), FakeResponse(429, headers={'Retry-After': '3'}),
            FakeResponse(204))
        self.assertEqual('active', result['status'])
        self.assertEqual(3, opened)
        self.assertEqual(3, self.sleeps[1])
        self.assertIn('HTTP 503', self.log.output)
        self.assertIn('HTTP 429', self.log.output)
        self.assertIn('retry 2 of 3 in 3.0 s', self.log.output)
        kwargs = self.svc._http.put.call_args.kwargs
        self.assertFalse(kwargs['allow_reauth'])
        self.assertEqual('10', kwargs['headers']['x-openstack-image-size'])

    def test_connection_reset_then_active_stops(self):
        self.status = ['active']
        result, opened = self.upload(ks_exc.ConnectFailure('reset'))
        self.assertEqual(('active', 1), (result['status'], opened))
        self.assertEqual([], self.sleeps)

    def test_saving_is_waited_for(self):
        self.status = ['saving', 'active']
        result, opened = self.upload(FakeResponse(409), FakeResponse(204))
        self.assertEqual(2, opened)
        self.assertEqual(1, len(self.sleeps))

    def test_killed_image_gives_up(self):
        self.status = ['killed']
        e = self.assertRaises(exception.ImageServiceUnavailable, self.upload,
                              FakeResponse(503))
        self.assertIn('killed', str(e))
        self.assertIn('east', str(e))

    def test_gives_up_after_retries(self):
        self.status = ['queued'] * 4
        e = self.assertRaises(exception.ImageServiceUnavailable, self.upload,
                              *[FakeResponse(503)] * 4)
        self.assertIn('gave up after 3 retries', str(e))
        self.assertEqual(3, len(self.sleeps))

    def test_401_authenticates_again_once(self):
        self.session.invalidate.return_value = True
        result, opened = self.upload(FakeResponse(401), FakeResponse(204))
        self.assertEqual(2, opened)
        self.assertEqual(1, self.session.invalidate.call_count)
        self.assertRaises(exception.ImageServiceAuthFailed, self.upload,
                          FakeResponse(401), FakeResponse(401))

    def test_401_without_renewable_auth_fails(self):
        self.session.invalidate.return_value = False
        e = self.assertRaises(exception.ImageServiceAuthFailed, self.upload,
                              FakeResponse(401, b'no'))
        self.assertIn('east', str(e))

    def test_stream_error_is_not_retried(self):
        def put(url, data, **kwargs):
            b''.join(data)
        self.svc._http.put.side_effect = put
        self.assertRaises(exception.InvalidInput, self.svc.upload, IMAGE_ID,
                          lambda: iter([b'short']), 10)
        self.assertEqual([], self.sleeps)

    def test_other_errors_map(self):
        self.assertRaises(exception.ImageNotFound, self.upload,
                          FakeResponse(404))
        self.assertRaises(exception.ImageServiceUnavailable, self.upload,
                          FakeResponse(413, b'quota'))


class TestDownload(ServiceTestCase):
    DATA = bytes(range(10))

    def ranged(self, start, cut=None):
        return FakeResponse(206, self.DATA[start:], {
            'Content-Range': 'bytes %d-9/10' % start}, cut=cut)

    def download(self, offset, *answers):
        self.svc._http.get.side_effect = list(answers)
        return b''.join(self.svc.download(IMAGE_ID, offset))

    def test_whole_image(self):
        data = self.download(0, FakeResponse(200, self.DATA, {
            'Content-Length': '10'}))
        self.assertEqual(self.DATA, data)
        headers = self.svc._http.get.call_args.kwargs['headers']
        self.assertEqual({}, headers)

    def test_from_an_offset(self):
        self.assertEqual(self.DATA[3:], self.download(3, self.ranged(3)))
        headers = self.svc._http.get.call_args.kwargs['headers']
        self.assertEqual({'Range': 'bytes=3-'}, headers)

    def test_resumes_after_a_cut(self):
        data = self.download(0, FakeResponse(200, self.DATA, {
            'Content-Length': '10'}, cut=4), self.ranged(4))
        self.assertEqual(self.DATA, data)
        self.assertEqual({'Range': 'bytes=4-'},
                         self.svc._http.get.call_args.kwargs['headers'])
        self.assertIn('at byte 4', self.log.output)

    def test_retries_503_before_data(self):
        data = self.download(2, FakeResponse(503), self.ranged(2))
        self.assertEqual(self.DATA[2:], data)
        self.assertEqual(1, len(self.sleeps))

    def test_readinto_fills_the_buffer_from_the_answer(self):
        answer = FakeResponse(200, self.DATA, {'Content-Length': '10'})
        self.svc._http.get.side_effect = [answer]
        buf = bytearray(16)
        with self.svc.open_download(IMAGE_ID) as data:
            self.assertEqual(0, data.readinto(bytearray()))   # goes on
            self.assertEqual(10, data.readinto(memoryview(buf)[:12]))
            self.assertEqual(0, data.readinto(buf))
        self.assertEqual(self.DATA, bytes(buf[:10]))
        # http.client's own readinto, not urllib3's copy.
        self.assertEqual({"fp"}, set(answer.raw.reads))
        self.assertTrue(answer.closed)

    def test_readinto_through_urllib3_when_decoded_or_wrapped(self):
        for answer in (FakeResponse(200, self.DATA, {
                'Content-Length': '10'}, direct=False),
                FakeResponse(200, self.DATA, {
                    'Content-Length': '10', 'Content-Encoding': 'gzip'})):
            self.assertEqual(self.DATA, self.download(0, answer))
            self.assertEqual({"urllib3"}, set(answer.raw.reads))

    def test_readinto_resumes_after_a_cut_in_either_layer(self):
        for direct in (True, False):
            first = FakeResponse(200, self.DATA, {'Content-Length': '10'},
                                 cut=4, direct=direct)
            self.svc._http.get.side_effect = [first, self.ranged(4)]
            buf = bytearray(10)
            data = self.svc.open_download(IMAGE_ID)
            got = 0
            while got < 10:
                n = data.readinto(memoryview(buf)[got:])
                self.assertGreater(n, 0)
                got += n
            self.assertEqual(0, data.readinto(buf))
            self.assertEqual(self.DATA, bytes(buf))
            self.assertTrue(first.closed)

    def test_failures_in_a_row_give_up(self):
        # A cut with no byte, then 503s: four failures in a row.
        e = self.assertRaises(
            exception.ImageServiceUnavailable, self.download, 4,
            self.ranged(4, cut=0), *[FakeResponse(503)] * 3)
        self.assertIn('gave up after 3 retries', str(e))
        self.assertIn('at byte 4', str(e))
        self.assertEqual(3, len(self.sleeps))
        self.assertIn('retry 3 of 3', self.log.output)

    def test_bytes_received_start_the_count_again(self):
        data = self.download(
            0, FakeResponse(503), FakeResponse(503),
            FakeResponse(200, self.DATA, {'Content-Length': '10'}, cut=4),
            FakeResponse(503), FakeResponse(503), self.ranged(4))
        self.assertEqual(self.DATA, data)
        # Two 503s, the cut after 4 bytes (a first failure again), two
        # more 503s: five retries, none beyond the third in a row.
        self.assertEqual(['1', '2', '1', '2', '3'],
                         re.findall(r'retry (\d) of 3', self.log.output))
        self.assertEqual(5, len(self.sleeps))

    def test_stop_ends_a_pause_at_once(self):
        stop = threading.Event()
        stop.set()
        self.svc._http.get.side_effect = [FakeResponse(503)] * 2
        t0 = time.monotonic()
        e = self.assertRaises(exception.ImageServiceUnavailable, b''.join,
                              self.svc.download(IMAGE_ID, 0, stop=stop))
        self.assertLess(time.monotonic() - t0, 1)
        self.assertIn('stopped while waiting to retry', str(e))
        self.assertEqual(1, self.svc._http.get.call_count)

    def test_wrong_ranges_are_refused(self):
        wrong = FakeResponse(206, b'', {'Content-Range': 'bytes 0-9/10'})
        self.assertRaises(exception.ImageServiceUnavailable, self.download,
                          3, wrong)
        self.assertRaises(exception.ImageServiceUnavailable, self.download,
                          3, FakeResponse(200, self.DATA))

    def test_offset_at_the_end_is_empty(self):
        self.assertEqual(b'', self.download(10, FakeResponse(416)))
        self.assertRaises(exception.InvalidInput, self.download, 11,
                          FakeResponse(416))

    def test_errors_map(self):
        self.assertRaises(exception.ImageNotFound, self.download, 0,
                          FakeResponse(404))
        self.assertRaises(exception.ImageServiceAuthFailed, self.download,
                          0, FakeResponse(403))
        self.status = ['queued']
        self.assertRaises(exception.ImageNotActive, self.download, 0,
                          FakeResponse(204))


class TestUpdate(ServiceTestCase):
    def setUp(self):
        super().setUp()
        self.svc.client = mock.Mock()
        self.svc.client.images.update.return_value = {'id': IMAGE_ID,
                                                      'name': 'app'}

    def test_fields_and_removals(self):
        out = self.svc.update('a/b', {'name': 'app', 'tags': ['x']},
                              ['tier'])
        self.svc.client.images.update.assert_called_once_with(
            'a%2Fb', remove_props=['tier'], name='app', tags=['x'])
        self.assertEqual({'id': IMAGE_ID, 'name': 'app'}, out)
        self.assertIsInstance(out, dict)

    def test_nothing_to_remove(self):
        self.svc.update(IMAGE_ID, {'name': 'app'})
        self.svc.client.images.update.assert_called_once_with(
            IMAGE_ID, remove_props=None, name='app')

    def test_errors_map(self):
        update = self.svc.client.images.update
        for error, expected in (
                (glance_exc.HTTPNotFound('gone'), exception.ImageNotFound),
                (glance_exc.HTTPBadRequest('bad'), exception.InvalidInput),
                (glance_exc.HTTPConflict('busy'), exception.Conflict),
                (TypeError('unknown attribute'), exception.InvalidInput)):
            update.side_effect = error
            self.assertRaises(expected, self.svc.update, IMAGE_ID,
                              {'name': 'app'})


class TestRemoveProperties(ServiceTestCase):
    def setUp(self):
        super().setUp()
        self.svc.client = mock.Mock()
        self.image = {'id': IMAGE_ID, 'status': 'active',
                      'dtn_migrate_transfer_id': 'x', 'tier': '1'}
        self.svc.get = mock.Mock(side_effect=lambda i: dict(self.image))
        self.svc.client.images.update.return_value = {'id': IMAGE_ID,
                                                      'status': 'active'}

    def test_present_ones_removed(self):
        out = self.svc.remove_properties(
            IMAGE_ID, ['dtn_migrate_transfer_id', 'absent', 'tier'])
        self.svc.client.images.update.assert_called_once_with(
            IMAGE_ID, remove_props=['dtn_migrate_transfer_id', 'tier'])
        self.assertEqual({'id': IMAGE_ID, 'status': 'active'}, out)
        self.assertIsInstance(out, dict)

    def test_none_present_asks_nothing(self):
        out = self.svc.remove_properties(IMAGE_ID, ['absent'])
        self.svc.client.images.update.assert_not_called()
        self.assertEqual(self.image, out)
        self.assertEqual(self.image, self.svc.remove_properties(IMAGE_ID,
                                                                []))
        self.svc.client.images.update.assert_not_called()

    def test_id_quoted(self):
        self.svc.remove_properties('a/b', ['tier'])
        self.svc.get.assert_called_once_with('a/b')
        self.svc.client.images.update.assert_called_once_with(
            'a%2Fb', remove_props=['tier'])

    def test_errors_map(self):
        update = self.svc.client.images.update
        for error, expected in (
                (glance_exc.HTTPNotFound('gone'), exception.ImageNotFound),
                (glance_exc.HTTPForbidden('no'),
                 exception.ImageServiceAuthFailed),
                (glance_exc.HTTPBadRequest('bad'), exception.InvalidInput),
                (glance_exc.HTTPServiceUnavailable('down'),
                 exception.ImageServiceUnavailable)):
            update.side_effect = error
            self.assertRaises(expected, self.svc.remove_properties,
                              IMAGE_ID, ['tier'])
        # A missing image, from get.
        self.svc.get.side_effect = exception.ImageNotFound(
            image_id=IMAGE_ID, cloud='east')
        self.assertRaises(exception.ImageNotFound,
                          self.svc.remove_properties, IMAGE_ID, ['tier'])

    def test_real_get_through_glanceclient(self):
        del self.svc.get            # ImageService.get itself
        self.svc.client.images.get.return_value = dict(self.image)
        self.svc.remove_properties(IMAGE_ID, ['tier'])
        self.svc.client.images.get.assert_called_once_with(IMAGE_ID)
        self.svc.client.images.update.assert_called_once_with(
            IMAGE_ID, remove_props=['tier'])


class TestFind(ServiceTestCase):
    def setUp(self):
        super().setUp()
        self.svc.client = mock.Mock()
        self.svc.client.images.list.side_effect = lambda filters: [
            {'id': 'a', 'owner': 'p1', 'm': 'x'},
            {'id': 'b', 'owner': 'p2', 'm': 'x'},
            {'id': 'c', 'owner': 'p1', 'm': 'y'}]

    def test_within_an_owner(self):
        self.assertEqual(['a'], [i['id'] for i in self.svc.find(
            'm', 'x', owner='p1')])
        filters = [c.kwargs['filters'] for c in
                   self.svc.client.images.list.call_args_list]
        self.assertEqual([('p1', 'x', 'false'), ('p1', 'x', 'true')],
                         [(f['owner'], f['m'], f['os_hidden'])
                          for f in filters])

    def test_any_owner(self):
        self.assertEqual(['a', 'b'], [i['id'] for i in self.svc.find(
            'm', 'x')])
        self.assertNotIn('owner', self.svc.client.images.list.call_args
                         .kwargs['filters'])

    def test_own_project(self):
        self.session.get_project_id.return_value = 'svc'
        self.assertEqual('svc', self.svc.own_project())
        self.session.get_project_id.side_effect = \
            ks_exc.MissingAuthPlugin('none')
        self.assertIsNone(self.svc.own_project())


class TestFromConf(testcase.TestCase):
    def conf(self, text):
        return utils.conf_from_text(self, glance_conf.register_opts, text)

    def test_options_reach_the_service(self):
        svc = glance.ImageService.from_conf(self.conf(
            '[glance]\nauth_type = password\n'
            'auth_url = http://ks.example/v3\nusername = u\n'
            'password = p\nproject_name = x\ncloud_name = west\n'
            'retries = 2\nretry_max_delay = 5\nchunk_size = 65536\n'
            'region_name = RegionB\nvalid_interfaces = internal\n'
            'timeout = 12\n'))
        self.assertEqual(('west', 2, 5.0, 65536),
                         (svc.cloud_name, svc.retries, svc.retry_max_delay,
                          svc.chunk_size))
        self.assertEqual('RegionB', svc._http.region_name)
        self.assertEqual(['internal'], svc._http.interface)
        self.assertEqual('image', svc._http.service_type)
        self.assertEqual(12, svc.session.timeout)
        self.assertEqual('http://ks.example/v3', svc.session.auth.auth_url)
        http = svc.client.http_client
        self.assertEqual((2, 2, [429, 502, 503, 504, 500]),
                         (http.connect_retries, http.status_code_retries,
                          http.retriable_status_codes))

    def test_configuration_errors(self):
        for text in ('[glance]\n', '[glance]\nauth_type = nonesuch\n',
                     '[glance]\nauth_type = password\n'
                     'username = u\n'):
            self.assertRaises(exception.ConfigError,
                              glance.ImageService.from_conf,
                              self.conf(text))
