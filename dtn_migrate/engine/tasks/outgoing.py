"""Tasks of an outgoing migration (the source cloud's engine).

Each is idempotent: a flow reloaded after a crash runs its interrupted
tasks again from their start, and they pick up what is already done
(the staged watermark, the agent's transfer of the same id, the peer's
report).
"""

import functools
import json
import time

from oslo_log import log as logging

from dtn_migrate.common import states
from dtn_migrate.engine import events
from dtn_migrate.engine import preflight
from dtn_migrate.engine import resources as res_mod
from dtn_migrate.engine.tasks import base
from dtn_migrate import exception
from dtn_migrate.image import metadata
from dtn_migrate.staging import backend as staging_backend
from dtn_migrate.staging import copy
from dtn_migrate.staging import watermark
from dtn_migrate.transfer import report as report_mod

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
        return metadata.describe(image)


class CheckPeer(base.MigrationTask):
    """The DTN agent answers and knows the peer."""

    default_name = "check-peer"

    def execute(self, peer):
        self.res.check_peer(peer)


class Preflight(base.MigrationTask):
    """Ask the peer, before the first byte, whether it would import the
    image (``dtn_migrate.engine.preflight``): a refusal fails the
    migration at stage ``preflight`` with the peer's reason, before
    anything is staged or sent; a yes queues the export.  A peer that
    does not answer is asked again every ``RETRY_INTERVAL`` seconds
    until ``[engine] stall_timeout``, then the migration fails at this
    stage: nothing goes to a peer that did not say it would take it
    (its import still checks its rules on arrival).
    """

    default_name = "preflight"
    #: Seconds between two tries of a preflight that got no answer.
    RETRY_INTERVAL = 5.0

    def execute(self, migration_id, transfer_id, peer, descriptor, options,
                project_id=None):
        with self.stage_of(migration_id, states.PREFLIGHT):
            self._ask(migration_id, transfer_id, peer, descriptor, options,
                      project_id)

    def _ask(self, migration_id, transfer_id, peer, descriptor, options,
             project_id):
        live = self.live(migration_id)
        live.stage(states.PREFLIGHT, state="running")
        req = preflight.request(options, project_id, descriptor,
                                transfer_id)
        what = "the import of image %s" % descriptor["id"]
        last = []

        def step():
            try:
                preflight.ask(self.conf, self.res, peer, req, what)
            except exception.PeerUnreachable as exc:
                if not last:
                    LOG.warning("migration %s: no answer to the preflight "
                                "(%s); asking again every %.0f s",
                                migration_id, exc, self.RETRY_INTERVAL)
                last[:] = [exc]
                return None, None
            return True, None

        try:
            self.follow(migration_id, states.PREFLIGHT, step,
                        self.RETRY_INTERVAL)
        except exception.StageStalled:
            raise exception.MigrationFailed(
                migration_id=migration_id,
                reason="%s did not answer the preflight for %d s%s" % (
                    peer, self.conf.engine.stall_timeout,
                    ": %s" % last[0] if last else ""))
        live.stage(states.PREFLIGHT, state="complete")
        # The export waits for nothing more.
        live.stage("export", size=descriptor["size"], done=0,
                   state="queued")


def descriptor_payload(transfer_id, descriptor, options, attempt,
                       source_project=None):
    """What ``image.json`` says to the peer: the image, the options the
    peer applies, the policy the migration serves and
    ``source_project``, the project of this cloud that migrates (the
    migration's; the policy's for a protection policy), whose
    projects in the peer cloud the peer's rules decide
    (``[peer:<name>] project_map``).
    """
    payload = {"version": DESCRIPTOR_VERSION, "transfer_id": transfer_id,
               "attempt": attempt, "image": descriptor,
               "options": {k: options.get(k) for k in (
                   "keep_id", "visibility", "target_project", "verify",
                   "mode")}}
    if options.get("protection"):
        # The policy it serves: the peer keeps it with the replica.
        payload["protection"] = options["protection"]
    if source_project:
        payload["source_project"] = source_project
    return payload


