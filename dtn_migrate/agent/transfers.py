"""Outgoing transfers of an agent: start, run, persist, resume.

Each transfer lives in ``[agent] state_dir/<transfer id>/``: the manifest
(written before anything is sent), ``status.json`` (its state, rewritten
on every change) and, while it runs, the engine's object log.  A transfer
whose status says queued or running when the agent starts was cut short
(kill, crash, reboot) and is resumed.  Requests are validated strictly:
only regular files under the staging root are ever sent.
"""

import dataclasses
import json
import os
import threading
import time

from oslo_log import log as logging

from dtn_migrate.agent import ids
from dtn_migrate import exception
from dtn_migrate.common import states
from dtn_migrate.transfer import dataset
from dtn_migrate.transfer import errors
from dtn_migrate.transfer import paths
from dtn_migrate.transfer.source import transfer as source

LOG = logging.getLogger(__name__)

# Per-transfer overrides of [transfer] a request may carry.
OPTIONS = {"object_size": int, "streams": int, "io_threads": int,
           "rate_limit": int, "verify_sha512": bool, "logger": str,
           "log_method": str, "window_bytes": int}
_FILE_KEYS = {"path", "name", "sha512", "size", "growing", "watermark_file"}


def _invalid(reason):
    return exception.InvalidInput(reason=reason)


def throughput(status):
    """Bytes per second a finished transfer moved in its last run (the
    bytes it resumed from aside), or None if it moved none.
    """
    moved = (status.get("bytes_done") or 0) - \
        (status.get("resumed_bytes") or 0)
    elapsed = status.get("elapsed") or 0
    if moved <= 0 or elapsed <= 0:
        return None
    return round(moved / elapsed, 1)


