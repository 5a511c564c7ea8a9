"""Sparse images: an 8 GiB raw image that holds 10 MiB of data.

Two levels, each writing its own outputs under ``--out``:

``transfer`` (``--out``/transfer)
    The image as a sparse file crosses the emulated DTN link (1 Gbit/s by
    default) with the tools of ``benchmarks/throughput.py``, interleaved:
    ``dtn-migrate`` (zero extents on, the default), ``dtn-migrate-nozero``
    (``--no-zero-extents``: every zero crosses the link, as protocol 2
    did) and ``gridftp`` (reference).  Reported: wall time, CPU-s, the
    bytes on the veth (interface counters, both directions, headers and
    control traffic included) and the disk space of the copy.

``migration`` (``--out``/migration)
    The image is uploaded once to Glance A of the two local clouds of
    ``benchmarks/_clouds.py``; then, interleaved, every repetition runs:

    * ``pipelined``: a dtn-migrate migration Glance A -> Glance B,
      request to the source engine's end notification (as
      ``benchmarks/migration.py``), with the veth's byte counters read
      before and after;
    * ``download``: Glance A download of the image alone (the bytes are
      read and dropped, through ``ImageService.download``);
    * ``upload``: Glance B upload of the same bytes alone (generated in
      memory, through ``ImageService.upload``).

    Reported: the migration against ``download + upload`` of the same
    repetition, the bytes on the link against the data, and the bytes
    the export wrote onto staging export A (engine A's log).

Targets (issue 13): bytes on the DTN link <= 1.05 x data + 1 MiB;
migration wall time <= 1.2 x (download + upload alone).

Data layout: ``--extents`` pieces of ``--data / --extents`` bytes of
pseudo-random data (the workloads' PRNG block, stamped, nothing
compresses), zeros (holes) everywhere else.  ``--layout spread`` (the
default) puts them at evenly spread offsets, the first at 0 and the last
ending at the end of the image; ``--layout scattered`` at random offsets
(``--seed``), multiples of ``--align`` bytes (1: not aligned at all), as
a file system scatters its data (issue 37: 40 pieces of 256 KiB in 8 GiB
put 16 x the data on the staging export)::

    .venv/bin/python -m benchmarks.sparse --levels migration --size 8G \
        --data 10M --extents 40 --layout scattered --align 4096 --reps 1

Usage (root, from the repository root)::

    .venv/bin/python -m benchmarks.sparse --size 8G --data 10M --reps 3
    # smoke checks (--size 256M --data 2M --reps 1: under a minute for
    # the transfer level, about 3 min for the migration level)
    .venv/bin/python -m benchmarks.sparse --smoke --levels transfer
    .venv/bin/python -m benchmarks.sparse --smoke --levels migration
    # both levels' tables and figures again from their results.json
    .venv/bin/python -m benchmarks.sparse --render --out DIR

The migration level needs what ``benchmarks/migration.py`` needs (root,
``tools/bootstrap-clouds.sh``, RabbitMQ) and about 3 x ``--size`` free in
``--cloud-dir`` (Glance stores keep every zero).
"""

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(_HERE)
if _REPO not in sys.path:
    sys.path.insert(0, _REPO)

from benchmarks import common, linkstats, report, throughput  # noqa: E402
from benchmarks import workloads  # noqa: E402

MiB = 1 << 20
TARGET_LINK = 1.05           # x data, + 1 MiB
TARGET_LINK_SLACK = MiB
TARGET_TIME = 1.2            # x (download + upload alone)
MIGRATION_MODES = ('pipelined', 'download', 'upload')
#: --smoke: the options of a quick check.
SMOKE = {'size': 256 * MiB, 'data': 2 * MiB, 'reps': 1, 'timeout': 300}


def extents(size, data, count):
    """[(offset, length)] of the data pieces, spread over ``size``."""
    count = max(1, min(count, data))
    piece = data // count
    if count == 1:
        return [(0, data)]
    step = (size - piece) // (count - 1)
    step -= step % 4096
    out = [(i * step, piece) for i in range(count - 1)]
    out.append((size - piece, piece))
    return out