class WriteDescriptor(base.MigrationTask):
    """Stage ``image.json``: the image's metadata and the request's
    options, which travel to the peer with the data.
    """

    default_name = "write-descriptor"

    def execute(self, transfer_id, descriptor, options, attempt,
                project_id=None):
        data = json.dumps(descriptor_payload(transfer_id, descriptor,
                                             options, attempt, project_id),
                          sort_keys=True).encode()
        if len(data) > MAX_DESCRIPTOR:
            raise exception.ImageUnsupported(
                image_id=descriptor["id"],
                reason="its metadata is larger than %d bytes"
                       % MAX_DESCRIPTOR)
        backend = self.res.backend()
        name = res_mod.staged_name(transfer_id, res_mod.DESCRIPTOR)
        staged = backend.read_small(name, limit=MAX_DESCRIPTOR + 1)
        if staged != data and not _earlier_attempt(staged, data):
            backend.write_small(name, data)


def _earlier_attempt(staged, data):
    """Whether ``staged`` is the descriptor of an earlier attempt of the
    same request.  It stays: the transfer that an earlier attempt
    defined may be sent on only with the very file it was defined with,
    and the peer imports for the attempt its source asks the report of
    (the larger of the two).  One an older release wrote, without the
    source project, stays too (the peer treats it as one that names no
    source project, as that release's peer did).
    """
    try:
        old, new = json.loads(staged), json.loads(data)
    except (TypeError, ValueError):
        return False
    if not isinstance(old, dict) or not isinstance(old.get("attempt"), int):
        return False
    if "source_project" not in old:
        new.pop("source_project", None)
    return old["attempt"] <= new["attempt"] and \
        dict(old, attempt=None) == dict(new, attempt=None)


def export_hashed(conf, options):
    """Whether the export hashes what it stages: when told to, or when
    no sink compares every byte with the image's sha512 further on.
    """
    return conf.staging.export_sha512 == "always" or \
        not base.sink_verifies(options)


class StageImage(base.MigrationTask):
    """Export the image from Glance onto the DTN's export, publishing
    its committed watermark.  A rerun resumes after the watermark with a
    ranged download: staged bytes are not exported again.

    The export is hashed only if the peer's sink does not check the
    whole file against the image's sha512 (see ``export_hashed``).
    """

    default_name = "stage-image"
    default_provides = "export_result"

    def execute(self, migration_id, transfer_id, image_id, descriptor,
                options):
        with self.stage_of(migration_id, "export"):
            return self._stage(migration_id, transfer_id, image_id,
                               descriptor, export_hashed(self.conf, options))

    def _stage(self, migration_id, transfer_id, image_id, descriptor,
               hashed):
        live = self.live(migration_id)
        backend = self.res.backend()
        name = res_mod.staged_name(transfer_id, res_mod.DATA)
        size = descriptor["size"]
        live.stage("export", state="running", size=size)

        def progress(p):
            live.stage("export", done=p.committed, rate=p.rate)

        def observer(committed, failed):
            # The published watermark, for the other stages to follow.
            live.stage("export", committed=committed, failed=failed)

        def source(offset):
            live.stage("export", resumed_from=offset)
            # A file object: the copy reads it into its aligned blocks.
            return self.res.images.open_download(image_id, offset,
                                                 stop=live.stop)

        try:
            result = copy.stage(
                backend, name, source, size,
                expected_sha512=descriptor["os_hash_value"] if hashed
                else None, digest=hashed,
                observer=observer, options=self.res.copy_options(),
                cancel=live.stop, progress=progress)
        except Exception as exc:
            if live.stop.is_set():
                # Stopped by a cancel, or because another stage failed.
                live.stage("export", state="cancelled"
                           if live.cancel.is_set() else "stopped")
                self.check_cancel(migration_id)
            live.stage("export", state="failed")
            if isinstance(exc, staging_backend.ChecksumMismatch):
                raise exception.ImageHashMismatch(
                    image_id=image_id, where="the exported data",
                    actual=str(exc), expected=descriptor["os_hash_value"])
            raise
        live.stage("export", state="complete", done=size, rate=result.rate,
                   resumed_from=result.start)
        LOG.info("migration %s: staged %s (%d bytes, %d exported by this "
                 "run in %.1f s)", migration_id, name, size,
                 result.bytes_copied, result.seconds)
        return {"start": result.start, "bytes_copied": result.bytes_copied,
                "seconds": result.seconds}


def _sink_mismatch(status, name):
    """The transfer failed file ``name`` because the sink's sha512 of it
    differed from the one declared.
    """
    return any(f.get("name") == name and f.get("code") == "hash_mismatch"
               for f in status.get("files") or ())


