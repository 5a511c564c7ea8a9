"""Transfers this DTN received, and the import reports of its cloud.

Per transfer, in ``<state_dir>/incoming/``:

* ``<transfer id>.json``, the record: the peer that sent the transfer
  (its owner: no other peer may send it or read its report), when it
  was first and last seen, the attempt that peer last asked a report for
  (``wanted_attempt``), and the state, attempt and time of the last
  final report;
* ``<transfer id>.report``, that final report ("active" or "failed") as
  sent over the DTN link.

Progress reports are kept in memory only (an agent restart forgets them
until the next one).  A record whose report is final is removed
``retention`` seconds after the transfer was last seen or reported,
unless the transfer is active again.
"""

import collections
import dataclasses
import json
import os
import re
import threading
import time

from oslo_log import log as logging

from dtn_migrate.agent import ids
from dtn_migrate.agent import requests
from dtn_migrate import exception
from dtn_migrate.common import states
from dtn_migrate.transfer import dataset
from dtn_migrate.transfer import durable
from dtn_migrate.transfer import report as report_mod
from dtn_migrate.transfer.wire import protocol

LOG = logging.getLogger(__name__)

# Final reports kept encoded in memory, most recently used.
CACHED_REPORTS = 64
_FILE = re.compile(r"^([0-9a-f]{32})\.(json|report)$")


def encode_report(report):
    """Validate an import report and return its wire form (compact JSON
    of at most MAX_REPORT bytes, as every mapping on the DTN link).
    """
    try:
        return requests.encode(report, "import report")
    except ValueError as exc:
        raise exception.InvalidInput(reason=str(exc))


def _id_or_none(transfer_hex):
    """The checked transfer id, or None for one a peer got wrong."""
    try:
        return ids.check_id(transfer_hex)
    except exception.InvalidInput:
        return None


@dataclasses.dataclass
class Stored:
    """A report as sent: its state and attempt, and its bytes."""

    state: str
    attempt: int
    raw: bytes

    @classmethod
    def of(cls, report, raw):
        return cls(report.get("state"), report_mod.attempt_of(report), raw)

    def for_attempt(self, attempt):
        """The bytes to answer a peer waiting for ``attempt``: a report
        that did not fail stands for every later attempt too, saying the
        attempt it is of (``of_attempt``).
        """
        if attempt <= self.attempt or self.state == "failed":
            return self.raw
        report = json.loads(self.raw)
        report["attempt"] = attempt
        # What it really is of: its byte count is that attempt's.
        report.setdefault("of_attempt", self.attempt)
        try:
            return encode_report(report)
        except exception.InvalidInput:      # grew past the limit
            return self.raw