def scattered(size, data, count, seed, align=4096):
    """[(offset, length)] of ``count`` pieces of ``data / count`` bytes
    at random offsets of ``size`` (multiples of ``align``), in offset
    order, none touching another.
    """
    count = max(1, min(count, data))
    piece = data // count
    slots = (size - piece) // align
    if count * (piece + align) > size // 2:
        raise ValueError('%d pieces of %d bytes do not scatter in %d'
                         % (count, piece, size))
    rng = random.Random(seed)
    out = []
    while len(out) < count:
        off = rng.randrange(slots + 1) * align
        if all(off + piece < o or o + piece < off for o, _ in out):
            out.append((off, piece))
    return sorted(out)


#: --layout: the pieces' [(offset, length)] of (size, data, count, seed,
#: align).
LAYOUTS = {'spread': lambda size, data, count, seed, align:
           extents(size, data, count),
           'scattered': scattered}


def layout(args):
    """The data pieces of ``args``' image."""
    return LAYOUTS[args.layout](args.size, args.data, args.extents,
                                args.seed, args.align)


class SparseImage:
    """The image as a sparse file, as a throughput dataset."""

    def __init__(self, data_dir, size, data, count, seed, pieces=None,
                 kind='spread'):
        self.size, self.data, self.count, self.seed = size, data, count, seed
        self.layout = pieces or extents(size, data, count)
        self.data_dir = os.path.abspath(data_dir)
        self.name = 'sparse-%s-%s-x%d' % (workloads.format_size(size),
                                          workloads.format_size(data), count)
        if kind != 'spread':
            self.name += '-%s-%d' % (kind, seed)
        self.root = os.path.join(self.data_dir, self.name)
        self.files = ['sparse.raw']
        self.path = os.path.join(self.root, self.files[0])
        self.manifest_path = os.path.join(self.data_dir,
                                          self.name + '.manifest.json')
        self.total_bytes = size
        self.sizes = {self.files[0]: size}
        self.timings = {}
        self.info = {'data_bytes': sum(n for _, n in self.layout),
                     'extents': self.layout}

    def ensure(self, log=print):
        if os.path.exists(self.path) and os.path.exists(self.manifest_path) \
                and os.stat(self.path).st_size == self.size:
            log('image %s: reusing %s' % (self.name, self.path))
        else:
            self.build(log)
        self.info['allocated_bytes'] = linkstats.allocated_bytes(
            [self.path])
        return self

    def build(self, log=print):
        tmp = self.root + '.tmp'
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        path = os.path.join(tmp, self.files[0])
        t0 = time.monotonic()
        h = hashlib.sha512()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.ftruncate(fd, self.size)
            for i, (off, n) in enumerate(self.layout):
                os.pwrite(fd, b''.join(workloads.chunks(n, i + 1,
                                                        self.seed)), off)
        finally:
            os.close(fd)
        for _ in workloads.image_chunks(self.size, self.layout, self.seed,
                                        h):
            pass
        shutil.rmtree(self.root, ignore_errors=True)
        os.rename(tmp, self.root)
        workloads._write_json(self.manifest_path, {'files': [
            {'name': self.files[0], 'size': self.size,
             'sha512': h.hexdigest()}]})
        self.timings['build_s'] = time.monotonic() - t0
        log('image %s: %d bytes, %d of data in %d extents (%.1f s)' % (
            self.name, self.size, self.info['data_bytes'], len(self.layout),
            self.timings['build_s']))

    def remove(self):
        shutil.rmtree(self.root, ignore_errors=True)
        if os.path.exists(self.manifest_path):
            os.unlink(self.manifest_path)


def export_written(log):
    """Bytes the export wrote onto the staging export, from engine A's
    log of one migration (its last ``stage-image`` line), or None.
    """
    found = re.findall(r'staged \S+ \(\d+ bytes, (\d+) exported by this '
                       r'run', log)
    return int(found[-1]) if found else None


def link_target(data_bytes):
    return TARGET_LINK * data_bytes + TARGET_LINK_SLACK


# ------------------------------------------------------------ transfer level

def link_verdict(link_bytes, data):
    """The link-bytes target over a summarize() dict of bytes on the
    link, run by run ('–' without data or link bytes).
    """
    wire = (link_bytes or {}).get('median')
    if wire is None or not data:
        return '–'
    return report.verdict(wire, link_bytes.get('values'),
                          lambda v: v <= link_target(data))