def _failed_stage(migration_id, stages, names, stage):
    """Raise StageFailed if one of the stages ``names`` failed."""
    for name in names:
        info = stages.get(name) or {}
        if info.get("state") in states.UNSUCCESSFUL_STATES or \
                info.get("failed"):
            raise exception.StageFailed(migration_id=migration_id,
                                        stage=stage,
                                        reason="%s failed" % name)


#: Seconds a failed peer import waits for a running export or transfer
#: to end, whose failure would explain it (see
#: AwaitPeerImport._transfer_may_explain).
IMPORT_FAILURE_GRACE = 5.0


class TransferImage(base.MigrationTask):
    """Send the staged files to the peer DTN through this cloud's agent,
    following the data file's watermark in pipelined mode.
    """

    default_name = "transfer-image"

    def execute(self, migration_id, transfer_id, peer, descriptor, options):
        with self.stage_of(migration_id, "transfer"):
            self._transfer(migration_id, transfer_id, peer, descriptor,
                           options)

    def _transfer(self, migration_id, transfer_id, peer, descriptor,
                  options):
        live = self.live(migration_id)
        command = functools.partial(self.res.command, migration_id)
        desc = res_mod.staged_name(transfer_id, res_mod.DESCRIPTOR)
        data = res_mod.staged_name(transfer_id, res_mod.DATA)
        spec = {"path": data, "name": data, "size": descriptor["size"],
                "sha512": descriptor["os_hash_value"]}
        pipelined = options.get("mode") == "pipelined"
        if pipelined:
            spec.update(growing=True, watermark_file=watermark.side_file(
                data, self.conf.staging.watermark_suffix))
            # The agent opens the file at once: wait until staging began.
            self._await_staging(migration_id, data)
        live.stage("transfer", state="running", size=descriptor["size"])
        status = self._call(migration_id, "starting the transfer",
                            command, "start_transfer", peer,
                            [{"path": desc, "name": desc}, spec],
                            options=options.get("transfer_options") or None,
                            transfer_id=transfer_id)
        if status.get("state") in states.UNSUCCESSFUL_STATES:
            status = self._call(migration_id, "resuming the transfer",
                                command, "resume_transfer", transfer_id)
        latest = [status]
        key = events.key(events.TRANSFER, transfer_id)

        answered = []

        def asked():
            status = command("get_transfer", transfer_id)
            answered.append(status)
            return status

        def step():
            status = latest[0]
            state = status.get("state")
            live.stage("transfer", state=state,
                       done=_data_bytes(status, data),
                       rate=status.get("rate"), eta=status.get("eta"))
            if state == "complete":
                return True, None
            if state in states.UNSUCCESSFUL_STATES:
                if state == "failed" and _sink_mismatch(status, data) and \
                        not export_hashed(self.conf, options):
                    self._check_staged(migration_id, data, descriptor)
                raise exception.MigrationFailed(
                    migration_id=migration_id,
                    reason="transfer to %s %s: %s" % (
                        peer, state, status.get("error") or "no reason"))
            stages = live.snapshot()
            if pipelined:
                _failed_stage(migration_id, stages, ("export",), "transfer")
            progress = (status.get("bytes_done"),
                        stages.get("export", {}).get("done"))
            # Seen by the next step (a transient failure keeps this one):
            # the status the agent pushed, or asked when none came.
            answered.clear()
            latest[0] = self.res.watched(
                events.TRANSFER, transfer_id, asked) or latest[0]
            if latest[0].get("state") in states.FINAL_STATES and not answered:
                # Pushed before this run resumed the transfer, perhaps:
                # an end is taken from the agent itself.
                latest[0] = asked()
                self.res.events.post(key, latest[0], pushed=False)
            return None, progress

        self.follow(migration_id, "transfer", step, event=key)

    def _call(self, migration_id, what, call, *args, **kwargs):
        """An idempotent agent call, repeated after transient failures."""
        return self.follow(migration_id, what,
                           lambda: (call(*args, **kwargs), None))

    def _check_staged(self, migration_id, data, descriptor):
        """The peer's sink found the data's sha512 wrong, and nothing
        hashed the export: read the staged copy back.  A wrong copy is
        invalidated (a retry exports the image again into the same file,
        which the transfer then sends from its start) and named in the
        error; a right one leaves the transfer's own failure to explain.
        """
        live = self.live(migration_id)
        backend = self.res.backend()
        expected = descriptor["os_hash_value"]
        LOG.warning("migration %s: the peer found the sha512 of %s wrong; "
                    "hashing the staged copy", migration_id, data)
        actual = copy.staged_sha512(backend, data, descriptor["size"],
                                    self.res.copy_options(), live.stop)
        if actual == expected:
            LOG.warning("migration %s: the staged copy of %s matches the "
                        "image's sha512: the bytes changed after staging",
                        migration_id, data)
            return
        copy.invalidate(backend, data, self.conf.staging.watermark_suffix)
        raise exception.ImageHashMismatch(
            image_id=descriptor["id"],
            where="the staged copy (invalidated: a retry exports the image "
                  "again)", actual=actual, expected=expected)

    def _await_staging(self, migration_id, data):
        """Wait until the staged data file exists and its watermark is
        this run's (not the failure an earlier attempt left, which the
        agent would take for this one's: staging republishes the mark
        when it resumes); fail when staging failed or nothing happens
        for ``stall_timeout``.
        """
        live = self.live(migration_id)
        backend = self.res.backend()
        suffix = self.conf.staging.watermark_suffix
        # A failure left by an earlier attempt is not this one's.
        before = copy.status(backend, data, suffix)

        def step():
            mark = copy.status(backend, data, suffix)
            if backend.size(data) is not None and \
                    not (mark is not None and mark[1]):
                return True, None
            stages = live.snapshot()
            export = stages.get("export") or {}
            if mark is not None and mark[1] and mark != before:
                raise exception.StageFailed(migration_id=migration_id,
                                            stage="transfer",
                                            reason="staging failed")
            _failed_stage(migration_id, stages, ("export",), "transfer")
            return None, (mark, export.get("state"), export.get("committed"))

        self.follow(migration_id, "staging", step, 0.2)

    def revert(self, migration_id, transfer_id, *args, **kwargs):
        if self.fenced(migration_id, "the cancel of transfer %s"
                       % transfer_id):
            return
        self.res.cancel_transfer_quietly(transfer_id, migration_id)


