"""Benchmark datasets: one big file, or many small files.

Content is pseudo-random (a 64 MiB block from a seeded PRNG) and no two MiB
of a dataset are equal: every MiB is a window of the block at a varying
offset with a 32-byte stamp (magic, seed, file index, MiB index) written over
its first bytes.  Nothing compresses and nothing deduplicates, and the data
is the same on every machine for a given seed.  Generation runs at several
GB/s on tmpfs (it is only ``writev`` of memoryviews).

Next to each dataset directory a manifest ``<name>.manifest.json`` lists every
file with its size and sha512 (the format the engine's ``--manifest`` expects:
``{"files": [{"name": relpath, "size": n, "sha512": hex}, ...]}``).  Hashing
is slow (about 570 MiB/s per core), so the manifest is cached: a sidecar
``<name>.cache.json`` records each file's size and mtime, and both data and
manifest are reused as long as the files are unchanged.

Layout under ``data_dir`` (default ``/dev/shm/dtnm-bench/data``)::

    big-4G/big.bin                       big-4G.manifest.json
    small-1000x1M/f000000.bin ...        small-1000x1M.manifest.json

Command line::

    python -m benchmarks.workloads --workloads big,small --size-big 1G \\
        --small-count 200 [--data-dir DIR] [--remove]
"""

import argparse
import concurrent.futures
import hashlib
import json
import os
import random
import shutil
import struct
import sys
import time

MiB = 1 << 20
GiB = 1 << 30
BLOCK = 64 * MiB
MAGIC = b'DTNMBNCH'
STAMP = struct.Struct('<8sQQQ')        # magic, seed, file index, MiB index
DEFAULT_DATA_DIR = '/dev/shm/dtnm-bench/data'
DEFAULT_SEED = 20240601
GENERATOR_VERSION = 1

_blocks = {}


def parse_size(text):
    """'4G', '512M', '1MiB', '1000000' -> bytes (binary units)."""
    if isinstance(text, int):
        return text
    t = str(text).strip().upper().replace('IB', '').rstrip('B')
    mult = 1
    for suffix, m in (('K', 1 << 10), ('M', MiB), ('G', GiB), ('T', 1 << 40)):
        if t.endswith(suffix):
            t, mult = t[:-1], m
            break
    return int(float(t) * mult)