def write_link_table(results, out):
    """link.rst and .md: bytes on the link against the target, and the
    copies' disk space.
    """
    ds = next(iter(results.get('datasets', {}).values()), {})
    data = ds.get('data_bytes')
    headers = ['link', 'tool', 'seconds: median (min–max)',
               'MB on link (median)', 'link / data',
               'target ≤ %.2f × data + 1 MiB' % TARGET_LINK,
               'MB allocated at the sink']
    rows = []
    for s in results.get('summary', []):
        wire = (s.get('link_bytes') or {}).get('median')
        alloc = (s.get('dst_allocated_bytes') or {}).get('median')
        verdict = link_verdict(s.get('link_bytes'), data)
        rows.append([s['link'], s['tool'], report.fmt_range(s['seconds'], 2),
                     report.fmt(None if wire is None else wire / 1e6),
                     report.fmt(report.ratio(wire, data), 3), verdict,
                     report.fmt(None if alloc is None else alloc / 1e6)])
    report.write_tables(
        os.path.join(out, 'link'), (headers, rows),
        note='Image: %s bytes, %s bytes of data in %d extents.' % (
            ds.get('bytes'), data, len(ds.get('extents') or ())))


def plot_link_bytes(results, out):
    """link-bytes.png: MB on the link per tool, against the target."""
    ds = next(iter(results.get('datasets', {}).values()), {})
    data = ds.get('data_bytes')
    values = {}
    for s in results.get('summary', []):
        if s.get('link_bytes'):
            values.setdefault(s['tool'], {})[s['link']] = {
                k: (max(v, 1) / 1e6 if k in ('median', 'min', 'max') else v)
                for k, v in s['link_bytes'].items()}
    if values:
        links = results['settings']['links']
        report.grouped_bars(
            os.path.join(out, 'link-bytes.png'), links,
            [t for t in results['settings']['tools'] if t in values], values,
            ylabel='MB on the link (log)', xlabel='link', log=True,
            title='sparse image: bytes on the DTN link',
            hlines={link: (link_target(data) / 1e6,
                           'target %.1f MB' % (link_target(data) / 1e6))
                    for link in links} if data else None)


#: What the transfer level writes beside benchmarks.throughput's outputs.
TRANSFER_EXTRAS = (('link table', write_link_table),
                   ('link bytes figure', plot_link_bytes))


def redo(args):
    """The command that writes both levels' tables and figures again."""
    return 'python -m benchmarks.sparse --render --levels %s --out %s' % (
        args.levels, args.out)


def transfer_args(args):
    """benchmarks.throughput's options for the transfer level: its own
    defaults (so an option it gains is never missing here), with this
    run's.
    """
    targs = throughput.parse_args([])
    vars(targs).update(
        links=args.links, tools=args.tools, reps=args.reps, mtu=args.mtu,
        warmup=args.warmup, data_dir=args.data_dir, dst_dir=args.dst_dir,
        remove_data=args.remove_data, out=os.path.join(args.out, 'transfer'),
        timeout=args.timeout, title='Sparse image (transfer)')
    return targs


def run_transfer(args):
    image = SparseImage(args.data_dir, args.size, args.data, args.extents,
                        args.seed, layout(args), args.layout)
    targs = transfer_args(args)
    title = '%s raw, %s data' % (workloads.format_size(args.size),
                                 workloads.format_size(args.data))
    return throughput.measure(targs, {'sparse': image}, {'sparse': title},
                              extras=TRANSFER_EXTRAS, redo=redo(args))


def render_transfer(args):
    return throughput.render(transfer_args(args), TRANSFER_EXTRAS,
                             redo(args))


# ----------------------------------------------------------- migration level

