"""Tasks of an outgoing migration (the source cloud's engine).

Each is idempotent: a flow reloaded after a crash runs its interrupted
tasks again from their start, and they pick up what is already done
(the staged watermark, the agent's transfer of the same id, the peer's
report).
"""

import json

from oslo_log import log as logging

from dtn_migrate.engine import resources as res_mod
from dtn_migrate.engine.tasks import base
from dtn_migrate import exception
from dtn_migrate.image import metadata
from dtn_migrate.staging import copy
from dtn_migrate.staging import watermark

LOG = logging.getLogger(__name__)

DESCRIPTOR_VERSION = 1
#: Largest descriptor (image metadata) a migration carries.
MAX_DESCRIPTOR = 64 << 10


class GetSourceImage(base.MigrationTask):
    """Read the image from this cloud's Glance and check it can move."""

    default_name = "get-source-image"
    default_provides = "descriptor"

    def execute(self, migration_id, image_id):
        image = self.res.images.get(image_id)
        metadata.check_migratable(image)
        descriptor = metadata.describe(image)
        self.live(migration_id).stage("export", size=descriptor["size"],
                                      done=0, state="queued")
        return descriptor


class CheckPeer(base.MigrationTask):
    """The DTN agent answers and knows the peer."""

    default_name = "check-peer"

    def execute(self, peer):
        info = self.res.agent.ping(base.CTXT, self.res.agent_host)
        if peer not in info.get("peers", ()):
            raise exception.PeerNotFound(
                peer=peer, known=", ".join(info.get("peers", ())) or "none")


def descriptor_payload(transfer_id, descriptor, options, attempt):
    return {"version": DESCRIPTOR_VERSION, "transfer_id": transfer_id,
            "attempt": attempt, "image": descriptor,
            "options": {k: options.get(k) for k in (
                "keep_id", "visibility", "target_project", "verify",
                "mode")}}


class WriteDescriptor(base.MigrationTask):
    """Stage ``image.json``: the image's metadata and the request's
    options, which travel to the peer with the data.
    """

    default_name = "write-descriptor"

    def execute(self, transfer_id, descriptor, options, attempt):
        data = json.dumps(descriptor_payload(transfer_id, descriptor,
                                             options, attempt),
                          sort_keys=True).encode()
        if len(data) > MAX_DESCRIPTOR:
            raise exception.ImageUnsupported(
                image_id=descriptor["id"],
                reason="its metadata is larger than %d bytes"
                       % MAX_DESCRIPTOR)
        backend = self.res.backend()
        name = res_mod.staged_name(transfer_id, res_mod.DESCRIPTOR)
        if backend.read_small(name, limit=MAX_DESCRIPTOR + 1) != data:
            backend.write_small(name, data)


class StageImage(base.MigrationTask):
    """Export the image from Glance onto the DTN's export, publishing
    its committed watermark.  A rerun resumes after the watermark with a
    ranged download: staged bytes are not exported again.
    """

    default_name = "stage-image"
    default_provides = "export_result"

    def execute(self, migration_id, transfer_id, image_id, descriptor):
        live = self.live(migration_id)
        backend = self.res.backend()
        name = res_mod.staged_name(transfer_id, res_mod.DATA)
        size = descriptor["size"]
        live.stage("export", state="running", size=size)

        def progress(p):
            live.stage("export", done=p.committed, rate=p.rate)

        def source(offset):
            live.stage("export", resumed_from=offset)
            return self.res.images.download(image_id, offset)

        try:
            result = copy.stage(
                backend, name, source, size,
                expected_sha512=descriptor["os_hash_value"],
                options=self.res.copy_options(), cancel=live.cancel,
                progress=progress)
        except copy.Cancelled:
            raise base.Cancelled(migration_id=migration_id)
        except copy.ChecksumMismatch as exc:
            raise exception.ImageHashMismatch(
                image_id=image_id, where="the exported data",
                actual=str(exc), expected=descriptor["os_hash_value"])
        live.stage("export", state="complete", done=size, rate=result.rate,
                   resumed_from=result.start)
        LOG.info("migration %s: staged %s (%d bytes, %d exported by this "
                 "run in %.1f s)", migration_id, name, size,
                 result.bytes_copied, result.seconds)
        return {"start": result.start, "bytes_copied": result.bytes_copied,
                "seconds": result.seconds}


