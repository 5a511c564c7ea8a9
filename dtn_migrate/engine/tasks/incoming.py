"""Tasks of an incoming migration (the peer cloud's engine).

The DTN agent tells the engine a transfer arrived; these tasks read the
migration's descriptor from the DTN's export, create the image in this
cloud's Glance, stream the staged data into it while it still arrives
(pipelined) or once complete (serial), verify it and report back through
the agent.
"""

import json
import threading
import time
import uuid

from oslo_log import log as logging
import tenacity

from dtn_migrate.engine import events
from dtn_migrate.engine import import_rules
from dtn_migrate.engine import requests
from dtn_migrate.engine import resources as res_mod
from dtn_migrate.engine.tasks import base
from dtn_migrate.engine.tasks import outgoing
from dtn_migrate import exception
from dtn_migrate.image import marker
from dtn_migrate.image import metadata
from dtn_migrate import pusher
from dtn_migrate.staging import backend as staging_backend
from dtn_migrate.staging import stream as staging_stream
from dtn_migrate.staging import watermark

LOG = logging.getLogger(__name__)

#: Tasks of one import attempt (retried together; see flows.incoming).
ATTEMPT_TASKS = frozenset(("create-image", "upload-image", "verify-image"))
#: Longest wait between two tries of the final report.
MAX_REPORT_DELAY = 30.0


def incoming_file(res, transfer_id, name, size):
    """Follower info of an incoming file: the agent's view while it
    arrives (pushed by the agent, or asked when nothing came for a
    while); the staged file itself once the agent no longer knows the
    transfer (restarted after it completed).  None when nothing is known
    (yet), the agent not answering included.
    """
    def ask():
        return res.agent.get_watermark(base.CTXT, res.agent_host,
                                       transfer_id, name)

    try:
        info = res.watched(events.WATERMARK, transfer_id, ask, name)
        if info and info.get("state") in watermark.FAILED_STATES:
            # Perhaps pushed before the transfer was sent again: a
            # failure is taken from the agent itself.
            info = res.events.fetch(
                events.key(events.WATERMARK, transfer_id, name), ask, 0)
        return info
    except base.TRANSIENT_RPC as exc:
        LOG.warning("transfer %s: no watermark of %s from the agent (%s)",
                    transfer_id, name, exc.__class__.__name__)
        return None
    except exception.TransferNotFound:
        have = res.backend().size(name)
        if size is not None and have == size:
            return {"durable": size, "state": "done", "path": None}
        return None


def _validate(payload, transfer_id):
    if not isinstance(payload, dict) or \
            payload.get("version") != outgoing.DESCRIPTOR_VERSION:
        raise exception.InvalidInput(reason="unsupported migration "
                                            "descriptor")
    if payload.get("transfer_id") != transfer_id:
        raise exception.InvalidInput(reason="descriptor belongs to "
                                            "another transfer")
    image = payload.get("image")
    if not isinstance(image, dict) or not isinstance(image.get("size"),
                                                     int):
        raise exception.InvalidInput(reason="descriptor has no image")
    if not isinstance(payload.get("options"), dict):
        raise exception.InvalidInput(reason="descriptor has no options")
    if not isinstance(payload.get("attempt"), int):
        raise exception.InvalidInput(reason="descriptor has no attempt")
    if payload.get("protection") is not None:
        payload["protection"] = requests.protection(payload["protection"])
    if payload.get("source_project") is not None:
        payload["source_project"] = requests.project(
            payload["source_project"], "descriptor source_project")
    return payload


class ReadDescriptor(base.MigrationTask):
    """Wait for ``image.json`` to arrive complete and read it.

    The import's attempt is the larger of the descriptor's and the one
    the source asked its report for (``attempt``, through the agents):
    a retried migration reuses a transfer that already arrived, with the
    first attempt's descriptor.

    The receiving cloud's rules for ``peer``
    (``import_rules.import_target``, which the source's preflight asked
    too) decide the image's owner and visibility here, before anything
    is created: whatever the preflight answered, a request they do not
    allow fails the import at once (no retry), and the failure's report
    tells the source why.
    """

    default_name = "read-descriptor"
    default_provides = "incoming"

    def execute(self, migration_id, transfer_id, attempt, peer):
        name = res_mod.staged_name(transfer_id, res_mod.DESCRIPTOR)

        def step():
            info = incoming_file(self.res, transfer_id, name, None)
            if info and info.get("state") == "done":
                return True, None
            if info is None and self.res.backend().size(name):
                return True, None   # agent restarted; file is complete
            return None, info and info.get("durable")

        self.follow(migration_id, "descriptor", step,
                    event=events.key(events.WATERMARK, transfer_id, name))
        data = self.res.backend().read_small(
            name, limit=outgoing.MAX_DESCRIPTOR + 1)
        try:
            payload = json.loads(data)
        except (TypeError, ValueError):
            raise exception.InvalidInput(reason="descriptor is not JSON")
        payload = _validate(payload, transfer_id)
        payload["attempt"] = max(payload["attempt"], attempt or 0)
        payload["target"] = import_rules.import_target(
            self.conf, peer, payload["image"], payload["options"],
            transfer_id, payload.get("source_project"))
        return payload