def _migration_bench():
    # Imported here: the transfer level needs no OpenStack libraries.
    from benchmarks import migration

    class SparseBench(migration.Bench):
        """migration.Bench with a sparse source image, the Glance
        download / upload alone, and the veth's byte counters.
        """

        def upload_source(self):
            args = self.args
            self.layout = layout(args)
            images = self.clouds.a.images()
            image = images.create({'name': 'bench-sparse',
                                   'disk_format': 'raw',
                                   'container_format': 'bare'})
            hashes = []

            def open_stream():
                hashes.append(hashlib.sha512())
                return workloads.image_chunks(args.size, self.layout,
                                              args.seed, hashes[-1])
            self.log('uploading the sparse %s image to Glance A'
                     % workloads.format_size(args.size))
            t0 = time.monotonic()
            image = images.upload(image['id'], open_stream, args.size)
            sha = hashes[-1].hexdigest()
            if image.get('os_hash_value') != sha:
                raise common.BenchError('Glance A stored the image '
                                        'wrongly: %s' % image)
            self.source = {'image_id': image['id'], 'size': args.size,
                           'sha512': sha, 'seed': args.seed,
                           'upload_seconds': time.monotonic() - t0,
                           'data_bytes': sum(n for _, n in self.layout),
                           'extents': self.layout}

        def run_mode(self, mode):
            cpu = self.cpu.snapshot()
            before = linkstats.counters(self.clouds.lab)
            if mode == 'download':
                results = self.run_download()
            elif mode == 'upload':
                results = self.run_upload()
            else:
                log = len(self.clouds.a.engine.log_text())
                results = self.run_migration(mode)
                results[0][2]['export_written'] = export_written(
                    self.clouds.a.engine.log_text()[log:])
            extra = results[0][2]
            extra['link'] = linkstats.delta(
                before, linkstats.counters(self.clouds.lab))
            extra['cpu_seconds'] = self.cpu.delta(cpu, self.cpu.snapshot())
            return results

        def run_download(self):
            images = self.clouds.a.images()
            h = hashlib.sha512() if self.args.check_download else None
            n = 0
            t0 = time.monotonic()
            for chunk in images.download(self.source['image_id']):
                n += len(chunk)
                if h is not None:
                    h.update(chunk)
            seconds = time.monotonic() - t0
            if n != self.source['size'] or (
                    h is not None and h.hexdigest() != self.source['sha512']):
                raise common.BenchError('download: %d bytes, not the '
                                        'image' % n)
            return [('download', seconds, {})]

        def run_upload(self):
            images = self.clouds.b.images()
            t0 = time.monotonic()
            image = images.create({'name': 'bench-upload-alone',
                                   'disk_format': 'raw',
                                   'container_format': 'bare'})
            image = images.upload(
                image['id'], lambda: workloads.image_chunks(
                    self.source['size'], self.layout, self.args.seed),
                self.source['size'])
            seconds = time.monotonic() - t0
            self.check_peer_image(image['id'])
            return [('upload', seconds, {})]

        # -------------------------------------------------- results

        def save(self, final=False):
            """results.json; once the run is over, the tables and the
            figure (report.render's exit status).
            """
            out = self.args.out
            rows = self.rows()
            loaded = self.loaded or {}
            command = loaded.get('command', report.command_line())
            path = os.path.join(out, 'results.json')
            report.write_json(path, {
                'command': command,
                'machine': loaded.get('machine', report.machine_info()),
                'settings': self.settings, 'source': self.source,
                'complete': final, 'samples': self.samples,
                'failures': self.failures, 'summary': rows})
            if not final:
                return 0

            def tables():
                self.write_tables(rows, command)

            def figure():
                self.plot_sparse(rows, os.path.join(out, 'sparse.png'))
            return report.render(path, self.args.redo, tables, figure)

        def rows(self):
            out = {}
            for what in MIGRATION_MODES:
                runs = [s for s in self.samples if s['what'] == what]
                if not runs:
                    continue
                wire = [(s['extra'].get('link') or {}).get('total')
                        for s in runs]
                own = [sum(s['extra']['cpu_seconds'].get(n, 0)
                           for n in migration.OWN if n not in (
                               'glance-a', 'glance-b', 'keystone',
                               'benchmark process'))
                       for s in runs if 'cpu_seconds' in s['extra']]
                written = [s['extra'].get('export_written') for s in runs]
                out[what] = {'seconds': report.summarize(
                    [s['seconds'] for s in runs]),
                    'link_bytes': report.summarize(wire),
                    'export_written': report.summarize(
                        [n for n in written if n is not None]),
                    'dtn_migrate_cpu_s': report.summarize(own)}
            base = []
            for rep in range(self.settings.get('repeat', 0)):
                d = self.seconds('download', rep)
                u = self.seconds('upload', rep)
                p = self.seconds('pipelined', rep)
                if d and u and p:
                    base.append(p[0] / (d[0] + u[0]))
            out['pipelined/(download+upload)'] = report.summarize(base)
            return out

        def write_tables(self, rows, command):
            out = self.args.out
            data = self.source.get('data_bytes') or 0
            headers = ['run', 'seconds: median (min–max)',
                       'MB on link (median)', 'link / data',
                       'MB written to export A (median)',
                       'engines + agents CPU-s (median)']
            table = []
            for what in MIGRATION_MODES:
                r = rows.get(what)
                if not r:
                    continue
                wire = r['link_bytes']['median']
                written = (r.get('export_written') or {}).get('median')
                table.append([what, report.fmt_range(r['seconds'], 1),
                              report.fmt(None if wire is None
                                         else wire / 1e6, 2),
                              report.fmt(report.ratio(wire, data), 3)
                              if what == 'pipelined' else '–',
                              report.fmt(None if written is None
                                         else written / 1e6, 2),
                              report.fmt(r['dtn_migrate_cpu_s']['median'])])
            ratio = rows['pipelined/(download+upload)']
            wires = (rows.get('pipelined') or {}).get('link_bytes', {})
            wire = wires.get('median')
            theaders = ['target', 'value', 'verdict']
            trows = []
            if ratio['n']:
                trows.append([
                    'migration ≤ %.1f × (download + upload alone)'
                    % TARGET_TIME, report.fmt_range(ratio, 2),
                    report.verdict(ratio['median'], ratio['values'],
                                   lambda v: v <= TARGET_TIME)])
            if wire is not None and data:
                trows.append([
                    'link bytes ≤ %.2f × data + 1 MiB (%.2f MB)' % (
                        TARGET_LINK, link_target(data) / 1e6),
                    '%.2f MB' % (wire / 1e6), link_verdict(wires, data)])
            report.write_tables(os.path.join(out, 'results'),
                                (headers, table), (theaders, trows),
                                command=command)

        def plot_sparse(self, rows, path):
            if not all(k in rows for k in MIGRATION_MODES):
                return
            fig, ax = report.pyplot().subplots(figsize=(6.4, 3.2))
            report.range_bar(ax, 0, rows['pipelined']['seconds'], 0,
                             text=None)
            bottom = 0.0
            for j, what in enumerate(('download', 'upload')):
                m = rows[what]['seconds']['median']
                report.range_bar(
                    ax, 1, rows[what]['seconds'], 1 + j, text=None,
                    bottom=bottom, label='Glance %s alone (%.1f s)' % (
                        'A download' if what == 'download' else 'B upload',
                        m))
                bottom += m
            ax.axhline(bottom * TARGET_TIME, color='grey', linestyle=':',
                       linewidth=0.8,
                       label='target: %.1f × (download + upload)'
                       % TARGET_TIME)
            ax.set_xticks([0, 1])
            ax.set_xticklabels(['dtn-migrate pipelined',
                                'download + upload alone'])
            ax.set_ylabel('time (s)')
            ax.set_title('sparse %s raw image (%.1f MiB data), %s DTN link'
                         % (workloads.format_size(self.source['size']),
                            self.source['data_bytes'] / MiB,
                            self.settings.get('rate') or 'unlimited'))
            ax.legend(frameon=False, fontsize=7, loc='upper center',
                      ncol=2, bbox_to_anchor=(0.5, -0.15))
            report.save_figure(fig, path)

    return migration, SparseBench


