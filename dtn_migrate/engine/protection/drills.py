"""Drills: proving on the cloud that holds a policy's replicas that each
one is present and intact, without touching the source or ongoing
replication.

Per replica of the catalog (``incoming``, ``current``), a drill checks
that the image is in Glance and active, that its size is the catalog's,
that the sha512 of the bytes Glance serves is the catalog's verified
hash, that ``qemu-img check`` passes on a qcow2 image, and (``clone``)
that a hidden copy can be created from it and becomes active; the copy
is removed afterwards.  The report keeps each image's outcome and the
time it took to make every replica usable: the measured RTO.

A drill reads every byte of every replica: one runs per policy at a
time, and at most ``[protection] max_running_drills`` on the cloud.
The bytes came from the peer: ``qemu-img`` reads them under resource
limits (``[protection] qemu_img_address_space``, ``qemu_img_cpu_time``,
through oslo.concurrency's prlimit), never takes a lock on them
(``--force-share``), and an image that names a backing file or an
external data file is ``invalid`` before ``qemu-img check`` opens it.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid

from oslo_concurrency import processutils
from oslo_log import log as logging
from oslo_utils import timeutils

from dtn_migrate.engine.protection import catalog
from dtn_migrate.engine import records
from dtn_migrate import exception

LOG = logging.getLogger(__name__)

RUNNING = "running"
PASSED = "passed"
FAILED = "failed"
ERROR = "error"
INTACT = "intact"
MISSING = "missing"
CORRUPT = "corrupt"
INVALID = "invalid"
#: qemu-img check's exit codes that mean the image is usable (0: clean,
#: 3: leaked clusters only).
QEMU_IMG_OK = (0, 3)
QEMU_IMG_TIMEOUT = 600
#: Keys of ``qemu-img info`` that name another file the image reads.
BACKING_KEYS = ("backing-filename", "full-backing-filename")
DATA_FILE_KEY = "data-file"
_TIMES = ("started_at", "finished_at", "created_at", "updated_at")


def _iso(row):
    return {k: records.iso(v) if k in _TIMES else v for k, v in row.items()}


def qemu_img_limits(conf):
    """The resource limits of qemu-img in a drill, from ``conf``."""
    return processutils.ProcessLimits(
        address_space=conf.protection.qemu_img_address_space << 20,
        cpu_time=conf.protection.qemu_img_cpu_time)


def _qemu_img(args, limits):
    """``qemu-img ARGS`` under ``limits`` (a ProcessLimits): the
    CompletedProcess (text).  FileNotFoundError when qemu-img is not
    installed; subprocess.TimeoutExpired after QEMU_IMG_TIMEOUT.
    """
    program = shutil.which("qemu-img")
    if program is None:
        raise FileNotFoundError("qemu-img")
    command = [sys.executable, "-m", "oslo_concurrency.prlimit"] + \
        limits.prlimit_args() + ["--", program] + list(args)
    return subprocess.run(command, capture_output=True, text=True,
                          timeout=QEMU_IMG_TIMEOUT)


def _failed(what, proc):
    """Why ``qemu-img WHAT`` failed, from its CompletedProcess."""
    if proc.returncode < 0:
        return "qemu-img %s was stopped by signal %d (its resource " \
               "limits: [protection] qemu_img_address_space, " \
               "qemu_img_cpu_time)" % (what, -proc.returncode)
    detail = (proc.stderr or proc.stdout or "").strip()
    return "qemu-img %s failed (exit %d): %s" % (what, proc.returncode,
                                                 detail[:500])


def unsafe(info):
    """Why ``qemu-img info``'s answer (a mapping) names a file besides
    the image (a backing file, an external data file), or None.
    """
    for key in BACKING_KEYS:
        if info.get(key):
            return "it names a backing file (%s)" % str(info[key])[:200]
    specific = info.get("format-specific") or {}
    data = specific.get("data") if isinstance(specific, dict) else None
    for found in (info, data if isinstance(data, dict) else {}):
        if found.get(DATA_FILE_KEY):
            return "it names an external data file (%s)" % str(
                found[DATA_FILE_KEY])[:200]
    return None


def qemu_img_inspect(path, limits):
    """(status, detail) of ``qemu-img info`` on a qcow2 file: INTACT
    (it may be checked), INVALID when it names a backing or external
    data file, CORRUPT when qemu-img cannot read it, None when qemu-img
    is not installed.
    """
    try:
        proc = _qemu_img(["info", "--output=json", "-f", "qcow2",
                          "--force-share", path], limits)
    except FileNotFoundError:
        return None, "qemu-img is not installed"
    except subprocess.TimeoutExpired:
        return CORRUPT, "qemu-img info did not finish in %d s" \
            % QEMU_IMG_TIMEOUT
    if proc.returncode != 0:
        return CORRUPT, _failed("info", proc)
    try:
        info = json.loads(proc.stdout)
    except ValueError:
        info = None
    if not isinstance(info, dict):
        return CORRUPT, "qemu-img info answered no JSON mapping"
    reason = unsafe(info)
    if reason is not None:
        return INVALID, "refused: %s" % reason
    return INTACT, None


def qemu_img_verify(path, limits):
    """(status, detail) of a qcow2 file: INTACT, INVALID (it names a
    backing or data file: not opened further), CORRUPT (qemu-img cannot
    read it, or its check fails) or None (qemu-img is not installed).
    """
    status, detail = qemu_img_inspect(path, limits)
    if status != INTACT:
        return status, detail
    usable, detail = qemu_img_check(path, limits)
    return {None: None, True: INTACT, False: CORRUPT}[usable], detail


def qemu_img_check(path, limits):
    """(usable, detail) of ``qemu-img check`` on a qcow2 file."""
    try:
        proc = _qemu_img(["check", "-f", "qcow2", "--output", "json",
                          "--force-share", path], limits)
    except FileNotFoundError:
        return None, "qemu-img is not installed"
    except subprocess.TimeoutExpired:
        return False, "qemu-img check did not finish in %d s" \
            % QEMU_IMG_TIMEOUT
    if proc.returncode in QEMU_IMG_OK:
        return True, None
    try:
        found = json.loads(proc.stdout)
        return False, "qemu-img check failed (exit %d): %s corruptions, " \
            "%s check errors" % (proc.returncode,
                                 found.get("corruptions", 0),
                                 found.get("check-errors", 0))
    except (ValueError, AttributeError):
        return False, _failed("check", proc)


class Drills:
    """The drills of one engine.

    With engines that share a jobboard (``jobs`` set), a drill is a job:
    any engine's conductor runs it (:meth:`run_claimed`), and another
    runs it again from its start if that engine dies during it.
    """

    def __init__(self, conf, db, res, notifier=None):
        self.conf = conf
        self.db = db
        self.res = res
        self.notifier = notifier
        #: Held from the count of running drills to the new one's row.
        self.lock = threading.Lock()
        #: The shared jobboard (engine.jobs.Jobs), or None: one engine.
        self.jobs = None

    def recover(self):
        """Drills left running by an engine that stopped end in error
        (their waiters would wait for ever).
        """
        for row in self.db.drill_get_all(filters={"state": RUNNING}):
            self._save(row, {"state": ERROR,
                             "error": "the engine stopped during the drill",
                             "finished_at": timeutils.utcnow()})

    def start(self, ctx, policy_id, clone=False):
        """Start a drill of the replicas this cloud holds for
        ``policy_id`` (of the caller's project unless admin); answers its
        record while it runs.
        """
        if not isinstance(clone, bool):
            raise exception.InvalidInput(reason="clone must be true or "
                                                "false")
        if not isinstance(policy_id, str) or len(policy_id) > 64:
            raise exception.ProtectionPolicyNotFound(
                policy_id=str(policy_id)[:64])
        policy = self.db.policy_get(
            policy_id, None if ctx.is_admin else ctx.project_id)
        found = self._replicas(policy)
        if not found:
            raise exception.ProtectionPolicyConflict(
                policy_id=policy["id"],
                state="without replicas on this cloud (%s policy; a drill "
                      "runs on the cloud that holds the replicas)"
                      % policy.get("role"), action="drill")
        with self.lock:
            self._check_room(policy)
            row = self.db.drill_create({
                "id": uuid.uuid4().hex, "policy_id": policy["id"],
                "policy_name": policy["name"],
                "project_id": policy["project_id"], "state": RUNNING,
                "clone": clone, "images_total": len(found),
                "started_at": timeutils.utcnow()})
        LOG.info("drill %s of policy %s (%s): %d replicas%s", row["id"],
                 policy["id"], policy["name"], len(found),
                 ", cloned" if clone else "")
        if self.jobs is None or self.jobs.post_drill(row["id"]) is None:
            # One engine, or a jobboard that does not answer: it runs
            # here.
            threading.Thread(target=self._run, args=(row, found),
                             name="drill-%s" % row["id"][:8],
                             daemon=True).start()
        return _iso(row)

    def _replicas(self, policy):
        return self.db.replica_get_all(filters={
            "direction": catalog.INCOMING, "peer": policy["peer"],
            "policy_id": policy["id"], "state": catalog.CURRENT})

    def running(self):
        """The ids of the drills that run (on any engine)."""
        return [row["id"] for row in
                self.db.drill_get_all(filters={"state": RUNNING})]

    def run_claimed(self, drill_id):
        """Run the drill whose job this engine's conductor claimed, from
        its start (again, when the engine that ran it died); a drill that
        ended, or whose policy is gone, is left as it is.
        """
        try:
            row = self.db.drill_get(drill_id)
        except exception.NotFound as exc:
            LOG.warning("drill %s not run: %s", drill_id, exc)
            return
        if row["state"] != RUNNING:
            return
        try:
            policy = self.db.policy_get(row["policy_id"])
        except exception.NotFound as exc:
            self._save(row, {"state": ERROR, "error": str(exc)[:2000],
                             "finished_at": timeutils.utcnow()})
            return
        found = self._replicas(policy)
        LOG.info("drill %s of policy %s runs on this engine: %d replicas",
                 drill_id, policy["id"], len(found))
        self._run(row, found)

    def _check_room(self, policy):
        """DrillConflict unless a drill of ``policy`` may start now: none
        of it runs, and fewer than ``[protection] max_running_drills``
        do on this cloud.
        """
        running = self.db.drill_get_all(filters={"state": RUNNING})
        for drill in running:
            if drill["policy_id"] == policy["id"]:
                raise exception.DrillConflict(
                    policy_id=policy["id"], reason="its drill %s runs "
                    "(started at %s)" % (drill["id"], records.iso(
                        drill.get("started_at"))))
        most = self.conf.protection.max_running_drills
        if len(running) >= most:
            raise exception.DrillConflict(
                policy_id=policy["id"], reason="%d drills run on this "
                "cloud, the most [protection] max_running_drills allows; "
                "start it again when one ends" % len(running))

    def _run(self, row, found):
        began = time.monotonic()
        try:
            results = [self.check(replica, row) for replica in found]
        except Exception as exc:  # noqa: B902 - recorded as the outcome
            LOG.exception("drill %s could not run", row["id"])
            self._save(row, {"state": ERROR, "error": str(exc)[:2000],
                             "finished_at": timeutils.utcnow()})
            return
        intact = sum(1 for r in results if r["status"] == INTACT)
        state = PASSED if intact == len(results) else FAILED
        changes = {"state": state, "images_intact": intact,
                   "images_bad": len(results) - intact,
                   "rto_seconds": round(time.monotonic() - began, 3),
                   "report": {"images": results},
                   "finished_at": timeutils.utcnow()}
        log = LOG.info if state == PASSED else LOG.warning
        log("drill %s %s: %d of %d replicas intact in %.1f s", row["id"],
            state, intact, len(results), changes["rto_seconds"])
        self._save(row, changes)

    def _save(self, row, changes):
        try:
            saved = self.db.drill_update(row["id"], changes)
        except exception.DtnMigrateException as exc:
            LOG.error("drill %s: outcome not saved: %s", row["id"], exc)
            return
        if self.notifier is not None:
            try:
                self.notifier.info({}, "dtn_migrate.drill.end", {
                    k: v for k, v in _iso(saved).items() if k != "report"})
            except Exception as exc:  # noqa: B902 - never fail the drill
                LOG.warning("notification drill.end failed: %s", exc)

    def check(self, replica, drill):
        """The outcome of one replica: {source_image_id,
        replica_image_id, image_name, status, checks, error, seconds}.
        """
        began = time.monotonic()
        out = {"source_image_id": replica["source_image_id"],
               "replica_image_id": replica["replica_image_id"],
               "image_name": replica.get("image_name"), "status": INTACT,
               "checks": {"present": False, "size": None, "hash": None,
                          "qemu_img": None, "clone": None},
               "error": None}
        try:
            self._check(replica, drill, out)
        except Exception as exc:  # noqa: B902 - this image's outcome
            if not isinstance(exc, (exception.DtnMigrateException,
                                    OSError)):
                LOG.exception("drill %s: replica %s", drill["id"],
                              replica["replica_image_id"])
            if out["status"] == INTACT:
                out["status"] = INVALID
            out["error"] = out["error"] or str(exc) or \
                exc.__class__.__name__
        out["seconds"] = round(time.monotonic() - began, 3)
        return out

    def _bad(self, out, status, error):
        out["status"], out["error"] = status, error

    def _check(self, replica, drill, out):
        checks = out["checks"]
        try:
            image = self.res.images.get(replica["replica_image_id"])
        except exception.ImageNotFound:
            return self._bad(out, MISSING, "the image is not in Glance")
        checks["present"] = image.get("status") == "active"
        if not checks["present"]:
            return self._bad(out, INVALID, "the image is %s"
                             % image.get("status"))
        checks["size"] = image.get("size") == replica.get("size")
        if not checks["size"]:
            return self._bad(out, CORRUPT, "size %s, the catalog says %s"
                             % (image.get("size"), replica.get("size")))
        # The bytes are kept on disk only for what needs a file.
        keep = image.get("disk_format") == "qcow2" or drill["clone"]
        directory = self.conf.protection.drill_dir or None
        if directory and keep:
            os.makedirs(directory, exist_ok=True)
        with tempfile.NamedTemporaryFile(prefix="dtnm-drill-",
                                         dir=directory if keep else None
                                         ) as f:
            digest, size = hashlib.sha512(), 0
            for chunk in self.res.images.download(image["id"]):
                digest.update(chunk)
                if keep:
                    f.write(chunk)
                size += len(chunk)
            f.flush()
            checks["hash"] = digest.hexdigest() == replica.get(
                "hash_value") and size == replica.get("size")
            if not checks["hash"]:
                return self._bad(out, CORRUPT, "the sha512 of its %d bytes "
                                 "is not the verified hash" % size)
            if image.get("disk_format") == "qcow2":
                status, error = qemu_img_verify(
                    f.name, qemu_img_limits(self.conf))
                checks["qemu_img"] = None if status is None \
                    else status == INTACT
                if checks["qemu_img"] is False:
                    return self._bad(out, status, error)
            if drill["clone"]:
                checks["clone"], error = self._clone(image, drill, f.name,
                                                     size)
                if not checks["clone"]:
                    return self._bad(out, INVALID, error)

    def _clone(self, image, drill, path, size):
        """Create a hidden copy of ``image`` in the drill's project from
        its data, wait for it to be active, remove it.  (ok, error).
        """
        name = image.get("name") or image["id"]
        fields = {"name": "drill-%s-%s" % (drill["id"][:8], name),
                  "disk_format": image.get("disk_format"),
                  "container_format": image.get("container_format"),
                  "visibility": "private", "os_hidden": True,
                  "owner": self.conf.protection.drill_project or
                  drill.get("project_id")}
        fields = {k: v for k, v in fields.items() if v is not None}
        clone = self.res.images.create(fields)
        try:
            done = self.res.images.upload(clone["id"],
                                          lambda: open(path, "rb"), size)
            if done.get("status") != "active" or \
                    done.get("os_hash_value") != image.get("os_hash_value"):
                return False, "the clone is %s with hash %s" % (
                    done.get("status"), done.get("os_hash_value"))
            return True, None
        finally:
            try:
                self.res.images.delete(clone["id"])
            except exception.DtnMigrateException as exc:
                LOG.warning("drill %s: clone %s not removed: %s",
                            drill["id"], clone["id"], exc)
