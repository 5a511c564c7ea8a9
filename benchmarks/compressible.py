"""Compressible data: a qcow2 of a real root file system, compression on/off.

The image is built once and kept for later runs:

1. ``debootstrap --variant=minbase SUITE TREE MIRROR`` installs a minimal
   Debian into ``TREE`` (``--source debootstrap``, the default), or
   ``--source DIR`` takes an existing tree such as ``/usr`` (when no
   Debian mirror is reachable);
2. ``mkfs.ext4 -d TREE`` builds an ext4 file system image from it (no
   mount, no loop device), sized to the tree plus ``--fs-slack``;
3. ``qemu-img convert -O qcow2`` turns it into a qcow2 image: the file a
   cloud would hold in Glance.  Its unused clusters are not stored, so
   the file holds the file system's data and metadata: binaries,
   libraries, text, and the zero runs inside them.

Then the image crosses the emulated DTN link (``--links``, default
100mbit and 1gbit) with the tools of ``benchmarks/throughput.py``,
interleaved, the order rotating every repetition:

``dtn-migrate-zoff``   ``--compression off`` at both ends (the default)
``dtn-migrate-zauto``  ``--compression auto``: zstd only while the link,
                       not the CPU, is the limit
``dtn-migrate-zstd``   ``--compression on``: every object that zstd
                       shrinks by ``compression_min_saving`` goes
                       encoded
``gridftp``            ``globus-url-copy`` (reference, no compression)

Every sample carries the wall time, the bytes on the veth (both
directions, from the interface counters), and the CPU seconds of both
ends.  Verified mode (sha512 end to end) is on, as in production.

Example (root, from the repository root)::

    .venv/bin/python -m benchmarks.compressible --reps 3
    # smoke check (about 1.5 min): a small tree (/usr/lib/python3) instead of
    # debootstrap, one repetition
    .venv/bin/python -m benchmarks.compressible --smoke

Prerequisites: ``apt-get install -y debootstrap qemu-utils e2fsprogs``
(``mkfs.ext4`` >= 1.43 for ``-d``), a reachable Debian mirror for
debootstrap, and the throughput benchmark's (see README.md).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(_HERE)
if _REPO not in sys.path:
    sys.path.insert(0, _REPO)

from benchmarks import report, throughput, workloads  # noqa: E402

MiB = 1 << 20
DEFAULT_TOOLS = 'dtn-migrate-zoff,dtn-migrate-zauto,dtn-migrate-zstd,gridftp'
DEFAULT_MIRROR = 'http://deb.debian.org/debian'
TREE_DIR = '/var/tmp/dtnm-bench'
#: --smoke: an existing tree (a 50 MB qcow2), one repetition, no
#: warm-up.
SMOKE = {'source': '/usr/lib/python3', 'reps': 1, 'warmup': 0,
         'timeout': 120}


def _run(argv, log=print, timeout=3600):
    log('$ ' + ' '.join(argv))
    subprocess.run(argv, check=True, timeout=timeout,
                   stdout=subprocess.DEVNULL)


def mirror_reachable(mirror, suite, timeout=10):
    """(True, '') if MIRROR/dists/SUITE/Release answers, else why not."""
    import urllib.request
    url = '%s/dists/%s/Release' % (mirror.rstrip('/'), suite)
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            r.read(64)
        return True, ''
    except Exception as exc:  # noqa: B902 - any failure: not reachable
        return False, '%s: %s' % (url, exc)


def tree_bytes(path):
    """Bytes of the regular files below path (apparent sizes)."""
    total = 0
    for top, dirs, files in os.walk(path):
        for name in files:
            try:
                st = os.lstat(os.path.join(top, name))
            except OSError:
                continue
            if not os.path.islink(os.path.join(top, name)):
                total += st.st_size
    return total


class RootfsImage:
    """A qcow2 image of a real root file system, as a throughput dataset
    (``root``, ``files``, ``total_bytes``, ``manifest_path``...).
    """

    def __init__(self, data_dir, source='debootstrap', suite='bookworm',
                 variant='minbase', mirror=DEFAULT_MIRROR, fs_slack=0.25,
                 tree_dir=TREE_DIR):
        self.source, self.suite, self.variant = source, suite, variant
        self.mirror, self.fs_slack = mirror, fs_slack
        self.data_dir = os.path.abspath(data_dir)
        if source == 'debootstrap':
            tag = '%s-%s' % (suite, variant)
            self.tree = os.path.join(tree_dir, 'rootfs-%s' % tag)
        else:
            self.tree = os.path.abspath(source)
            tag = 'tree' + self.tree.replace('/', '-')
        self.name = 'rootfs-%s' % tag
        self.root = os.path.join(self.data_dir, self.name)
        self.files = ['rootfs.qcow2']
        self.path = os.path.join(self.root, self.files[0])
        self.manifest_path = os.path.join(self.data_dir,
                                          self.name + '.manifest.json')
        self.info_path = os.path.join(self.data_dir, self.name + '.info.json')
        self.timings = {}
        self.info = {}
        self.total_bytes = 0
        self.sizes = {}

    def ensure(self, log=print):
        if os.path.exists(self.path) and os.path.exists(self.manifest_path) \
                and os.path.exists(self.info_path):
            with open(self.info_path) as f:
                self.info = json.load(f)
            if self.info.get('qcow2_bytes') == os.stat(self.path).st_size:
                log('image %s: reusing %s' % (self.name, self.path))
                return self._sized()
        self.build(log)
        return self._sized()

    def _sized(self):
        self.total_bytes = os.stat(self.path).st_size
        self.sizes = {self.files[0]: self.total_bytes}
        return self

    def debootstrap(self, log=print):
        if os.path.isdir(os.path.join(self.tree, 'usr', 'bin')):
            log('tree %s: reusing' % self.tree)
            return
        if shutil.which('debootstrap') is None:
            raise SystemExit('debootstrap not found: apt-get install -y '
                             'debootstrap (or use --source DIR)')
        ok, why = mirror_reachable(self.mirror, self.suite)
        if not ok:
            raise SystemExit('no Debian mirror reachable (%s); use '
                             '--source DIR with a real tree such as /usr'
                             % why)
        tmp = self.tree + '.tmp'
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(os.path.dirname(self.tree), exist_ok=True)
        t0 = time.monotonic()
        _run(['debootstrap', '--variant=' + self.variant, self.suite, tmp,
              self.mirror], log)
        os.rename(tmp, self.tree)
        self.timings['debootstrap_s'] = time.monotonic() - t0

    def build(self, log=print):
        for exe in ('mkfs.ext4', 'qemu-img'):
            if shutil.which(exe) is None:
                raise SystemExit('%s not found: apt-get install -y '
                                 'e2fsprogs qemu-utils' % exe)
        if self.source == 'debootstrap':
            self.debootstrap(log)
        elif not os.path.isdir(self.tree):
            raise SystemExit('--source %s is not a directory' % self.tree)
        tmp = self.root + '.tmp'
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        data = tree_bytes(self.tree)
        # room for the data, inodes and journal: ext4 needs some slack
        fs_size = int(data * (1 + self.fs_slack)) + 64 * MiB
        fs_size = (fs_size + MiB - 1) // MiB * MiB
        raw = os.path.join(tmp, 'rootfs.ext4')
        t0 = time.monotonic()
        _run(['mkfs.ext4', '-q', '-F', '-L', 'rootfs', '-d', self.tree,
              raw, '%dk' % (fs_size // 1024)], log)
        t1 = time.monotonic()
        _run(['qemu-img', 'convert', '-O', 'qcow2', raw,
              os.path.join(tmp, 'rootfs.qcow2')], log)
        t2 = time.monotonic()
        os.unlink(raw)
        shutil.rmtree(self.root, ignore_errors=True)
        os.rename(tmp, self.root)
        size = os.stat(self.path).st_size
        t3 = time.monotonic()
        sha = workloads.sha512_file(self.path)
        self.timings.update(mkfs_s=t1 - t0, convert_s=t2 - t1,
                            sha512_s=time.monotonic() - t3)
        self.info = {
            'source': self.source, 'tree': self.tree, 'suite': self.suite,
            'variant': self.variant, 'mirror': self.mirror,
            'tree_bytes': data, 'ext4_bytes': fs_size, 'qcow2_bytes': size,
            'zstd1_ratio': zstd_ratio(self.path),
            'mkfs': report.tool_version(['mkfs.ext4', '-V']),
            'qemu-img': report.tool_version(['qemu-img', '--version'])}
        workloads._write_json(self.manifest_path, {'files': [
            {'name': self.files[0], 'size': size, 'sha512': sha}]})
        workloads._write_json(self.info_path, self.info)
        log('image %s: %d bytes of tree -> ext4 of %d -> qcow2 of %d bytes '
            '(zstd -1 per 4 MiB object: %s)' % (
                self.name, data, fs_size, size, self.info['zstd1_ratio']))

    def remove(self):
        shutil.rmtree(self.root, ignore_errors=True)
        for p in (self.manifest_path, self.info_path):
            if os.path.exists(p):
                os.unlink(p)


def zstd_ratio(path, object_size=4 * MiB, level=1):
    """Encoded / plain bytes when every object is zstd-compressed alone
    (what the protocol does), or None without ``zstandard``.
    """
    try:
        import zstandard
    except ImportError:
        return None
    c = zstandard.ZstdCompressor(level=level)
    plain = enc = 0
    with open(path, 'rb') as f:
        while True:
            chunk = f.read(object_size)
            if not chunk:
                break
            plain += len(chunk)
            enc += min(len(chunk), len(c.compress(chunk)))
    return round(enc / plain, 3) if plain else None


def compression_table(results):
    """Per link and tool: MB on the link, its ratio to the image, seconds,
    and both against dtn-migrate-zoff (medians of the same run).
    """
    headers = ['link', 'tool', 'MB on link (median)', 'link / image',
               'seconds: median (min–max)', 'time vs off', 'bytes vs off',
               'CPU-s/GiB']
    rows = []
    by = {(s['link'], s['tool']): s for s in results.get('summary', [])}
    for s in results.get('summary', []):
        off = by.get((s['link'], 'dtn-migrate-zoff'))
        wire = (s.get('link_bytes') or {}).get('median')
        off_wire = ((off or {}).get('link_bytes') or {}).get('median')
        rows.append([
            s['link'], s['tool'],
            report.fmt(None if wire is None else wire / 1e6),
            report.fmt(report.ratio(wire, s['dataset_bytes']), 3),
            report.fmt_range(s['seconds'], 2),
            report.fmt(report.ratio(s['seconds']['median'],
                                    off and off['seconds']['median']), 2),
            report.fmt(report.ratio(wire, off_wire), 3),
            report.fmt((s.get('cpu_s_per_GiB') or {}).get('median'), 2)])
    return headers, rows


def _dataset(results):
    return next(iter(results.get('datasets', {}).values()), {})


def write_compression_table(results, out):
    """compression.rst and .md: the bytes on the link, tool by tool."""
    ds = _dataset(results)
    report.write_tables(
        os.path.join(out, 'compression'), compression_table(results),
        note='Image: %s, %s bytes (qcow2 of a %s-byte tree)' % (
            ds.get('name'), ds.get('bytes'), ds.get('tree_bytes')))


def plot_link_bytes(results, out):
    """link-bytes.png: MB on the link per link and tool."""
    ds = _dataset(results)
    values = {}
    for s in results.get('summary', []):
        if s.get('link_bytes'):
            values.setdefault(s['tool'], {})[s['link']] = {
                k: (v / 1e6 if k in ('median', 'min', 'max') else v)
                for k, v in s['link_bytes'].items()}
    if values:
        links = results['settings']['links']
        hlines = {link: (ds.get('bytes', 0) / 1e6, 'image size')
                  for link in links}
        report.grouped_bars(
            os.path.join(out, 'link-bytes.png'), links,
            [t for t in results['settings']['tools'] if t in values],
            values, ylabel='MB on the link', xlabel='link',
            title='qcow2 root file system: bytes on the DTN link',
            hlines=hlines)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        prog='python -m benchmarks.compressible',
        description=__doc__.split('\n')[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument('--source', default='debootstrap',
                    help="'debootstrap' (a minimal Debian), or a directory "
                    "whose tree goes into the image (e.g. /usr)")
    ap.add_argument('--suite', default='bookworm')
    ap.add_argument('--variant', default='minbase')
    ap.add_argument('--mirror', default=DEFAULT_MIRROR)
    ap.add_argument('--fs-slack', type=float, default=0.25,
                    help='ext4 size = tree bytes x (1 + slack) + 64 MiB')
    ap.add_argument('--links', default='100mbit,1gbit')
    ap.add_argument('--tools', default=DEFAULT_TOOLS,
                    help='comma list of: ' + ', '.join(throughput.TOOLS))
    ap.add_argument('--reps', type=int, default=3)
    ap.add_argument('--warmup', type=int, default=1,
                    help='untimed rounds of every tool first (see '
                    'benchmarks.throughput)')
    ap.add_argument('--data-dir', default=workloads.DEFAULT_DATA_DIR)
    ap.add_argument('--dst-dir', default='/dev/shm/dtnm-bench/dst')
    ap.add_argument('--remove-data', action='store_true')
    ap.add_argument('--out', default=report.default_out('compressible'))
    ap.add_argument('--render', action='store_true')
    ap.add_argument('--mtu', type=int, default=1500)
    ap.add_argument('--streams', type=int, default=None)
    ap.add_argument('--object-size', default=None)
    ap.add_argument('--timeout', type=float, default=None)
    report.add_smoke(ap, 'compressible', SMOKE, 'about 1.5 min')
    args = report.apply_smoke(ap.parse_args(argv), ap, 'compressible',
                              SMOKE)
    # benchmarks.throughput's other options, at its defaults: one it
    # gains is never missing here.
    for key, value in vars(throughput.parse_args([])).items():
        vars(args).setdefault(key, value)
    args.title = 'Compressible: qcow2 of a root file system'
    return args


#: What this benchmark writes beside benchmarks.throughput's outputs.
EXTRAS = (('compression table', write_compression_table),
          ('link bytes figure', plot_link_bytes))


def main(argv=None):
    args = parse_args(argv)
    redo = 'python -m benchmarks.compressible --render --out %s' % args.out
    if args.render:
        return throughput.render(args, EXTRAS, redo)
    report.require_plotting()
    image = RootfsImage(args.data_dir, args.source, args.suite, args.variant,
                        args.mirror, args.fs_slack)
    image.ensure()
    title = 'qcow2 %s' % workloads.format_size(image.total_bytes) \
        if image.total_bytes % MiB == 0 else \
        'qcow2 %.0f MB' % (image.total_bytes / 1e6)
    return throughput.measure(args, {'rootfs': image}, {'rootfs': title},
                              {'image': image.info}, EXTRAS, redo)


if __name__ == '__main__':
    sys.exit(main())