def _owner(incoming):
    """The project an import's image is in (None: the engine's own)."""
    return (incoming.get("target") or {}).get("owner")


class CreateImage(base.MigrationTask):
    """Create the image (no data yet) with the source's metadata, in the
    project and with the visibility the receiving cloud's rules gave it;
    reuse the one a previous run of this import created.

    Only the images this service imported from ``peer``'s transfer into
    that project count (dtn_migrate.image.marker): others that a Glance
    user marked with the transfer id are never reused nor deleted.
    """

    default_name = "create-image"
    default_provides = "image_id"

    def execute(self, migration_id, transfer_id, incoming, peer):
        images = self.res.images
        desc, opts = incoming["image"], incoming["options"]
        # Decided by read-descriptor; a flow saved before the rules
        # existed decides here, still before any image is created.
        target = incoming.get("target") or import_rules.import_target(
            self.conf, peer, desc, opts, transfer_id)
        found = sorted(self.res.imported(transfer_id, peer,
                                         target["owner"]),
                       key=lambda i: i.get("status") != "active")
        for image in found:
            if image.get("status") in ("queued", "active", "saving",
                                       "uploading"):
                LOG.info("import %s: reusing image %s (%s)", migration_id,
                         image["id"], image["status"])
                return image["id"]
            images.delete(image["id"])
        keep_id = bool(opts.get("keep_id"))
        # The seal names the image's id: chosen here, not by Glance.
        image_id = desc.get("id") if keep_id else str(uuid.uuid4())
        args = metadata.create_args(
            desc, keep_id=keep_id, visibility=target["visibility"],
            owner=target["owner"], extra_properties=marker.properties(
                self.res.seal_key(), image_id, transfer_id, peer,
                target["owner"]))
        args["id"] = image_id
        try:
            image = images.create(args)
        except exception.Conflict:
            # A create that Glance's retries asked twice: the first one
            # made it.  Another image of that id is not this import's.
            image = images.get(image_id)
            if not marker.genuine(self.res.seal_key(), image, transfer_id,
                                  peer, target["owner"]):
                raise
            # Glance writes an image's tags after its row: a first create
            # that failed (500) in between left the image without them.
            tags = list(args.get("tags") or ())
            if sorted(image.get("tags") or ()) != sorted(tags):
                image = images.update(image_id, {"tags": tags})
        LOG.info("import %s: created image %s", migration_id, image["id"])
        return image["id"]

    def revert(self, migration_id, transfer_id, incoming, result=None,
               flow_failures=None, peer=None, **kwargs):
        """Delete the half-imported images of this transfer, but never a
        verified one: after a failure later in the flow (the report, the
        cleanup) the image is kept.
        """
        if self.fenced(migration_id,
                       "the removal of transfer %s's half-imported images"
                       % transfer_id):
            return
        after_import = not set(flow_failures or ()) & ATTEMPT_TASKS
        ids = {result} if isinstance(result, str) else set()
        try:
            found = self.res.imported(transfer_id, peer, _owner(incoming))
        except exception.DtnMigrateException as exc:
            LOG.warning("import of %s: could not look for images to "
                        "remove: %s", transfer_id, exc)
            found = [{"id": i} for i in ids]
        for image in found:
            if after_import and _verified(image, incoming):
                LOG.info("import of %s: keeping verified image %s",
                         transfer_id, image["id"])
                ids.discard(image["id"])
            else:
                ids.add(image["id"])
        for image_id in ids:
            LOG.info("import of %s: deleting half-imported image %s",
                     transfer_id, image_id)
            try:
                self.res.images.delete(image_id, unprotect=True)
            except exception.DtnMigrateException as exc:
                LOG.warning("could not delete image %s: %s", image_id, exc)


