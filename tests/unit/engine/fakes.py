"""In-memory Glance and a pair of DTN agents for engine unit tests.

The fake agents copy staged files from one directory to the other,
following the local copy's watermark side file like the real source
does, and tell the peer engine about incoming transfers.
"""

import hashlib
import os
import threading
import uuid

from dtn_migrate.agent import fences
from dtn_migrate.engine import preflight
from dtn_migrate import exception
from dtn_migrate.image import marker
from dtn_migrate.transfer import dataset

CORE = ("id", "name", "status", "size", "os_hash_algo", "os_hash_value",
        "checksum", "disk_format", "container_format", "min_disk",
        "min_ram", "visibility", "protected", "tags", "owner")


class _CallerImages:
    """What a caller of one project sees: public and community images
    and its own; another project's shared image is refused (403), a
    private one hidden (404).  An unknown token is refused.
    """

    def __init__(self, images, project):
        self.images = images
        self.project = project

    def readable(self, image_id):
        image = self.images.get(image_id)
        if self.project is None or (
                image["visibility"] == "shared" and
                image["owner"] != self.project):
            raise exception.ImageNotReadable(image_id=image_id,
                                             cloud=self.images.cloud)
        if image["visibility"] == "private" and \
                image["owner"] != self.project:
            raise exception.ImageNotFound(image_id=image_id,
                                          cloud=self.images.cloud)
        return image

    get = readable

    def select(self, tag=None, properties=None):
        out = []
        for image in self.images.select(tag, properties):
            try:
                out.append(self.readable(image["id"]))
            except exception.DtnMigrateException:
                pass
        return out


class ChunkFile:
    """A binary file object (``read``, ``close``) over an iterator of
    chunks, as ImageService.open_download gives over an HTTP answer.
    """

    def __init__(self, chunks):
        self.chunks = chunks
        self.pending = b""

    def read(self, size=-1):
        while not self.pending:
            self.pending = next(self.chunks, None)
            if self.pending is None:
                self.pending = b""
                return b""
        if size is None or size < 0:
            size = len(self.pending)
        out, self.pending = self.pending[:size], self.pending[size:]
        return out

    def close(self):
        close = getattr(self.chunks, "close", None)
        if close is not None:
            close()


class FakeImages:
    def __init__(self, cloud="a"):
        self.cloud = cloud
        self.images = {}
        self.data = {}
        self.downloaded = 0
        self.fail_uploads = 0
        self.break_uploads = 0      # uploads that leave the image saving
        self.lock = threading.Lock()
        self.tokens = {}            # a caller's token -> its project

    def add(self, data, **fields):
        image_id = fields.pop("id", None) or str(uuid.uuid4())
        image = {"id": image_id, "name": "img", "status": "active",
                 "size": len(data), "os_hash_algo": "sha512",
                 "os_hash_value": hashlib.sha512(data).hexdigest(),
                 "checksum": hashlib.md5(data).hexdigest(),
                 "disk_format": "raw", "container_format": "bare",
                 "min_disk": 0, "min_ram": 0, "visibility": "shared",
                 "protected": False, "tags": [], "owner": "p"}
        image.update(fields)
        self.images[image_id] = image
        self.data[image_id] = data
        return image

    def get(self, image_id):
        try:
            return dict(self.images[image_id])
        except KeyError:
            raise exception.ImageNotFound(image_id=image_id,
                                          cloud=self.cloud)

    def for_token(self, token):
        """This Glance as the caller of ``token`` (``self.tokens``:
        token -> project).
        """
        return _CallerImages(self, self.tokens.get(token))

    def select(self, tag=None, properties=None):
        out = []
        for image in self.images.values():
            if image["status"] != "active":
                continue
            if tag and tag not in image["tags"]:
                continue
            if properties and any(image.get(k) != v
                                  for k, v in properties.items()):
                continue
            out.append(dict(image))
        return out

    def download(self, image_id, offset=0, stop=None):
        data = self.data[image_id]
        for i in range(offset, len(data), 65536):
            chunk = data[i:i + 65536]
            with self.lock:
                self.downloaded += len(chunk)
            yield chunk

    def open_download(self, image_id, offset=0, stop=None):
        """ImageService.open_download over ``download`` (which tests
        override): a file object that reads its chunks.
        """
        return ChunkFile(self.download(image_id, offset, stop))

    def create(self, kwargs):
        kwargs = dict(kwargs)
        image_id = kwargs.pop("id", None) or str(uuid.uuid4())
        if image_id in self.images:
            raise exception.Conflict("image %s exists" % image_id)
        image = {"id": image_id, "status": "queued", "size": None,
                 "os_hash_value": None, "tags": [], "min_disk": 0,
                 "min_ram": 0, "visibility": "shared", "protected": False}
        image.update(kwargs)
        image["owner"] = kwargs.get("owner") or self.own_project()
        image["tags"] = sorted(image.get("tags") or [])
        self.images[image_id] = image
        return dict(image)

    def update(self, image_id, changes, remove=()):
        image = self.images[image_id]
        image.update(changes)
        for name in remove:
            image.pop(name, None)
        image["tags"] = sorted(image.get("tags") or [])
        return dict(image)

    def find(self, key, value, owner=None):
        return [dict(i) for i in self.images.values()
                if i.get(key) == value and owner in (None, i.get("owner"))]

    def own_project(self):
        """The project of the service's own images (those it creates
        without an owner).
        """
        return "svc"

    def delete(self, image_id, unprotect=False):
        self.images.pop(image_id, None)
        self.data.pop(image_id, None)

    def upload(self, image_id, open_stream, size):
        if self.break_uploads:
            self.break_uploads -= 1
            self.images[image_id]["status"] = "saving"
            raise exception.ImageServiceUnavailable(cloud=self.cloud,
                                                    reason="HTTP 409")
        while True:
            stream = open_stream()
            parts = []
            try:
                for chunk in stream:
                    parts.append(bytes(chunk))
                    if self.fail_uploads:
                        self.fail_uploads -= 1
                        raise IOError("503")
            except IOError:
                continue
            finally:
                stream.close()      # as ImageService.upload does
            break
        data = b"".join(parts)
        image = self.images[image_id]
        image.update(status="active", size=len(data),
                     os_hash_algo="sha512",
                     os_hash_value=hashlib.sha512(data).hexdigest(),
                     checksum=hashlib.md5(data).hexdigest())
        self.data[image_id] = data


