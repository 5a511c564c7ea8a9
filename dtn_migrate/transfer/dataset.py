"""Datasets: the files of a transfer, their growth, and their manifest.

A transfer's manifest is written once into its state directory (write to
a temporary name, fsync, rename) so that a restarted source finds the
same files, in the same order, under the same transfer id, and its
object log lines up with them.

A *growing* file has a known final size while its bytes are still being
written.  Its writer publishes a committed watermark -- the number of
leading bytes that are on stable storage -- and the source sends only
objects below it.  The watermark is either a callable (in-process
writers) or a small side file whose content is the decimal watermark,
optionally followed by ``failed`` if the writer gave up.  Writers update
it by writing a temporary file and renaming it over the old one.

A file's identity is recorded when the transfer is defined (device,
inode, size, mtime, ctime).  The source opens it again without following
a symlink and refuses another file (device or inode differ); a file
whose content may have changed since (size, mtime or ctime differ) is
sent again from its start, never stitched from old and new bytes.
"""

import dataclasses
import json
import os
import stat
import uuid

from dtn_migrate.transfer import durable
from dtn_migrate.transfer import errors
from dtn_migrate.transfer import paths


@dataclasses.dataclass
class FileSpec:
    name: str                  # relative name at the sink
    path: str                  # where the source reads it
    size: int
    sha512: str = None         # expected hex digest, if already known
    mtime_ns: int = 0
    mode: int = 0o644
    growing: bool = False
    watermark_file: str = None  # side file of a growing file
    # Identity of the file validated when the transfer was defined
    # (None: bound when the source first opens it).
    dev: int = None
    ino: int = None
    ctime_ns: int = None

    def to_dict(self):
        # Every field is a plain value: no need for asdict's deep copy
        # (which costs 0.1 ms per file of a 4000-file manifest).
        return {name: getattr(self, name) for name in _SPEC_FIELDS}

    @classmethod
    def from_dict(cls, d):
        fields = _SPEC_FIELDS
        return cls(**{k: v for k, v in d.items() if k in fields})


_SPEC_FIELDS = frozenset(f.name for f in dataclasses.fields(FileSpec))


class SourceChanged(errors.TransferError):
    """A source file is not (or no longer) the file that was defined."""

    code = errors.Code.SOURCE_CHANGED


class GrowingFileFailed(SourceChanged):
    """A growing file's writer failed, or the file stopped growing."""


def format_watermark(committed, failed=False):
    """Content of a watermark side file."""
    return ("%d%s\n" % (committed, " failed" if failed else "")).encode()


def parse_watermark(data):
    """(committed bytes, failed) from side file content; (0, False) when
    it is empty or unreadable.
    """
    words = bytes(data[:64]).decode("ascii", "replace").split()
    try:
        value = int(words[0]) if words else 0
    except ValueError:
        return 0, False
    return max(0, value), len(words) > 1 and words[1] == "failed"


def read_watermark_file(path):
    """(committed bytes, failed) from a watermark side file."""
    try:
        with open(path, "rb") as f:
            return parse_watermark(f.read(64))
    except FileNotFoundError:
        return 0, False


def write_watermark_file(path, committed, failed=False):
    """Publish a watermark atomically (for writers and tests)."""
    durable.write_atomic(path, format_watermark(committed, failed))


def available_bytes(spec, provider=None):
    """How many leading bytes of ``spec`` may be sent now."""
    if not spec.growing:
        return spec.size
    if provider is not None:
        value, failed = provider(), False
    elif spec.watermark_file:
        value, failed = read_watermark_file(spec.watermark_file)
    else:
        value, failed = spec.size, False
    if failed:
        raise GrowingFileFailed("the writer of %s reported failure"
                                % spec.name)
    return max(0, min(value, spec.size))


def spec_for_path(path, name=None, sha512=None, st=None):
    """FileSpec of an existing regular file (``st``: its stat, if known)."""
    if st is None:
        st = os.stat(path)
    spec = FileSpec(name=name or os.path.basename(path),
                    path=os.path.abspath(path), size=st.st_size,
                    sha512=sha512)
    bind(spec, st)
    return spec


def growing_spec(path, name, size, sha512=None, watermark_file=None,
                 st=None):
    """FileSpec of a file still being written up to ``size`` bytes; ``st``
    (its stat when it was validated) pins its device and inode.
    """
    spec = FileSpec(name=name, path=path, size=size, sha512=sha512,
                    growing=True, watermark_file=watermark_file)
    if st is not None:
        spec.dev, spec.ino = st.st_dev, st.st_ino
    return spec