class TransferImage(base.MigrationTask):
    """Send the staged files to the peer DTN through this cloud's agent,
    following the data file's watermark in pipelined mode.
    """

    default_name = "transfer-image"

    def execute(self, migration_id, transfer_id, peer, descriptor, options):
        live = self.live(migration_id)
        agent, host = self.res.agent, self.res.agent_host
        backend = self.res.backend()
        desc = res_mod.staged_name(transfer_id, res_mod.DESCRIPTOR)
        data = res_mod.staged_name(transfer_id, res_mod.DATA)
        spec = {"path": data, "name": data, "size": descriptor["size"],
                "sha512": descriptor["os_hash_value"]}
        if options.get("mode") == "pipelined":
            spec.update(growing=True, watermark_file=watermark.side_file(
                data, self.conf.staging.watermark_suffix))
            # The agent opens the file at once: wait until staging began.
            while backend.size(data) is None:
                self.pause(migration_id, 0.2)
        live.stage("transfer", state="running", size=descriptor["size"])
        status = agent.start_transfer(
            base.CTXT, host, peer, [{"path": desc, "name": desc}, spec],
            options=options.get("transfer_options") or None,
            transfer_id=transfer_id)
        if status.get("state") in ("failed", "cancelled"):
            status = agent.resume_transfer(base.CTXT, host, transfer_id)
        clock = base.StallClock(migration_id, "transfer",
                                self.conf.engine.stall_timeout)
        while True:
            state = status.get("state")
            live.stage("transfer", state=state,
                       done=_data_bytes(status, data),
                       rate=status.get("rate"), eta=status.get("eta"))
            if state == "complete":
                return
            if state in ("failed", "cancelled"):
                raise exception.MigrationFailed(
                    migration_id=migration_id,
                    reason="transfer to %s %s: %s" % (
                        peer, state, status.get("error") or "no reason"))
            clock.see((status.get("bytes_done"),
                       live.snapshot().get("export", {}).get("done")))
            self.pause(migration_id)
            status = agent.get_transfer(base.CTXT, host, transfer_id)

    def revert(self, transfer_id, *args, **kwargs):
        try:
            self.res.agent.cancel_transfer(base.CTXT, self.res.agent_host,
                                           transfer_id)
        except Exception as exc:  # noqa: B902 - best effort
            LOG.warning("could not cancel transfer %s: %s", transfer_id, exc)


def _data_bytes(status, data_name):
    for f in status.get("files") or ():
        if f.get("name") == data_name:
            return f.get("bytes_done")
    return status.get("bytes_done")


class AwaitPeerImport(base.MigrationTask):
    """Follow the peer's import report (peer engine -> peer agent -> this
    DTN's agent) until the image is active there with the same hash.
    """

    default_name = "await-peer-import"
    default_provides = "peer_image"

    def execute(self, migration_id, transfer_id, peer, descriptor, attempt):
        live = self.live(migration_id)
        agent, host = self.res.agent, self.res.agent_host
        clock = base.StallClock(migration_id, "peer import",
                                self.conf.engine.stall_timeout)
        while True:
            try:
                report = agent.get_peer_report(base.CTXT, host, peer,
                                               transfer_id)
            except exception.PeerUnreachable as exc:
                LOG.warning("migration %s: %s; retrying", migration_id, exc)
                report = None
            if report and report.get("attempt", 0) >= attempt:
                state = report.get("state")
                live.stage("import", state=state, done=report.get("bytes"),
                           size=descriptor["size"])
                if state == "active":
                    live.stage("import", done=descriptor["size"])
                    got = report.get("os_hash_value")
                    if got != descriptor["os_hash_value"]:
                        raise exception.ImageHashMismatch(
                            image_id=report.get("image_id"),
                            where="the peer's image", actual=got,
                            expected=descriptor["os_hash_value"])
                    return {k: report.get(k) for k in (
                        "image_id", "os_hash_value", "status", "verified",
                        "differences")}
                if state == "failed":
                    raise exception.MigrationFailed(
                        migration_id=migration_id,
                        reason="import at %s failed: %s"
                               % (peer, report.get("error")))
            clock.see((live.updated, report and report.get("bytes")))
            self.pause(migration_id)


class CleanupStaging(base.MigrationTask):
    """Remove the staged files once the peer holds the image."""

    default_name = "cleanup-staging"

    def execute(self, transfer_id):
        backend = self.res.backend()
        for leaf in (res_mod.DATA, res_mod.DESCRIPTOR):
            copy.cleanup(backend, res_mod.staged_name(transfer_id, leaf),
                         self.conf.staging.watermark_suffix)