def _data_bytes(status, data_name):
    for f in status.get("files") or ():
        if f.get("name") == data_name:
            return f.get("bytes_done")
    return status.get("bytes_done")


def silence_limit(conf):
    """Seconds without news from the peer's import after which the peer
    is not answering: its engine sends a report at least every
    ``progress_interval`` (three may be missed), and this side hears
    of it within ``event_fallback_interval`` if a push was lost.
    """
    engine = conf.engine
    return 3 * engine.progress_interval + max(
        engine.event_fallback_interval, engine.poll_interval)


class PeerSilence:
    """Whether the peer answers for its import: a peer engine sends a
    report with a new ``beat`` every ``progress_interval``
    (dtn_migrate.engine.tasks.incoming.Reporter).  Once one came, no new
    one for ``limit`` seconds (or the peer DTN unreachable that long)
    marks the migration's peer silent since the last one
    (Live.peer_silent); the next one clears it.
    """

    def __init__(self, live, limit, clock=time.monotonic, wall=time.time):
        self.live = live
        self.limit = limit
        self.clock = clock
        self.wall = wall
        self.last = None        # (beat, state, bytes) of the last report
        self.heard = None       # (clock, wall) when it came
        self.beats = False

    def see(self, report):
        """Note ``report`` (None: none, or the peer unreachable)."""
        now = self.clock()
        if isinstance(report, dict):
            mark = (report.get("beat"), report.get("state"),
                    report.get("bytes"))
            # A peer of a release that sends no beats is not watched.
            self.beats = self.beats or "beat" in report
            if mark != self.last:
                self.last = mark
                self.heard = (now, self.wall())
                if self.live.peer_silent_since is not None:
                    self.live.peer_silent(None)
                return
        if self.beats and now - self.heard[0] > self.limit and \
                self.live.peer_silent_since is None:
            self.live.peer_silent(self.heard[1])