def migration_args(args):
    """benchmarks.migration's options for the migration level: its own
    defaults (its engine and agent settings included), with this run's.
    """
    from benchmarks import migration
    margs = migration.parser().parse_args([])
    vars(margs).update(
        size=args.size, data=args.data, extents=args.extents,
        layout=args.layout, align=args.align,
        seed=args.seed, repeat=args.reps, warmup=args.warmup,
        modes=list(MIGRATION_MODES), rate=args.rate, mtu=args.mtu,
        data_dir=args.cloud_dir,
        timeout=args.timeout or max(900.0, args.size / 5e6),
        out=os.path.join(args.out, 'migration'),
        check_download=args.check_download, redo=redo(args))
    return margs


def run_migration(args):
    from benchmarks import _clouds
    migration, SparseBench = _migration_bench()
    why = _clouds.check()
    if why:
        print('migration level cannot run: %s' % why, flush=True)
        return 1
    free = shutil.disk_usage(args.cloud_dir).free
    if free < 3 * args.size:
        print('migration level cannot run: %s has %.1f GB free, about 3 x '
              '%s are needed' % (args.cloud_dir, free / 1e9,
                                 workloads.format_size(args.size)),
              flush=True)
        return 1
    margs = migration_args(args)
    os.makedirs(margs.out, exist_ok=True)
    report.require_plotting()
    bench = SparseBench(margs)
    bench.settings = {'size': args.size, 'data': args.data,
                      'extents': args.extents, 'layout': args.layout,
                      'align': args.align, 'repeat': args.reps,
                      'modes': margs.modes, 'rate': args.rate,
                      'mtu': args.mtu, 'engine': migration.ENGINE,
                      'data_dir': args.cloud_dir}
    t0 = time.monotonic()
    try:
        bench.setup()
        bench.run()
    finally:
        errors = bench.close()
        if errors:
            print('cleanup errors: %s' % '; '.join(errors), flush=True)
    bench.settings['runtime_seconds'] = time.monotonic() - t0
    rc = bench.save(final=True)
    print('runtime %.0f s; results in %s' % (
        bench.settings['runtime_seconds'], margs.out), flush=True)
    return 1 if bench.failures else rc