def bind(spec, st):
    """Record ``st`` (a stat of the file) as ``spec``'s identity."""
    spec.dev, spec.ino = st.st_dev, st.st_ino
    spec.mode = st.st_mode & 0o777
    if not spec.growing:
        spec.mtime_ns, spec.ctime_ns = st.st_mtime_ns, st.st_ctime_ns


def open_source(spec):
    """Open ``spec``'s file for reading; return (fd, its stat).

    Never through a symlink (BadNameError), and only the very file that
    was validated: another device or inode raises SourceChanged.
    """
    fd, st = paths.open_regular(spec.path)
    expected = (spec.dev, spec.ino)
    if spec.ino is not None and (st.st_dev, st.st_ino) != expected:
        os.close(fd)
        raise SourceChanged(
            "%s was replaced by another file since the transfer was "
            "defined (device %d inode %d, expected device %d inode %d)"
            % (spec.path, st.st_dev, st.st_ino, spec.dev, spec.ino))
    return fd, st


def changes(spec, st):
    """What differs between ``spec`` and a stat of its (same) file: a
    list of ``size``, ``mtime``, ``ctime`` (empty when unchanged, and
    always for a growing file).
    """
    if spec.growing:
        return []
    found = []
    if st.st_size != spec.size:
        found.append("size")
    if spec.mtime_ns and st.st_mtime_ns != spec.mtime_ns:
        found.append("mtime")
    if spec.ctime_ns is not None and st.st_ctime_ns != spec.ctime_ns:
        found.append("ctime")
    return found


def expand(root, items, hashes=None):
    """FileSpecs for files and directories under ``root`` (recursively),
    named relative to ``root``; ``hashes`` maps names to known sha512.
    """
    hashes = hashes or {}
    real_root = os.path.realpath(root)
    specs = []

    def add(full, item):
        try:
            st = os.lstat(full)
        except OSError:
            st = None
        if st is None or not stat.S_ISREG(st.st_mode):
            raise errors.BadNameError("%s is not a regular file" % item)
        real = os.path.realpath(full)
        if real.startswith(real_root + os.sep):
            name = real[len(real_root) + 1:]
        else:
            name = os.path.relpath(real, real_root)
        paths.check_name(name)
        specs.append(spec_for_path(os.path.abspath(full), name,
                                   hashes.get(name), st))

    for item in items:
        full = item if os.path.isabs(item) else os.path.join(root, item)
        if os.path.isdir(full) and not os.path.islink(full):
            for dirpath, dirnames, filenames in os.walk(full):
                for d in dirnames:
                    if os.path.islink(os.path.join(dirpath, d)):
                        raise errors.BadNameError(
                            "%s is a symlink to a directory"
                            % os.path.join(dirpath, d))
                dirnames.sort()
                for fn in sorted(filenames):
                    path = os.path.join(dirpath, fn)
                    add(path, path)
            continue
        add(full, item)
    return specs


@dataclasses.dataclass
class Manifest:
    transfer_id: str
    peer: str
    files: list
    options: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def new(cls, peer, files, options=None, transfer_id=None):
        return cls(transfer_id or uuid.uuid4().hex, peer, list(files),
                   dict(options or {}))

    @property
    def id_bytes(self):
        return uuid.UUID(hex=self.transfer_id).bytes

    def to_dict(self):
        return {"version": 1, "transfer_id": self.transfer_id,
                "peer": self.peer, "options": self.options,
                "files": [f.to_dict() for f in self.files]}

    @classmethod
    def from_dict(cls, d):
        return cls(d["transfer_id"], d["peer"],
                   [FileSpec.from_dict(f) for f in d["files"]],
                   d.get("options", {}))

    def save(self, directory):
        os.makedirs(directory, exist_ok=True)
        write_json_atomic(os.path.join(directory, "manifest.json"),
                          self.to_dict())

    @classmethod
    def load(cls, directory):
        with open(os.path.join(directory, "manifest.json")) as f:
            return cls.from_dict(json.load(f))


def write_json_atomic(path, data):
    """Replace ``path`` with ``data`` as compact JSON, durably."""
    durable.write_atomic(path, json.dumps(
        data, separators=(",", ":")).encode("utf-8"))