def format_size(n):
    for unit, m in (('T', 1 << 40), ('G', GiB), ('M', MiB), ('K', 1 << 10)):
        if n >= m and n % m == 0:
            return '%d%s' % (n // m, unit)
    return str(n)


def _block(seed):
    if seed not in _blocks:
        _blocks.clear()
        _blocks[seed] = memoryview(random.Random(seed).randbytes(BLOCK))
    return _blocks[seed]


def _pieces(size, file_index, seed):
    """The ``size`` bytes of file ``file_index``, MiB by MiB, as pairs
    (stamp, the rest of the MiB: a view of the PRNG block).
    """
    block = _block(seed)
    mib = 0
    left = size
    while left > 0:
        n = min(MiB, left)
        off = ((mib * 7919 + file_index * 104729) * 4096) % (BLOCK - MiB)
        stamp = STAMP.pack(MAGIC, seed, file_index, mib)[:n]
        yield stamp, block[off + len(stamp):off + n]
        left -= n
        mib += 1


def chunks(size, file_index=0, seed=DEFAULT_SEED, hasher=None):
    """The bytes :func:`write_file` writes, in 1 MiB chunks (an image to
    upload: file 0 is the big dataset's file), hashed into ``hasher`` on
    the way.
    """
    for stamp, rest in _pieces(size, file_index, seed):
        chunk = stamp + rest
        if hasher is not None:
            hasher.update(chunk)
        yield chunk


def image_chunks(size, layout=None, seed=DEFAULT_SEED, hasher=None):
    """An image of ``size`` bytes in pieces of at most 1 MiB: piece
    ``i`` of ``layout`` ([(offset, length)] in offset order, apart)
    holds the data of file
    ``i + 1`` (:func:`chunks`), zeros (holes) lie everywhere else; no
    layout is one piece of file 0 over the whole image.  Hashed into
    ``hasher`` on the way.
    """
    if layout is None:
        yield from chunks(size, 0, seed, hasher)
        return
    zeros = bytes(MiB)
    pos = 0
    for i, (off, length) in enumerate(list(layout) + [(size, 0)]):
        while pos < off:
            n = min(MiB, off - pos)
            z = zeros if n == MiB else zeros[:n]
            if hasher is not None:
                hasher.update(z)
            yield z
            pos += n
        if length:
            yield from chunks(length, i + 1, seed, hasher)
        pos += length


def write_file(path, size, file_index, seed=DEFAULT_SEED):
    """Write ``size`` bytes of stamped pseudo-random data to ``path``."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        batch = []
        batch_len = 0
        for stamp, rest in _pieces(size, file_index, seed):
            batch += [stamp, rest] if len(rest) else [stamp]
            batch_len += len(stamp) + len(rest)
            if len(batch) >= 64:
                _writev(fd, batch, batch_len)
                batch, batch_len = [], 0
        if batch:
            _writev(fd, batch, batch_len)
    finally:
        os.close(fd)


def _writev(fd, batch, batch_len):
    done = 0
    while done < batch_len:
        w = os.writev(fd, batch)
        done += w
        if done < batch_len:       # short write: rare; redo the rest
            flat = b''.join(bytes(b) for b in batch)[w:]
            batch, batch_len, done = [flat], len(flat), 0


def sha512_file(path, bufsize=4 * MiB):
    h = hashlib.sha512()
    buf = bytearray(bufsize)
    view = memoryview(buf)
    with open(path, 'rb', buffering=0) as f:
        while True:
            n = f.readinto(buf)
            if not n:
                break
            h.update(view[:n])
    return h.hexdigest()


class Dataset:
    """A generated dataset.

    :ivar name: e.g. 'big-4G' or 'small-1000x1M'
    :ivar kind: 'big' or 'small'
    :ivar root: directory holding the files (pass as SRC_DIR / --root)
    :ivar files: relative paths (relative to root), sorted
    :ivar sizes: dict relpath -> size
    :ivar total_bytes: sum of sizes
    :ivar manifest_path: the JSON manifest next to root
    """

    def __init__(self, kind, data_dir=DEFAULT_DATA_DIR, size_big=4 * GiB,
                 small_count=1000, small_size=MiB, seed=DEFAULT_SEED):
        self.kind = kind
        self.seed = seed
        self.data_dir = os.path.abspath(data_dir)
        if kind == 'big':
            self.name = 'big-%s' % format_size(size_big)
            self.sizes = {'big.bin': int(size_big)}
        elif kind == 'small':
            self.name = 'small-%dx%s' % (small_count, format_size(small_size))
            self.sizes = {'f%06d.bin' % i: int(small_size)
                          for i in range(small_count)}
        else:
            raise ValueError('unknown workload %r (big, small)' % kind)
        self.files = sorted(self.sizes)
        self.total_bytes = sum(self.sizes.values())
        self.root = os.path.join(self.data_dir, self.name)
        self.manifest_path = os.path.join(self.data_dir,
                                          self.name + '.manifest.json')
        self.cache_path = os.path.join(self.data_dir,
                                       self.name + '.cache.json')
        self.timings = {}

    def __repr__(self):
        return '<Dataset %s %d files %d bytes at %s>' % (
            self.name, len(self.files), self.total_bytes, self.root)

    # -- state
    def _stat(self):
        out = {}
        for rel in self.files:
            try:
                st = os.stat(os.path.join(self.root, rel))
            except FileNotFoundError:
                return None
            out[rel] = [st.st_size, st.st_mtime_ns]
        return out

    def _data_ok(self, stat):
        return stat is not None and all(
            stat[rel][0] == size for rel, size in self.sizes.items())

    def _cache_ok(self, stat):
        try:
            with open(self.cache_path) as f:
                cache = json.load(f)
            with open(self.manifest_path) as f:
                manifest = json.load(f)
        except (OSError, ValueError):
            return False
        return (cache.get('stat') == stat
                and cache.get('seed') == self.seed
                and cache.get('version') == GENERATOR_VERSION
                and len(manifest.get('files', [])) == len(self.files))

    # -- build
    def ensure(self, log=print):
        """Generate data and manifest if missing or changed; reuse
        otherwise.  Returns self.
        """
        os.makedirs(self.data_dir, exist_ok=True)
        stat = self._stat()
        if not self._data_ok(stat):
            self.generate(log)
            stat = self._stat()
        if not self._cache_ok(stat):
            self.write_manifest(stat, log)
        else:
            log('dataset %s: reusing data and manifest (%s)' % (
                self.name, self.root))
        return self

    def generate(self, log=print):
        tmp = self.root + '.tmp-%d' % os.getpid()
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(self.root, ignore_errors=True)
        for p in (self.manifest_path, self.cache_path):
            if os.path.exists(p):
                os.unlink(p)
        os.makedirs(tmp)
        t0 = time.monotonic()
        _block(self.seed)
        t1 = time.monotonic()
        for index, rel in enumerate(self.files):
            write_file(os.path.join(tmp, rel), self.sizes[rel], index,
                       self.seed)
        t2 = time.monotonic()
        os.rename(tmp, self.root)
        rate = self.total_bytes / max(t2 - t1, 1e-9) / 1e6
        self.timings['generate_s'] = t2 - t1
        self.timings['generate_MBps'] = rate
        log('dataset %s: generated %d bytes in %.2f s (%.0f MB/s, +%.2f s '
            'for the random block)' % (self.name, self.total_bytes, t2 - t1,
                                       rate, t1 - t0))

    def write_manifest(self, stat, log=print):
        t0 = time.monotonic()
        paths = [os.path.join(self.root, rel) for rel in self.files]
        workers = max(1, min(len(paths), os.cpu_count() or 1))
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            digests = list(pool.map(sha512_file, paths))
        entries = [{'name': rel, 'size': self.sizes[rel], 'sha512': d}
                   for rel, d in zip(self.files, digests)]
        _write_json(self.manifest_path, {'files': entries})
        _write_json(self.cache_path, {'version': GENERATOR_VERSION,
                                      'seed': self.seed, 'stat': stat})
        dt = time.monotonic() - t0
        self.timings['sha512_s'] = dt
        log('dataset %s: sha512 manifest in %.2f s (%.0f MB/s) -> %s' % (
            self.name, dt, self.total_bytes / max(dt, 1e-9) / 1e6,
            self.manifest_path))

    def manifest(self):
        with open(self.manifest_path) as f:
            return json.load(f)

    def remove(self):
        shutil.rmtree(self.root, ignore_errors=True)
        for p in (self.manifest_path, self.cache_path):
            if os.path.exists(p):
                os.unlink(p)


def _write_json(path, obj):
    tmp = path + '.tmp'
    with open(tmp, 'w') as f:
        json.dump(obj, f, indent=1)
        f.write('\n')
    os.replace(tmp, path)


def ensure(kind, **kw):
    """Shortcut: ``ensure('big', size_big=GiB)`` -> ready :class:`Dataset`."""
    log = kw.pop('log', print)
    return Dataset(kind, **kw).ensure(log)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--workloads', default='big,small')
    ap.add_argument('--size-big', default='4G')
    ap.add_argument('--small-count', type=int, default=1000)
    ap.add_argument('--small-size', default='1M')
    ap.add_argument('--data-dir', default=DEFAULT_DATA_DIR)
    ap.add_argument('--seed', type=int, default=DEFAULT_SEED)
    ap.add_argument('--remove', action='store_true',
                    help='delete the datasets instead of creating them')
    args = ap.parse_args(argv)
    for kind in args.workloads.split(','):
        ds = Dataset(kind, args.data_dir, parse_size(args.size_big),
                     args.small_count, parse_size(args.small_size), args.seed)
        if args.remove:
            ds.remove()
            print('removed', ds.root)
        else:
            print(ds.ensure())
    return 0


if __name__ == '__main__':
    sys.exit(main())