def render_migration(args):
    """The migration level's tables and figure again from its JSON."""
    _, SparseBench = _migration_bench()
    margs = migration_args(args)
    bench = SparseBench(margs)
    with open(os.path.join(margs.out, 'results.json')) as f:
        bench.load(json.load(f))
    return bench.save(final=True)


def parser():
    ap = argparse.ArgumentParser(
        prog='python -m benchmarks.sparse',
        description=__doc__.split('\n')[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument('--levels', default='transfer,migration')
    ap.add_argument('--size', type=workloads.parse_size, default='8G')
    ap.add_argument('--data', type=workloads.parse_size, default='10M')
    ap.add_argument('--extents', type=int, default=10)
    ap.add_argument('--layout', choices=sorted(LAYOUTS), default='spread',
                    help='where the data pieces lie: evenly spread, or '
                    'scattered at random offsets (--seed, --align)')
    ap.add_argument('--align', type=workloads.parse_size, default=4096,
                    help='--layout scattered: the pieces\' offsets are '
                    'multiples of this (1: not aligned)')
    ap.add_argument('--seed', type=int, default=workloads.DEFAULT_SEED)
    ap.add_argument('--reps', type=int, default=3)
    ap.add_argument('--warmup', type=int, default=0,
                    help='rounds of every tool (transfer level) or mode '
                    '(migration level) run first and kept out of the '
                    'results')
    ap.add_argument('--links', default='1gbit',
                    help='transfer level: links (see throughput.py)')
    ap.add_argument('--tools', default='dtn-migrate,dtn-migrate-nozero,'
                    'gridftp', help='transfer level: tools')
    ap.add_argument('--rate', default='1gbit',
                    help="migration level: the DTN link's tc rate")
    ap.add_argument('--mtu', type=int, default=1500)
    ap.add_argument('--data-dir', default=workloads.DEFAULT_DATA_DIR)
    ap.add_argument('--dst-dir', default='/dev/shm/dtnm-bench/dst')
    ap.add_argument('--cloud-dir', default='/var/tmp',
                    help='migration level: Glance stores and staging')
    ap.add_argument('--check-download', action='store_true',
                    help='migration level: sha512 the download alone too '
                    '(costs CPU the migration does not spend)')
    ap.add_argument('--remove-data', action='store_true')
    ap.add_argument('--timeout', type=float, default=None)
    ap.add_argument('--out', default=report.default_out('sparse'))
    report.add_smoke(ap, 'sparse', SMOKE, '< 1 min for the transfer level, '
                     'about 3 min for the migration level')
    ap.add_argument('--render', action='store_true',
                    help="measure nothing: write each level's tables and "
                    "figures again from its results.json under --out")
    return ap


def main(argv=None):
    ap = parser()
    args = ap.parse_args(argv)
    report.apply_smoke(args, ap, 'sparse', SMOKE)
    levels = [x for x in args.levels.split(',') if x]
    for level in levels:
        if level not in LEVELS:
            ap.error('unknown level %r (%s)' % (level, ', '.join(LEVELS)))
    rc = 0
    common.exit_on_signals()
    for level in levels:
        rc = max(rc, LEVELS[level][args.render](args) or 0)
    return rc


#: Each level's (run, render).
LEVELS = {'transfer': (run_transfer, render_transfer),
          'migration': (run_migration, render_migration)}


if __name__ == '__main__':
    sys.exit(main())