class OutgoingTransfers:
    def __init__(self, conf, local_name, cfg, peers, rdma_device=None):
        self.conf = conf
        self.local_name = local_name
        self.cfg = cfg
        self.peers = peers
        self.rdma_device = rdma_device
        self.root = paths.StagingRoot(conf.agent.staging_root)
        self.state_dir = os.path.realpath(conf.agent.state_dir)
        if os.path.commonpath([self.state_dir, self.root.path]) == \
                self.root.path:
            raise exception.ConfigError(
                reason="[agent] state_dir must not be inside staging_root")
        os.makedirs(self.state_dir, exist_ok=True)
        self.lock = threading.Lock()
        self.running = {}           # transfer id -> SourceTransfer
        self.threads = {}
        self.slots = threading.BoundedSemaphore(conf.agent.max_outgoing)
        self.stopping = threading.Event()
        self._last = None           # peer -> (finished epoch, bytes/s)
        #: Called with a transfer id whenever its saved status changed.
        self.on_status = None

    # Requests.
    def start(self, peer, files, options=None, transfer_id=None):
        """Validate and queue a transfer; idempotent per transfer id."""
        if not isinstance(peer, str) or not peer:
            raise _invalid("peer must be a peer DTN name")
        self.peers.source_peer(peer)          # PeerNotFound early
        opts = self._options(options)
        if transfer_id is not None:
            transfer_id = ids.check_id(transfer_id)
            existing = self._load_manifest(transfer_id)
            if existing is not None:
                return self._same_request(existing, peer, files, opts)
        specs = self._specs(files)
        if not specs:
            raise _invalid("no files to transfer")
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            raise _invalid("two files would get the same name at the peer")
        opts.setdefault("object_size", self.cfg.object_size)
        manifest = dataset.Manifest.new(peer, specs, opts, transfer_id)
        tdir = self._dir(manifest.transfer_id)
        manifest.save(tdir)
        self._save_status(manifest.transfer_id, {"state": "queued",
                                                 "peer": peer})
        LOG.info("transfer %s to %s queued: %d files, %d bytes",
                 manifest.transfer_id, peer, len(specs),
                 sum(s.size for s in specs))
        self._spawn(manifest)
        return self.get(manifest.transfer_id)

    def get(self, transfer_id):
        transfer_id = ids.check_id(transfer_id)
        with self.lock:
            transfer = self.running.get(transfer_id)
            thread = self.threads.get(transfer_id)
        if transfer is not None:
            status = transfer.status()
            if status["state"] not in states.FINAL_STATES:
                return status
            # Report a final state only once it is on disk.
            if thread is not None:
                thread.join(10.0)
        status = self._load_status(transfer_id)
        if status is None:
            raise exception.TransferNotFound(transfer_id=transfer_id)
        return status

    def list(self):
        out = []
        try:
            entries = sorted(os.listdir(self.state_dir))
        except FileNotFoundError:
            return out
        for entry in entries:
            try:
                status = self.get(entry)
            except exception.DtnMigrateException:
                continue
            status.pop("files", None)
            out.append(status)
        return out

    def cancel(self, transfer_id):
        transfer_id = ids.check_id(transfer_id)
        with self.lock:
            transfer = self.running.get(transfer_id)
        if transfer is not None:
            transfer.cancel()
            self.threads[transfer_id].join(30.0)
        else:
            status = self._load_status(transfer_id)
            if status is None:
                raise exception.TransferNotFound(transfer_id=transfer_id)
            if status.get("state") in states.ACTIVE_STATES:
                status["state"] = "cancelled"
                self._save_status(transfer_id, status)
        return self.get(transfer_id)

    def resume(self, transfer_id):
        transfer_id = ids.check_id(transfer_id)
        with self.lock:
            if transfer_id in self.threads:     # running or queued
                return self.get(transfer_id)
        manifest = self._load_manifest(transfer_id)
        if manifest is None:
            raise exception.TransferNotFound(transfer_id=transfer_id)
        status = self._load_status(transfer_id) or {}
        if status.get("state") == "complete":
            return status
        status.update(state="queued", error=None)
        self._save_status(transfer_id, status)
        self._spawn(manifest)
        return self.get(transfer_id)

    def resume_interrupted(self):
        """Resume transfers a previous run of the agent left unfinished."""
        resumed = []
        for entry in sorted(os.listdir(self.state_dir)):
            status = self._load_status(entry)
            if status and status.get("state") in states.ACTIVE_STATES and \
                    entry not in self.threads:
                manifest = self._load_manifest(entry)
                if manifest is not None:
                    LOG.info("resuming interrupted transfer %s", entry)
                    self._spawn(manifest)
                    resumed.append(entry)
        return resumed

    def stop(self):
        """Stop running transfers; they stay 'running' on disk and are
        resumed by the next start of the agent.
        """
        self.stopping.set()
        with self.lock:
            transfers = list(self.running.values())
            threads = list(self.threads.values())
        for t in transfers:
            t.cancel()
        for th in threads:
            th.join(30.0)

    # Running.
    def _spawn(self, manifest):
        th = threading.Thread(target=self._run, args=(manifest,),
                              name="transfer-%s" % manifest.transfer_id[:8],
                              daemon=True)
        with self.lock:
            self.threads[manifest.transfer_id] = th
        th.start()

    def _run(self, manifest):
        tid = manifest.transfer_id
        self.slots.acquire()
        transfer = None
        try:
            if self.stopping.is_set():
                return
            cfg = dataclasses.replace(self.cfg, **{
                k: v for k, v in manifest.options.items() if k in OPTIONS})
            transfer = source.SourceTransfer(
                manifest, self.peers.source_peer(manifest.peer), cfg,
                self.state_dir, self.local_name,
                rdma_device=self.rdma_device)
            with self.lock:
                self.running[tid] = transfer
            self._save_status(tid, {"state": "running",
                                    "peer": manifest.peer})
            status = transfer.run()
            if self.stopping.is_set() and status["state"] == "cancelled":
                status["state"] = "running"     # interrupted: resume later
            if status["state"] == "complete":
                status.update(finished_at=time.time(),
                              throughput=throughput(status))
            self._save_status(tid, status)
            if status["state"] == "complete":
                self._note_last(manifest.peer, status)
        except Exception as exc:  # noqa: B902 - recorded in the status
            LOG.exception("transfer %s could not run", tid)
            self._save_status(tid, {"state": "failed", "error": str(exc),
                                    "peer": manifest.peer})
        finally:
            with self.lock:
                self.running.pop(tid, None)
                self.threads.pop(tid, None)
            if transfer is not None:
                transfer.close()
            self.slots.release()

    # Throughput.
    def last_completed(self, peer):
        """``(finished epoch, bytes/s)`` of the last transfer to ``peer``
        that completed (bytes/s None when it moved no new byte), or None
        if none did.  The state directory is read once, then kept up to
        date as transfers complete.
        """
        with self.lock:
            if self._last is None:
                self._last = {}
                for entry in self._entries():
                    self._note_last_locked(self._load_status(entry))
            return self._last.get(peer)

    def _entries(self):
        try:
            return os.listdir(self.state_dir)
        except OSError:
            return []

    def _note_last(self, peer, status):
        with self.lock:
            if self._last is not None:
                self._note_last_locked(dict(status, peer=peer))

    def _note_last_locked(self, status):
        if not status or status.get("state") != "complete":
            return
        when = status.get("finished_at")
        if not isinstance(when, (int, float)) or not status.get("peer"):
            return      # completed before agents recorded it
        known = self._last.get(status["peer"])
        if known is None or when >= known[0]:
            self._last[status["peer"]] = (when, status.get("throughput"))

    # Validation.
    def _options(self, options):
        if options is None:
            return {}
        if not isinstance(options, dict):
            raise _invalid("options must be a mapping")
        out = {}
        for key, value in options.items():
            kind = OPTIONS.get(key)
            if kind is None:
                raise _invalid("unknown option %r (allowed: %s)"
                               % (key, ", ".join(sorted(OPTIONS))))
            if not isinstance(value, kind) or (kind is int and
                                               isinstance(value, bool)):
                raise _invalid("option %s must be %s" % (key,
                                                         kind.__name__))
            out[key] = value
        try:
            dataclasses.replace(self.cfg, **out).validate()
        except ValueError as exc:
            raise _invalid(str(exc))
        return out

    def _specs(self, files):
        if not isinstance(files, list) or len(files) > 100000:
            raise _invalid("files must be a list (at most 100000 entries)")
        specs = []
        for item in files:
            if isinstance(item, str):
                item = {"path": item}
            if not isinstance(item, dict) or not isinstance(
                    item.get("path"), str):
                raise _invalid("each file is a path or a mapping with 'path'")
            unknown = set(item) - _FILE_KEYS
            if unknown:
                raise _invalid("unknown file keys: %s"
                               % ", ".join(sorted(unknown)))
            try:
                specs.extend(self._spec(item))
            except errors.TransferError as exc:
                raise _invalid(str(exc))
            except OSError as exc:
                raise _invalid("%s: %s" % (item["path"], exc.strerror))
        return specs

    def _spec(self, item):
        rel = paths.resolve_source(self.root, item["path"])
        full = os.path.join(self.root.path, rel)
        growing = item.get("growing", False)
        if not isinstance(growing, bool):
            raise _invalid("growing must be a boolean")
        if os.path.isdir(full) and not growing:
            if "name" in item or "sha512" in item:
                raise _invalid("name and sha512 apply to files, not to "
                               "directory %s" % item["path"])
            return dataset.expand(self.root.path, [full])
        name = item.get("name", rel)
        if not isinstance(name, str):
            raise _invalid("name must be a string")
        paths.check_name(name)
        sha512 = item.get("sha512")
        if sha512 is not None:
            if not isinstance(sha512, str) or len(sha512) != 128:
                raise _invalid("sha512 must be 128 hex digits")
            try:
                bytes.fromhex(sha512)
            except ValueError:
                raise _invalid("sha512 must be 128 hex digits")
        # Validated now (no symlink, a regular file), and pinned: the
        # source opens this very file (device and inode) later.
        fd = self.root.open_read(rel)
        try:
            st = os.fstat(fd)
        finally:
            os.close(fd)
        if growing:
            size = item.get("size")
            if not isinstance(size, int) or isinstance(size, bool) or \
                    size < 0:
                raise _invalid("a growing file needs its final size")
            wm = item.get("watermark_file")
            if wm is not None:
                wm = os.path.join(self.root.path,
                                  paths.resolve_source(self.root, wm))
            return [dataset.growing_spec(full, name, size, sha512, wm, st)]
        spec = dataset.spec_for_path(full, name, sha512, st)
        if "size" in item and item["size"] != spec.size:
            raise _invalid("%s is %d bytes, the request says %s"
                           % (item["path"], spec.size, item["size"]))
        return [spec]

    def _same_request(self, manifest, peer, files, opts):
        if manifest.peer != peer:
            raise exception.TransferConflict(
                transfer_id=manifest.transfer_id)
        return self.get(manifest.transfer_id)

    # Persistence.
    def has(self, transfer_hex):
        """Does this DTN send (or did it send) transfer ``transfer_hex``?"""
        return paths.is_transfer_id(transfer_hex) and \
            self._load_manifest(transfer_hex) is not None

    def _dir(self, transfer_id):
        return os.path.join(self.state_dir, transfer_id)

    def _load_manifest(self, transfer_id):
        try:
            return dataset.Manifest.load(self._dir(transfer_id))
        except (OSError, ValueError, KeyError):
            return None

    def _load_status(self, transfer_id):
        try:
            with open(os.path.join(self._dir(transfer_id),
                                   "status.json")) as f:
                status = json.load(f)
        except (OSError, ValueError):
            return None
        status.setdefault("transfer_id", transfer_id)
        return status

    def running_ids(self):
        with self.lock:
            return list(self.running)

    def _save_status(self, transfer_id, status):
        status = dict(status, transfer_id=transfer_id)
        dataset.write_json_atomic(
            os.path.join(self._dir(transfer_id), "status.json"), status)
        if self.on_status is not None:
            self.on_status(transfer_id)