class AwaitPeerImport(base.MigrationTask):
    """Follow the peer's import report (peer engine -> peer agent -> this
    DTN's agent) until the image is active there with the same hash.

    Asking for the report of attempt N tells the peer that this attempt
    waits, so that it imports a transfer again after a failed import;
    only reports of attempt N or later count.
    """

    default_name = "await-peer-import"
    default_provides = "peer_image"

    def execute(self, migration_id, transfer_id, peer, descriptor, attempt):
        with self.stage_of(migration_id, "import"):
            return self._await(migration_id, transfer_id, peer, descriptor,
                               attempt)

    def _await(self, migration_id, transfer_id, peer, descriptor, attempt):
        live = self.live(migration_id)
        agent, host = self.res.agent, self.res.agent_host

        def ask():
            return agent.get_peer_report(base.CTXT, host, peer, transfer_id,
                                         attempt=attempt)

        silence = PeerSilence(live, silence_limit(self.conf))

        def step():
            try:
                # The first step asks (which tells the peer the attempt
                # and opens the agent's report channel); then the agent
                # pushes what the peer pushes.
                if first:
                    first.clear()
                    report = ask()
                    self.res.events.post(key, report, pushed=False)
                else:
                    report = self.res.watched(events.REPORT, transfer_id,
                                              ask)
            except exception.PeerUnreachable as exc:
                LOG.warning("migration %s: %s; retrying", migration_id, exc)
                report = None
            if not isinstance(report, dict) or \
                    report_mod.attempt_of(report) < attempt:
                report = None
            silence.see(report)
            if report is not None:
                try:
                    result = self._reported(migration_id, peer, descriptor,
                                            report)
                except exception.MigrationFailed:
                    # A failed export or transfer explains it (and may
                    # still be checking the staged copy: not stopped).
                    _failed_stage(migration_id, live.snapshot(),
                                  ("export", "transfer"), "peer import")
                    if not self._transfer_may_explain(migration_id,
                                                      failed_since):
                        raise
                    result = None
                if result is not None:
                    return result, None
            stages = live.snapshot()
            _failed_stage(migration_id, stages, ("export", "transfer"),
                          "peer import")
            return None, (
                report and (report.get("state"), report.get("bytes")),
                (stages.get("export") or {}).get("done"),
                (stages.get("transfer") or {}).get("done"))

        key = events.key(events.REPORT, transfer_id)
        first = [True]
        failed_since = []
        return self.follow(migration_id, "peer import", step, event=key)

    def _transfer_may_explain(self, migration_id, failed_since):
        """The peer's import failed while this side's export or transfer
        has not ended: wait up to ``IMPORT_FAILURE_GRACE`` seconds for
        them.  Bad bytes fail the peer's import and this transfer at
        once, and the transfer's failure is the one that explains (and
        checks the staged copy, which a retry then exports again);
        taken first, the import's would stop it.  An export or transfer
        that fails meanwhile ends this stage as StageFailed.
        """
        stages = self.live(migration_id).snapshot()
        if all((stages.get(name) or {}).get("state") in states.FINAL_STATES
               for name in ("export", "transfer")):
            return False
        now = time.monotonic()
        if not failed_since:
            failed_since.append(now)
            LOG.info("migration %s: the peer's import failed while the "
                     "export or transfer runs; waiting up to %.0f s for "
                     "their outcome", migration_id,
                     IMPORT_FAILURE_GRACE)
        return now - failed_since[0] < IMPORT_FAILURE_GRACE

    def _reported(self, migration_id, peer, descriptor, report):
        """The peer image of an ``active`` report; None while it runs."""
        state = report.get("state")
        live = self.live(migration_id)
        # The progress of an earlier attempt that the peer's agent lets
        # stand for this one: its bytes are not this attempt's.
        carried = report_mod.attempt_of(
            {"attempt": report.get("of_attempt")}) or \
            report_mod.attempt_of(report)
        live.stage("import", state=state, size=descriptor["size"],
                   done=report.get("bytes") if carried >=
                   report_mod.attempt_of(report) else None)
        if state == "failed":
            raise exception.MigrationFailed(
                migration_id=migration_id,
                reason="import at %s failed: %s" % (peer,
                                                    report.get("error")))
        if state != "active":
            return None
        live.stage("import", done=descriptor["size"])
        got = report.get("os_hash_value")
        if got != descriptor["os_hash_value"]:
            raise exception.ImageHashMismatch(
                image_id=report.get("image_id"), where="the peer's image",
                actual=got, expected=descriptor["os_hash_value"])
        return {k: report.get(k) for k in (
            "image_id", "os_hash_value", "status", "verified",
            "differences")}