def _verified(image, incoming):
    """The image is active with the data the source sent."""
    return image.get("status") == "active" and \
        image.get("os_hash_value") == incoming["image"]["os_hash_value"]


def _this_attempt(get_info):
    """``get_info`` without a failure that was there before this attempt
    began: the sink keeps the state of the transfer's last run of the
    file (a sha512 mismatch, say) until the source sends it again, which
    a retry does after this import may have started.  That state reads
    as nothing known yet (None) until it changes.
    """
    first = get_info()
    stale = [first] if first and \
        first.get("state") in watermark.FAILED_STATES else []

    def info():
        now = get_info()
        if stale and now and all(now.get(k) == stale[0].get(k)
                                 for k in ("state", "error", "durable")):
            return None
        stale.clear()
        return now
    return info


class UploadImage(base.MigrationTask):
    """Stream the staged data into the image, following the agent's
    durable watermark while the file still arrives.
    """

    default_name = "upload-image"

    def execute(self, migration_id, transfer_id, incoming, image_id):
        images = self.res.images
        live = self.live(migration_id)
        if images.get(image_id).get("status") == "active":
            return
        desc = incoming["image"]
        reporter = Reporter(self.res, migration_id, transfer_id,
                            incoming["attempt"])
        try:
            self._upload(migration_id, transfer_id, incoming, image_id,
                         reporter)
        except staging_backend.CopyCancelled:
            raise exception.MigrationCancelled(migration_id=migration_id)
        except staging_backend.ChecksumMismatch as exc:
            raise exception.ImageHashMismatch(
                image_id=image_id, where="the received data",
                actual=str(exc), expected=desc["os_hash_value"])
        finally:
            reporter.close()
        live.stage("import", state="uploaded", done=desc["size"])

    def _upload(self, migration_id, transfer_id, incoming, image_id,
                reporter):
        live = self.live(migration_id)
        desc, opts = incoming["image"], incoming["options"]
        size = desc["size"]
        name = res_mod.staged_name(transfer_id, res_mod.DATA)
        root = self.res.staging_root()
        live.stage("import", state="waiting", size=size, done=0)
        waiter = events.Waiter(self.res.events, events.key(
            events.WATERMARK, transfer_id, name))

        def marked():
            waiter.mark()       # before the read: no push is missed
            return incoming_file(self.res, transfer_id, name, size)

        info = _this_attempt(marked)

        if opts.get("mode") == "serial":
            def step():
                i = info()
                if i and i.get("state") == "done":
                    return True, None
                if i and i.get("state") in watermark.FAILED_STATES:
                    raise exception.MigrationFailed(
                        migration_id=migration_id,
                        reason="the transfer of the data failed")
                reporter.post("transferring", None)
                return None, i and i.get("durable")

            self.follow(migration_id, "transfer", step,
                        event=events.key(events.WATERMARK, transfer_id,
                                         name))
            follow = None
        else:
            # Woken by the agent's pushes, not only by its poll timer.
            follow = watermark.sink_follower(info, root=root,
                                             wait=waiter.wait)

        def progress(p):
            # Runs in the data path: never waits for the agent.
            live.stage("import", state="uploading", done=p.done,
                       rate=p.rate)
            reporter.post("uploading", p.done)

        # The sink compares the file's sha512 with the source's before
        # it says "done": with a follower, the last block waits for that
        # (until_done) and this side does not hash the data again.
        # Glance's os_hash_value is compared in verify-image.
        sink_hashes = follow is not None and base.sink_verifies(opts)
        expected = None if sink_hashes else desc["os_hash_value"]

        def open_stream():
            return staging_stream.open_staged(
                self.res.backend(), name, size, expected_sha512=expected,
                follow=follow, options=self.res.copy_options(),
                cancel=live.cancel, progress=progress,
                digest=not sink_hashes, until_done=sink_hashes,
                reuse_buffers=True)

        self.res.images.upload(image_id, open_stream, size)


