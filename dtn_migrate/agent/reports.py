"""Transfers this DTN received, and the import reports of its cloud.

One JSON file per transfer, ``<state_dir>/incoming/<transfer id>.json``:
the peer that sent it, when it was first and last seen and, once this
cloud's engine has imported it, the import report.  The report is read
back over the DTN link (REPORT connection) only by that same peer.
"""

import json
import os
import re
import threading
import time
import uuid

from oslo_log import log as logging

from dtn_migrate import exception
from dtn_migrate.transfer import dataset
from dtn_migrate.transfer import protocol

LOG = logging.getLogger(__name__)

_FILE = re.compile(r"^[0-9a-f]{32}\.json$")


def check_id(transfer_id):
    """The transfer id as 32 lower-case hex digits, or InvalidInput."""
    if isinstance(transfer_id, str):
        try:
            return uuid.UUID(transfer_id).hex
        except ValueError:
            pass
    raise exception.InvalidInput(
        reason="transfer id %r is not a UUID" % (transfer_id,))


def encode_report(report):
    """Validate an import report and return its wire form."""
    if not isinstance(report, dict):
        raise exception.InvalidInput(reason="an import report is a mapping")
    try:
        raw = json.dumps(report, sort_keys=True, separators=(",", ":"),
                         allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise exception.InvalidInput(
            reason="the import report is not JSON: %s" % exc)
    if len(raw) > protocol.MAX_REPORT:
        raise exception.InvalidInput(
            reason="the import report is %d bytes encoded, more than %d"
            % (len(raw), protocol.MAX_REPORT))
    return raw


class IncomingStore:
    """Persistent records of incoming transfers."""

    def __init__(self, state_dir):
        self.dir = os.path.join(state_dir, "incoming")
        os.makedirs(self.dir, exist_ok=True)
        self.lock = threading.Lock()

    def _path(self, tid):
        return os.path.join(self.dir, tid + ".json")

    def _load(self, tid):
        try:
            with open(self._path(tid)) as f:
                rec = json.load(f)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            LOG.error("incoming transfer %s: unreadable record: %s", tid, exc)
            return None
        return rec if isinstance(rec, dict) else None

    def _save(self, rec):
        dataset.write_json_atomic(self._path(rec["transfer_id"]), rec)

    def note(self, transfer_id, peer):
        """A control session of ``transfer_id`` from ``peer`` began."""
        tid = check_id(transfer_id)
        now = time.time()
        with self.lock:
            rec = self._load(tid)
            if rec is None:
                rec = {"transfer_id": tid, "peer": peer, "first_seen": now,
                       "sessions": 0}
            elif rec.get("peer") != peer:
                # The sink refuses this while it remembers the transfer;
                # after a restart the first sender still owns it.
                LOG.warning("incoming transfer %s: session from %s, but it "
                            "was sent by %s; record unchanged", tid, peer,
                            rec.get("peer"))
                return dict(rec)
            rec["last_seen"] = now
            rec["sessions"] = rec.get("sessions", 0) + 1
            self._save(rec)
            return dict(rec)

    def set_report(self, transfer_id, report):
        """Store this cloud's import report of a received transfer."""
        tid = check_id(transfer_id)
        encode_report(report)
        with self.lock:
            rec = self._load(tid)
            if rec is None:
                raise exception.TransferNotFound(transfer_id=tid)
            rec["report"] = report
            rec["report_time"] = time.time()
            self._save(rec)
            return dict(rec)

    def get(self, transfer_id):
        """The record of a transfer, or None."""
        tid = check_id(transfer_id)
        with self.lock:
            return self._load(tid)

    def list(self):
        """Every record, oldest first."""
        try:
            names = [n for n in os.listdir(self.dir) if _FILE.match(n)]
        except FileNotFoundError:
            return []
        out = []
        with self.lock:
            for name in names:
                rec = self._load(name[:-5])
                if rec is not None:
                    rec["transfer_id"] = name[:-5]
                    out.append(rec)
        out.sort(key=lambda r: (r.get("first_seen", 0), r["transfer_id"]))
        return out

    def report_for(self, transfer_hex, peer):
        """Report bytes for a REPORT connection from ``peer``: only the
        peer that sent the transfer gets it.
        """
        try:
            rec = self.get(transfer_hex)
        except exception.InvalidInput:
            return None
        if rec is None:
            return None
        if rec.get("peer") != peer:
            LOG.warning("peer %s asked for the import report of transfer "
                        "%s, which %s sent; refused", peer, transfer_hex,
                        rec.get("peer"))
            return None
        if "report" not in rec:
            return None
        return encode_report(rec["report"])