def add_imported(images, key, transfer_id, peer, owner=None, data=b"abc",
                 **fields):
    """An image of ``images`` as an import of ``peer``'s ``transfer_id``
    under seal ``key`` makes it (owner None: the service's own).
    """
    image_id = str(uuid.uuid4())
    fields.update(marker.properties(key, image_id, transfer_id, peer,
                                    owner))
    return images.add(data, id=image_id,
                      owner=owner or images.own_project(), **fields)


class FakeAgents:
    """Agents ``dtn-a`` (peer name ``a``) and ``dtn-b`` (``b``)."""

    def __init__(self, roots, suffix=".watermark"):
        self.roots = roots              # host -> staging root
        self.names = {"dtn-a": "a", "dtn-b": "b"}
        self.hosts = {v: k for k, v in self.names.items()}
        self.engines = {}               # host -> Migrations
        self.transfers = {}             # tid -> status
        self.incoming = {}              # (host, tid) -> {name: info}
        self.reports = {}               # (host, tid) -> report
        self.suffix = suffix
        self.lock = threading.Lock()
        self.rate = None                # bytes/s, for slow transfers
        self.wanted = {}                # (host, tid) -> attempt asked for
        self.cast_wanted = True         # tell the engine of a new one
        self.fail_start = 0             # transfers refused at their start
        self.requests = []              # (host, peer, peer request)
        self.unanswered = 0             # peer requests that get no answer
        self.fences = {}                # host -> agent.fences.Fences
        self.refused = []               # (host, tid, command, epoch)
        # Ends the senders of a test that is over: one waiting for a
        # growing file whose writer is gone would otherwise poll forever,
        # and spin in any later test that patches time.sleep.
        self.closed = threading.Event()

    def close(self):
        self.closed.set()

    def ping(self, ctxt, host):
        peer = "b" if host == "dtn-a" else "a"
        return {"host": host, "peers": [peer],
                "staging_root": self.roots[host]}

    def _admit(self, host, transfer_id, epoch, command):
        """The real agent's fencing (agent.fences) of ``host``."""
        if epoch is None:
            return
        with self.lock:
            if host not in self.fences:
                self.fences[host] = fences.Fences(
                    self.roots[host].rstrip(os.sep) + "-state")
        try:
            self.fences[host].admit(transfer_id, epoch, command)
        except exception.StaleEpoch:
            self.refused.append((host, transfer_id, command, epoch))
            raise

    def fence_transfer(self, ctxt, host, transfer_id, epoch):
        self._admit(host, transfer_id, epoch, "fence")

    def start_transfer(self, ctxt, host, peer, files, options=None,
                       transfer_id=None, epoch=None):
        self._admit(host, transfer_id, epoch, "start")
        with self.lock:
            if self.fail_start:
                self.fail_start -= 1
                raise exception.TransferConflict(
                    "the DTN refused transfer %s" % transfer_id)
            if transfer_id in self.transfers:
                return dict(self.transfers[transfer_id])
            self.transfers[transfer_id] = {"state": "running",
                                           "bytes_done": 0,
                                           "transfer_id": transfer_id}
        threading.Thread(target=self._send, daemon=True,
                         args=(host, self.hosts[peer], files,
                               transfer_id)).start()
        return dict(self.transfers[transfer_id])

    def resume_transfer(self, ctxt, host, transfer_id, epoch=None):
        self._admit(host, transfer_id, epoch, "resume")
        return self.get_transfer(ctxt, host, transfer_id)

    def cancel_transfer(self, ctxt, host, transfer_id, epoch=None):
        self._admit(host, transfer_id, epoch, "cancel")
        return self.get_transfer(ctxt, host, transfer_id)

    def get_transfer(self, ctxt, host, transfer_id, epoch=None):
        self._admit(host, transfer_id, epoch, "get")
        with self.lock:
            return dict(self.transfers[transfer_id])

    def _send(self, src, dst, files, tid):
        engine = self.engines.get(dst)
        if engine is not None:
            engine.incoming(tid, self.names[src])
        done = 0
        for f in files:
            path = os.path.join(self.roots[src], f["path"])
            out = os.path.join(self.roots[dst], f["name"])
            part = out + ".part"
            os.makedirs(os.path.dirname(out), exist_ok=True)
            size = f.get("size", os.path.getsize(path))
            key = (dst, tid)
            with self.lock:
                self.incoming.setdefault(key, {})[f["name"]] = {
                    "durable": 0, "state": "open", "path": part}
            sent = 0
            with open(path, "rb") as fin, open(part, "wb") as fout:
                while sent < size:
                    if f.get("growing"):
                        avail, failed = dataset.read_watermark_file(
                            os.path.join(self.roots[src],
                                         f["watermark_file"]))
                    else:
                        avail, failed = size, False
                    if failed:
                        self._set(tid, state="failed", error="source failed")
                        return
                    if avail <= sent:
                        if (self.closed.wait(0.01) or
                                not os.path.isdir(self.roots[src])):
                            self._set(tid, state="failed",
                                      error="the fake agents are closed")
                            return
                        continue
                    fin.seek(sent)
                    n = min(avail - sent, 1 << 20)
                    fout.write(fin.read(n))
                    fout.flush()
                    sent += n
                    done += n
                    if self.rate:
                        self.closed.wait(n / self.rate)
                    with self.lock:
                        self.incoming[key][f["name"]]["durable"] = sent
                        self.transfers[tid]["bytes_done"] = done
            os.rename(part, out)
            with self.lock:
                self.incoming[key][f["name"]].update(state="done", path=out)
        self._set(tid, state="complete")

    def _set(self, tid, **kw):
        with self.lock:
            self.transfers[tid].update(kw)

    def get_watermark(self, ctxt, host, transfer_id, name):
        with self.lock:
            info = self.incoming.get((host, transfer_id), {}).get(name)
        if info is None:
            raise exception.TransferNotFound(transfer_id=transfer_id)
        return dict(info)

    def set_import_report(self, ctxt, host, transfer_id, report,
                          epoch=None):
        self._admit(host, transfer_id, epoch, "report")
        with self.lock:
            self.reports[(host, transfer_id)] = dict(report)

    def get_peer_report(self, ctxt, host, peer, transfer_id, attempt=1):
        """The peer agent's answer: its stored report, stamped with the
        attempt asked for unless it failed; a larger attempt is
        remembered and cast to the peer's engine.
        """
        dst = self.hosts[peer]
        with self.lock:
            report = self.reports.get((dst, transfer_id))
            grew = attempt > self.wanted.get((dst, transfer_id), 0)
            if grew:
                self.wanted[(dst, transfer_id)] = attempt
            engine = self.engines.get(dst) if self.cast_wanted else None
        if grew and engine is not None and (dst, transfer_id) in \
                self.incoming:
            engine.incoming(transfer_id, self.names[host], attempt)
        if not report:
            return None
        report = dict(report)
        if report.get("state") != "failed":
            report["attempt"] = max(report.get("attempt", 0), attempt)
        return report

    def peer_request(self, ctxt, host, peer, request, timeout=None):
        """The peer's answer to ``request``: a preflight is answered by
        the peer's engine (``engine.preflight.answer``; allowed when the
        test has none) unless ``unanswered`` requests are left to get
        none (the peer is down); every request is kept in ``requests``.
        """
        dst = self.hosts[peer]
        with self.lock:
            self.requests.append((host, peer, request))
            engine = self.engines.get(dst)
            down = self.unanswered
            if down:
                self.unanswered -= 1
        if down or request.get("action") != preflight.ACTION:
            raise exception.PeerUnreachable(peer=peer,
                                            reason="connection refused")
        if engine is None:
            return {"allowed": True}
        return preflight.answer(engine.conf, engine.res, self.names[host],
                                request)

    def list_incoming(self, ctxt, host):
        with self.lock:
            return [{"transfer_id": tid, "peer": "a" if host == "dtn-b"
                     else "b", "report_state": (self.reports.get(
                         (h, tid)) or {}).get("state"),
                     "wanted_attempt": self.wanted.get((h, tid))}
                    for (h, tid) in self.incoming if h == host]