class VerifyImage(base.MigrationTask):
    """The image is active with the source's hash and metadata.  Other
    images of this transfer (a create that Glance's retries made twice)
    are removed once one is verified.
    """

    default_name = "verify-image"
    default_provides = "peer_image"

    def execute(self, transfer_id, incoming, image_id, peer):
        desc, opts = incoming["image"], incoming["options"]
        image = self.res.images.get(image_id)
        if image.get("status") != "active":
            raise exception.MigrationFailed(
                migration_id=incoming["transfer_id"],
                reason="image %s is %s after the upload"
                       % (image_id, image.get("status")))
        if image.get("os_hash_value") != desc["os_hash_value"]:
            raise exception.ImageHashMismatch(
                image_id=image_id, where="the imported image",
                actual=image.get("os_hash_value"),
                expected=desc["os_hash_value"])
        differences = []
        if opts.get("verify", True):
            seen = {k: v for k, v in image.items()
                    if k not in marker.PROPERTIES}
            differences = [str(d) for d in metadata.compare(desc, seen)]
            if differences:
                raise exception.MetadataMismatch(
                    image_id=image_id, differences="; ".join(differences))
        self._remove_others(transfer_id, image_id, peer,
                            _owner(incoming))
        return {"image_id": image_id, "status": "active",
                "os_hash_value": image["os_hash_value"],
                "verified": bool(opts.get("verify", True)),
                "differences": differences}

    def _remove_others(self, transfer_id, image_id, peer, owner):
        try:
            others = [i["id"] for i in self.res.imported(transfer_id, peer,
                                                         owner)
                      if i["id"] != image_id]
            for other in others:
                LOG.info("import of %s: deleting image %s, a duplicate of "
                         "verified image %s", transfer_id, other, image_id)
                self.res.images.delete(other, unprotect=True)
        except exception.DtnMigrateException as exc:
            LOG.warning("import of %s: could not remove duplicate images: "
                        "%s", transfer_id, exc)


class ReportImport(base.MigrationTask):
    """Leave the result at this cloud's agent for the source to fetch.

    The image is verified by now: an agent that does not answer is asked
    again, with backoff, for up to ``stall_timeout`` seconds.
    """

    default_name = "report-import"

    def execute(self, migration_id, transfer_id, incoming, peer_image):
        report = dict(peer_image, state="active",
                      attempt=incoming["attempt"])

        def again(retry_state):
            LOG.warning("import %s: could not report the image to the "
                        "agent (%s); again in %.1f s", migration_id,
                        retry_state.outcome.exception(),
                        retry_state.upcoming_sleep)

        engine = self.conf.engine
        retrying = tenacity.Retrying(
            stop=tenacity.stop_before_delay(engine.stall_timeout),
            wait=tenacity.wait_exponential(multiplier=engine.poll_interval,
                                           max=MAX_REPORT_DELAY),
            sleep=lambda seconds: self.pause(migration_id, seconds),
            # A later claim's engine reports it now.
            retry=tenacity.retry_if_not_exception_type(
                exception.MigrationSuspended),
            before_sleep=again, reraise=True)
        retrying(self.res.command, migration_id, "set_import_report",
                 transfer_id, report)


class Reporter:
    """Progress reports to the agent, sent by a pusher thread so that
    the caller (the upload's data path) never waits for the agent: the
    latest report wins; a new state goes at once, otherwise at most one
    report every ``progress_interval``.

    Every report carries a ``beat`` (this engine's clock), and the
    latest is sent again every ``progress_interval`` while nothing
    changes: the source tells an import that waits (for Glance, for the
    bytes) from a peer engine that stopped answering (see
    dtn_migrate.engine.tasks.outgoing.PeerSilence).
    """

    def __init__(self, res, migration_id, transfer_id, attempt):
        self.res = res
        self.migration_id = migration_id
        self.transfer_id = transfer_id
        self.attempt = attempt
        self.interval = res.conf.engine.progress_interval
        self.pusher = pusher.EventPusher(
            self._send, self.interval,
            name="import-report-%s" % transfer_id[:8])
        self.latest = None
        self.closed = threading.Event()
        self.beats = None

    def post(self, state, done):
        """Queue a report, replacing any not sent yet."""
        self.latest = (state, done)
        self._push()
        if self.beats is None:
            self.beats = threading.Thread(
                target=self._beat, daemon=True,
                name="import-beat-%s" % self.transfer_id[:8])
            self.beats.start()

    def _push(self):
        state, done = self.latest
        report = {"state": state, "bytes": done, "attempt": self.attempt,
                  "beat": round(time.time(), 3)}
        self.pusher.push("report", self.transfer_id, None, lambda: report)

    def _beat(self):
        while not self.closed.wait(self.interval):
            self._push()

    def close(self):
        """Send nothing more; a report being sent is not waited for."""
        self.closed.set()
        self.pusher.close()

    def _send(self, kind, transfer_id, name, report, origin):
        try:
            self.res.command(self.migration_id, "set_import_report",
                             transfer_id, report)
        except Exception as exc:  # noqa: B902 - progress is best effort
            LOG.debug("progress report of %s failed: %s", transfer_id, exc)