def _unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class IncomingStore:
    """Persistent records of incoming transfers."""

    def __init__(self, state_dir, retention=None, clock=time.time):
        """``retention``: seconds a record with a final report is kept
        (None or 0: for ever), by ``clock``.
        """
        self.clock = clock
        self.dir = os.path.join(state_dir, "incoming")
        os.makedirs(self.dir, exist_ok=True)
        self.retention = retention or None
        self.lock = threading.Lock()
        self._progress = {}                      # tid -> (Stored, time)
        self._final = collections.OrderedDict()  # tid -> Stored

    def _path(self, tid, kind="json"):
        return os.path.join(self.dir, "%s.%s" % (tid, kind))

    def _load(self, tid):
        try:
            with open(self._path(tid)) as f:
                rec = json.load(f)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            LOG.error("incoming transfer %s: unreadable record: %s", tid, exc)
            return None
        if not isinstance(rec, dict):
            return None
        rec["transfer_id"] = tid
        return rec

    def _save(self, rec):
        dataset.write_json_atomic(self._path(rec["transfer_id"]), rec)

    def _save_final(self, tid, rec, report, raw):
        durable.write_atomic(self._path(tid, "report"), raw)
        rec.update(report_state=report.get("state"),
                   report_attempt=report_mod.attempt_of(report),
                   report_time=rec.get("report_time") or self.clock())
        self._save(rec)
        self._cache(tid, Stored.of(report, raw))

    def _cache(self, tid, stored):
        self._final[tid] = stored
        self._final.move_to_end(tid)
        while len(self._final) > CACHED_REPORTS:
            self._final.popitem(last=False)

    def _entry(self, rec):
        """What callers see of a record (lock held): no report body, the
        state of the latest report, progress included.
        """
        entry = dict(rec)
        entry.pop("report_attempt", None)
        entry.setdefault("report_state", None)
        entry.setdefault("report_time", None)
        entry.setdefault("wanted_attempt", None)
        progress = self._progress.get(rec["transfer_id"])
        if progress is not None:
            entry["report_state"] = progress[0].state
            entry["report_time"] = progress[1]
        return entry

    def note(self, transfer_id, peer):
        """A control session of ``transfer_id`` from ``peer`` begins."""
        tid = ids.check_id(transfer_id)
        now = self.clock()
        with self.lock:
            rec = self._load(tid)
            if rec is None:
                rec = {"transfer_id": tid, "peer": peer, "first_seen": now,
                       "sessions": 0}
            elif rec.get("peer") != peer:
                # The sink refuses this (see owner); the first sender
                # keeps the transfer.
                LOG.warning("incoming transfer %s: session from %s, but it "
                            "was sent by %s; record unchanged", tid, peer,
                            rec.get("peer"))
                return self._entry(rec)
            rec["last_seen"] = now
            rec["sessions"] = rec.get("sessions", 0) + 1
            self._save(rec)
            return self._entry(rec)

    def owner(self, transfer_hex):
        """The peer that sent ``transfer_hex``, or None if unknown."""
        tid = _id_or_none(transfer_hex)
        if tid is None:
            return None
        with self.lock:
            rec = self._load(tid)
        return rec.get("peer") if rec is not None else None

    def set_report(self, transfer_id, report, peer=None):
        """Store this cloud's import report of a received transfer: a
        final one durably, progress in memory.  Without a record (its
        session is too recent), one is made for ``peer`` if given, the
        sender the sink knows.  Returns the record, without the report.
        """
        tid = ids.check_id(transfer_id)
        raw = encode_report(report)
        stored = Stored.of(report, raw)
        now = self.clock()
        with self.lock:
            rec = self._load(tid)
            if rec is None:
                if not peer:
                    raise exception.TransferNotFound(transfer_id=tid)
                rec = {"transfer_id": tid, "peer": peer, "first_seen": now,
                       "last_seen": now, "sessions": 0}
                self._save(rec)
            if stored.state in states.IMPORT_FINAL_STATES:
                self._progress.pop(tid, None)
                rec["report_time"] = now
                self._save_final(tid, rec, report, raw)
            else:
                self._progress[tid] = (stored, now)
            return self._entry(rec)

    def want_attempt(self, transfer_hex, peer, attempt):
        """``peer`` waits for a report of ``attempt``: remember it durably
        if it is later than any before.  Returns True if it is.
        """
        tid = ids.check_id(transfer_hex)
        with self.lock:
            rec = self._load(tid)
            if rec is None or rec.get("peer") != peer or \
                    attempt <= (rec.get("wanted_attempt") or 0):
                return False
            rec["wanted_attempt"] = attempt
            self._save(rec)
            return True

    def get(self, transfer_id):
        """The record of a transfer (without its report), or None."""
        tid = ids.check_id(transfer_id)
        with self.lock:
            rec = self._load(tid)
            return self._entry(rec) if rec is not None else None

    def list(self, active=()):
        """Every record (without reports), oldest first.  Records expired
        (see ``retention``) are removed on the way, unless their transfer
        id is in ``active``.
        """
        tids = self._tids()
        now = self.clock()
        out = []
        for tid in tids:
            # One record at a time: sessions being recorded wait little.
            with self.lock:
                rec = self._load(tid)
                if rec is None:
                    continue
                if tid not in active and self._expired(rec, now):
                    self._remove(tid)
                    continue
                out.append(self._entry(rec))
        out.sort(key=lambda r: (r.get("first_seen", 0), r["transfer_id"]))
        return out

    def _expired(self, rec, now):
        if self.retention is None or \
                rec.get("report_state") not in states.IMPORT_FINAL_STATES or \
                rec["transfer_id"] in self._progress:
            return False
        seen = max(rec.get("report_time") or 0, rec.get("last_seen") or 0)
        return now - seen > self.retention

    def _remove(self, tid):
        LOG.info("incoming transfer %s: record expired, removed", tid)
        self._final.pop(tid, None)
        _unlink(self._path(tid))
        _unlink(self._path(tid, "report"))

    def _tids(self):
        """The transfer ids with a record."""
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return set()
        return {m.group(1) for m in map(_FILE.match, names) if m}

    def transfers_of(self, peer):
        """The transfers recorded as sent by ``peer`` (none expires)."""
        out = []
        for tid in sorted(self._tids()):
            with self.lock:
                rec = self._load(tid)
            if rec is not None and rec.get("peer") == peer:
                out.append(tid)
        return out

    def report_for(self, transfer_hex, peer, attempt=0):
        """Report bytes for a REPORT connection from ``peer``, waiting for
        ``attempt``: only the peer that sent the transfer gets it.
        """
        tid = _id_or_none(transfer_hex)
        if tid is None:
            return None
        with self.lock:
            rec = self._load(tid)
            if rec is None:
                return None
            if rec.get("peer") != peer:
                LOG.warning("peer %s asked for the import report of "
                            "transfer %s, which %s sent; refused", peer,
                            tid, rec.get("peer"))
                return None
            stored = self._latest(tid, rec)
        return stored.for_attempt(attempt) if stored is not None else None

    def _latest(self, tid, rec):
        """The latest report of a transfer (lock held), or None."""
        progress = self._progress.get(tid)
        if progress is not None:
            return progress[0]
        if rec.get("report_state") not in states.IMPORT_FINAL_STATES:
            return None
        stored = self._final.get(tid)
        if stored is not None:
            self._final.move_to_end(tid)
            return stored
        try:
            with open(self._path(tid, "report"), "rb") as f:
                raw = f.read(protocol.MAX_REPORT + 1)
            report = json.loads(raw)
        except (OSError, ValueError) as exc:
            LOG.error("incoming transfer %s: unreadable report: %s", tid,
                      exc)
            return None
        if not isinstance(report, dict) or len(raw) > protocol.MAX_REPORT:
            LOG.error("incoming transfer %s: report file is not a report",
                      tid)
            return None
        stored = Stored.of(report, raw)
        self._cache(tid, stored)
        return stored
