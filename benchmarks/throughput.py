"""Side-by-side throughput: dtn-migrate against iperf3, GridFTP, rsync, xrdcp.

For every link (loopback, or two network namespaces joined by a veth pair,
optionally rate-limited with tbf) and every workload (one big file, or many
small files), the tools run INTERLEAVED: repetition r runs every tool once,
in an order rotated by r, so that slow phases of a noisy machine hit all
tools alike.  Medians, min and max of each tool, and ratios computed within
the same run, are written as JSON (raw samples included), Markdown and RST
tables and PNG bar charts.

Example (run as root from the repository root)::

    .venv/bin/python -m benchmarks.throughput \\
        --links loopback,1gbit,10gbit --workloads big,small \\
        --tools dtn-migrate,iperf3,gridftp,rsync,xrdcp --reps 3 \\
        --size-big 4G --small-count 1000 --out DIR

Every sample also carries the CPU seconds the tool's client and server
processes used (``cpu_s``, and ``cpu_s_per_GiB``), so that the cost of
dtn-migrate's frame authentication can be read against the same run::

    .venv/bin/python -m benchmarks.throughput --links loopback,10gbit \\
        --workloads big --size-big 4G --reps 5 \\
        --tools dtn-migrate,dtn-migrate-noauth,dtn-migrate-tls

``dtn-migrate`` tags every frame and object (the default),
``dtn-migrate-noauth`` runs both ends with ``--no-frame-auth``, and
``dtn-migrate-tls`` adds TLS (certificates made for the run) on top of
the tags, for reference.

See benchmarks/README.md for what each number means.
"""

import argparse
import functools
import json
import os
import resource
import shutil
import subprocess
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(_HERE)
if _REPO not in sys.path:
    sys.path.insert(0, _REPO)

from benchmarks._lab import netns  # noqa: E402
from benchmarks import common, linkstats, peers, report, workloads  # noqa
from dtn_migrate.engine import lock as engine_lock  # noqa: E402

DEFAULT_TOOLS = 'dtn-migrate,iperf3,gridftp,rsync,xrdcp'
REFERENCES = ('gridftp', 'gridftp-verify', 'iperf3', 'dtn-migrate-noauth')
GiB = 1 << 30


class DtnMigrateVariant(peers.DtnMigrate):
    """dtn-migrate with extra arguments for its sink as well.

    ``needs``: options that ``send --help`` must list, or the tool is
    skipped (PeerUnavailable).  After each run ``last`` also holds
    ``dst_allocated_bytes``, the disk space of the copies (a sparse
    source should stay sparse).
    """

    def __init__(self, name, sink_args=(), tls=False, needs=(), **kw):
        super().__init__(name=name, **kw)
        self.sink_args = list(sink_args)
        self.tls = tls
        self.needs = tuple(needs)

    def check(self):
        ok, why = super().check()
        if not ok or not self.needs:
            return ok, why
        try:
            proc = subprocess.run([self.exe, 'send', '--help'],
                                  capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return False, 'dtn-migrate-transfer send --help: %s' % exc
        missing = [o for o in self.needs if o not in proc.stdout]
        if missing:
            return False, ('dtn-migrate-transfer send does not know %s yet'
                           % ', '.join(missing))
        return True, ''

    def start_server(self):
        super().start_server()
        if self.tls:
            ca, cert, key = make_certs(self.workdir, 'sink')
            self.sink_args += ['--tls-cert', cert, '--tls-key', key]
            self.extra_args += ['--tls-ca', ca, '--server-name', 'sink']

    def spawn_server(self, argv, *args, **kw):
        return super().spawn_server(list(argv) + self.sink_args, *args,
                                    **kw)

    def before_run(self, files):
        # The sink starts here, fresh for every run.  Its start (Python
        # imports, about 0.3-0.5 CPU-s) is not transfer work: a GridFTP
        # or agent sink runs for good.  timed_run subtracts it.
        super().before_run(files)
        self.start_cpu = server_cpu(self.server)

    def after_run(self, proc, files, nbytes):
        out = super().after_run(proc, files, nbytes) or {}
        out['cpu_server_start_s'] = getattr(self, 'start_cpu', None)
        out['dst_allocated_bytes'] = linkstats.allocated_bytes(
            os.path.join(self.dst_dir, f) for f in files)
        return out


def _plain(tool):
    """Wrap a stock dtn-migrate tool so that it reports allocation too."""
    factory = peers.PEERS[tool]

    def make(**kw):
        peer = factory(**kw)
        variant = DtnMigrateVariant(peer.name, **kw)
        variant.known_hash = peer.known_hash
        variant.extra_args = list(peer.extra_args)
        return variant
    return make


def make_certs(directory, server_name):
    """A CA and a sink certificate it signs: (ca, cert, key) paths."""
    def openssl(*argv):
        subprocess.run(('openssl',) + argv, cwd=directory, check=True,
                       capture_output=True, timeout=60)
    newkey = ('-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1',
              '-nodes')
    openssl('req', '-x509', *newkey, '-keyout', 'ca.key', '-out', 'ca.pem',
            '-days', '2', '-subj', '/CN=bench ca',
            '-addext', 'basicConstraints=critical,CA:TRUE',
            '-addext', 'keyUsage=critical,keyCertSign')
    with open(os.path.join(directory, 'sink.ext'), 'w') as f:
        f.write('subjectAltName = DNS:%s\n' % server_name)
    openssl('req', *newkey, '-keyout', 'sink.key', '-out', 'sink.csr',
            '-subj', '/CN=' + server_name)
    openssl('x509', '-req', '-in', 'sink.csr', '-CA', 'ca.pem', '-CAkey',
            'ca.key', '-CAcreateserial', '-days', '2', '-extfile',
            'sink.ext', '-out', 'sink.pem')
    return tuple(os.path.join(directory, n)
                 for n in ('ca.pem', 'sink.pem', 'sink.key'))


#: dtn-migrate-transfer options of the data-path features (protocol 3);
#: a variant that needs one is skipped when ``send --help`` lacks it.
COMPRESSION_FLAG = '--compression'
NO_ZERO_FLAG = '--no-zero-extents'


def _variant(name, args=(), needs=(), **kw):
    """A dtn-migrate tool whose source AND sink get ``args``."""
    return DtnMigrateVariant(name, sink_args=args, extra_args=args,
                             needs=needs, **kw)


TOOLS = dict(peers.PEERS, **{
    # Frame authentication off at both ends (a trusted link).
    'dtn-migrate-noauth': lambda **kw: _variant(
        'dtn-migrate-noauth', ('--no-frame-auth',), **kw),
    # TLS as well as frame authentication, for reference.
    'dtn-migrate-tls': lambda **kw: DtnMigrateVariant(
        'dtn-migrate-tls', tls=True, **kw),
    # zstd per object, always (when it saves enough) / by the auto policy.
    'dtn-migrate-zstd': lambda **kw: _variant(
        'dtn-migrate-zstd', (COMPRESSION_FLAG, 'on'), (COMPRESSION_FLAG,),
        **kw),
    'dtn-migrate-zauto': lambda **kw: _variant(
        'dtn-migrate-zauto', (COMPRESSION_FLAG, 'auto'),
        (COMPRESSION_FLAG,), **kw),
    # Compression explicitly off (the default, named for the tables).
    'dtn-migrate-zoff': lambda **kw: _variant(
        'dtn-migrate-zoff', (COMPRESSION_FLAG, 'off'), (COMPRESSION_FLAG,),
        **kw),
    # Every object read and written through the page cache (no O_DIRECT).
    'dtn-migrate-buffered': lambda **kw: _variant(
        'dtn-migrate-buffered', ('--no-direct-io',), ('--no-direct-io',),
        **kw),
    # Zero extents off: every zero byte crosses the link (protocol 2).
    'dtn-migrate-nozero': lambda **kw: _variant(
        'dtn-migrate-nozero', (NO_ZERO_FLAG,), (NO_ZERO_FLAG,), **kw),
})
for _tool in ('dtn-migrate', 'dtn-migrate-hash', 'dtn-migrate-xxh3'):
    TOOLS[_tool] = _plain(_tool)
#: Targets of issue 13 (loopback, one big file, medians of one run).
TARGET_SPEED = 1.25          # dtn-migrate MB/s / gridftp MB/s >=
TARGET_CPU = 0.8             # dtn-migrate CPU-s/GiB / gridftp's <=
#: The GridFTPs the targets are read against, when they ran.
TARGET_REFERENCES = ('gridftp', 'gridftp-verify')


def make_peer(tool, **options):
    return TOOLS[tool](**options)


def children_cpu():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def server_cpu(proc):
    """CPU seconds of a running server's process tree (common.tree_cpu);
    None if there is none or it is gone.
    """
    return None if proc is None else common.tree_cpu(proc.pid)


def timed_run(peer, ds, lab=None):
    """Run ``peer`` once; return {'client': CPU-s, 'server': CPU-s,
    'link': bytes on the veth (None on loopback)}, or None for the CPU
    figures when the server's could not be read (it was gone).
    """
    if isinstance(peer, peers.DtnMigrate):
        # Its sink restarts for every run: reap the old one first, so
        # that its CPU is not counted as this run's client's.
        peer.stop_server()
        stop, peer.stop_server = peer.stop_server, lambda: None
    else:
        stop = None
    before = children_cpu()
    server_before = server_cpu(peer.server) or 0.0
    link_before = linkstats.counters(lab)
    try:
        peer.run(ds.files, manifest=ds.manifest_path)
        client = children_cpu() - before
        server = server_cpu(peer.server)
        if getattr(peer, 'start_cpu', None) is not None:
            server_before = peer.start_cpu
        link = linkstats.delta(link_before, linkstats.counters(lab))
        return {'client': client,
                'server': None if server is None else server - server_before,
                'link': link}
    finally:
        if stop is not None:
            peer.stop_server = stop
            stop()


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        prog='python -m benchmarks.throughput',
        description=__doc__.split('\n')[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument('--links', default='loopback,1gbit,10gbit',
                    help="comma list: 'loopback' (127.0.0.1, no "
                    "namespaces), 'veth' (namespaces, no rate limit) or a "
                    "tc rate such as '1gbit', '10gbit'")
    ap.add_argument('--workloads', default='big,small',
                    help='comma list of big, small')
    ap.add_argument('--tools', default=DEFAULT_TOOLS,
                    help='comma list of: ' + ', '.join(TOOLS))
    ap.add_argument('--reps', type=int, default=5,
                    help='interleaved repetitions (the tool order rotates '
                    'every repetition)')
    ap.add_argument('--size-big', default='4G')
    ap.add_argument('--small-count', type=int, default=1000)
    ap.add_argument('--small-size', default='1M')
    ap.add_argument('--data-dir', default=workloads.DEFAULT_DATA_DIR,
                    help='where datasets are generated and reused (tmpfs '
                    'by default so the disk is not measured)')
    ap.add_argument('--dst-dir', default='/dev/shm/dtnm-bench/dst',
                    help='destination root; each tool gets a subdirectory, '
                    'emptied before and after every run')
    ap.add_argument('--remove-data', action='store_true',
                    help='delete the datasets at the end (default: keep '
                    'them for the next run)')
    ap.add_argument('--out', default=report.default_out('throughput'))
    ap.add_argument('--render', action='store_true',
                    help="only write the tables and plots again from "
                    "--out's results.json (no measurement)")
    ap.add_argument('--mtu', type=int, default=1500)
    ap.add_argument('--warm', default='off',
                    help="'auto' = before every timed run, write and delete "
                    "a ballast as large as the dataset in the destination "
                    "file system (see README: VM page reporting); 'off'; "
                    "or a size such as 2G")
    ap.add_argument('--warmup', type=int, default=1,
                    help='untimed rounds before the repetitions of each '
                    'link and workload: every tool runs once per round, '
                    'and nothing of it is recorded (the first run on a '
                    'fresh machine pays its first touch of the memory it '
                    'writes, and would charge it to the first tool alone)')
    ap.add_argument('--streams', type=int, default=None,
                    help='dtn-migrate --streams')
    ap.add_argument('--object-size', default=None,
                    help='dtn-migrate --object-size (bytes, or 4M etc.)')
    ap.add_argument('--gridftp-parallel', type=int, default=4)
    ap.add_argument('--gridftp-cc', type=int, default=1)
    ap.add_argument('--xrdcp-streams', type=int, default=1)
    ap.add_argument('--xrdcp-parallel', type=int, default=4)
    ap.add_argument('--iperf3-streams', type=int, default=4)
    ap.add_argument('--timeout', type=float, default=None,
                    help='per-run client timeout in seconds (default: '
                    'max(300, bytes / 10 MB/s))')
    ap.add_argument('--smoke', action='store_true',
                    help='a quick check of the harness (< 1 min): '
                    + ' '.join(SMOKE_ARGS) + '; --out defaults to '
                    + report.default_out('throughput', smoke=True))
    args = ap.parse_args(argv)
    if args.smoke:
        out = args.out
        args = ap.parse_args(SMOKE_ARGS + list(
            argv if argv is not None else sys.argv[1:]))
        if out == ap.get_default('out'):
            args.out = report.default_out('throughput', smoke=True)
    return args


#: What --smoke puts before the command line (options given win).
SMOKE_ARGS = ['--links', 'loopback,1gbit', '--workloads', 'big', '--tools',
              'dtn-migrate,dtn-migrate-xxh3,gridftp', '--size-big', '128M',
              '--reps', '2', '--warmup', '0', '--timeout', '120']


def link_rate(link):
    """Line rate in MB/s of a link name, or None."""
    if link in ('loopback', 'veth', 'unlimited'):
        return None
    return netns.parse_rate(link) / 8 / 1e6


def make_lab(link, mtu):
    if link == 'loopback':
        return None
    rate = None if link in ('veth', 'unlimited') else link
    netns.parse_rate(rate or 1)  # validate early
    return netns.Lab(rate=rate, mtu=mtu).start()


def peer_options(args, tool):
    common = {'timeout': args.timeout}
    if tool.startswith('gridftp'):
        return dict(common, parallel=args.gridftp_parallel,
                    concurrency=args.gridftp_cc)
    if tool == 'xrdcp':
        return dict(common, streams=args.xrdcp_streams,
                    parallel=args.xrdcp_parallel)
    if tool == 'iperf3':
        return dict(common, streams=args.iperf3_streams)
    if tool.startswith('dtn-migrate'):
        osz = (workloads.parse_size(args.object_size)
               if args.object_size else None)
        return dict(common, streams=args.streams, object_size=osz)
    return common


def warm_bytes(args, ds):
    if args.warm in ('off', '0', 'no', 'none'):
        return 0
    if args.warm == 'auto':
        return ds.total_bytes + 64 * workloads.MiB
    return workloads.parse_size(args.warm)


def summarize(results, links, wls, tools):
    summary, ratios = [], []
    for link in links:
        rate = link_rate(link)
        for wl in wls:
            med = {}
            for tool in tools:
                ss = [s for s in results['samples'] if s['link'] == link
                      and s['workload'] == wl and s['tool'] == tool]
                if not ss:
                    continue
                mbps = report.summarize([s['MBps'] for s in ss])
                secs = report.summarize([s['seconds'] for s in ss])
                cpus = [s['cpu_s_per_GiB'] for s in ss
                        if s.get('cpu_s_per_GiB') is not None]
                cpu = report.summarize(cpus) if cpus else None
                wire = [s.get('link_bytes') for s in ss
                        if s.get('link_bytes') is not None]
                wire = report.summarize(wire) if wire else None
                alloc = [s.get('dst_allocated_bytes') for s in ss
                         if s.get('dst_allocated_bytes') is not None]
                med[tool] = mbps['median']
                if cpu:
                    med[tool, 'cpu'] = cpu['median']
                net = ss[0].get('uses_network', True)
                summary.append({
                    'link': link, 'workload': wl, 'tool': tool,
                    'n': mbps['n'], 'MBps': mbps, 'seconds': secs,
                    'cpu_s_per_GiB': cpu,
                    'cpu_client_s': report.summarize(
                        [s.get('cpu_client_s') for s in ss]),
                    'cpu_server_s': report.summarize(
                        [s.get('cpu_server_s') for s in ss]),
                    'link_bytes': wire,
                    'dataset_bytes': ss[0]['bytes'],
                    'dst_allocated_bytes': (report.summarize(alloc)
                                            if alloc else None),
                    'line_rate_MBps': rate,
                    'fraction_of_line': (report.ratio(mbps['median'], rate)
                                         if net else None)})
            for tool in tools:
                if not tool.startswith('dtn-migrate') or tool not in med:
                    continue
                row = {'link': link, 'workload': wl, 'tool': tool,
                       'per_rep': {}}
                for ref in REFERENCES:
                    if ref == tool:
                        continue
                    key = '%s/%s' % (tool, ref)
                    row[key] = report.ratio(med[tool], med.get(ref))
                    row['per_rep'][key] = rep_ratios(
                        results, link, wl, tool, ref, 'MBps')
                    if med.get((ref, 'cpu')):
                        key = '%s CPU/%s CPU' % (tool, ref)
                        row[key] = report.ratio(
                            med.get((tool, 'cpu')), med[ref, 'cpu'])
                        row['per_rep'][key] = rep_ratios(
                            results, link, wl, tool, ref, 'cpu_s_per_GiB')
                row['%s/line' % tool] = report.ratio(med[tool], rate)
                ratios.append(row)
    results['summary'] = summary
    results['ratios'] = ratios
    results['targets'] = targets(results)
    return results


def rep_ratios(results, link, wl, tool, ref, field):
    """TOOL's FIELD over REF's, repetition by repetition (the tools run
    interleaved, so repetition r of each ran in the same minute); None
    where either has no value.
    """
    by_rep = {}
    for s in results['samples']:
        if s['link'] == link and s['workload'] == wl and \
                s['tool'] in (tool, ref):
            by_rep.setdefault(s.get('rep'), {})[s['tool']] = s.get(field)
    return [report.ratio(got.get(tool), got.get(ref))
            for rep, got in sorted(by_rep.items(),
                                   key=lambda kv: (kv[0] is None, kv[0]))]


def targets(results):
    """Issue 13's throughput targets, against GridFTP in the same run:
    MB/s >= 1.25 x and CPU-s/GiB <= 0.8 x, for every dtn-migrate tool
    and every (link, workload) that has both.  '_met' reads the ratio of
    the medians; '_reps' holds the ratios repetition by repetition, and
    '_verdict' says how many of them meet the target.  One row per
    GridFTP that ran: plain (``gridftp``, which verifies nothing) and in
    its verified mode (``gridftp-verify``).
    """
    out = []

    def faster(v):
        return v >= TARGET_SPEED

    def leaner(v):
        return v <= TARGET_CPU

    for r in results.get('ratios', []):
        tool = r['tool']
        per_rep = r.get('per_rep') or {}
        for ref in TARGET_REFERENCES:
            skey, ckey = '%s/%s' % (tool, ref), '%s CPU/%s CPU' % (tool, ref)
            speed, cpu = r.get(skey), r.get(ckey)
            if speed is None and cpu is None:
                continue
            sreps, creps = per_rep.get(skey, []), per_rep.get(ckey, [])
            out.append({
                'link': r['link'], 'workload': r['workload'], 'tool': tool,
                'reference': ref,
                'speed_ratio': speed, 'speed_target': TARGET_SPEED,
                'speed_met': None if speed is None else faster(speed),
                'speed_reps': sreps,
                'speed_verdict': report.verdict(speed, sreps, faster),
                'cpu_ratio': cpu, 'cpu_target': TARGET_CPU,
                'cpu_met': None if cpu is None else leaner(cpu),
                'cpu_reps': creps,
                'cpu_verdict': report.verdict(cpu, creps, leaner)})
    return out


def _verdict(value, reps, verdict):
    """'1.74 (1.63–1.88): met, 5 of 5 repetitions' for a table cell."""
    if value is None:
        return '–'
    return '%s: %s' % (report.fmt_spread(value, reps), verdict)


def _mb(s):
    """'median (min–max)' in MB of a summarize() dict of bytes."""
    if not s or s.get('median') is None:
        return '–'
    return report.fmt_range({k: (v / 1e6 if isinstance(v, (int, float))
                                 and k != 'n' else v)
                             for k, v in s.items()})


def tables(results, wl_titles):
    headers = ['link', 'workload', 'tool', 'MB/s median (min–max)',
               'seconds (median)', 'of line rate',
               'CPU-s/GiB median (min–max)', 'MB on link', 'n']
    rows = []
    for s in results['summary']:
        rows.append([s['link'], wl_titles.get(s['workload'], s['workload']),
                     s['tool'], report.fmt_range(s['MBps']),
                     report.fmt(s['seconds']['median'], 2),
                     report.fmt_pct(s['fraction_of_line']),
                     report.fmt_range(s.get('cpu_s_per_GiB'), 2),
                     _mb(s.get('link_bytes')), s['n']])
    rheaders = ['link', 'workload', 'ratio', 'value']
    rrows = []
    for r in results['ratios']:
        for key, val in r.items():
            if '/' in key and val is not None:
                rrows.append([r['link'],
                              wl_titles.get(r['workload'], r['workload']),
                              key, '%.2f' % val])
    return headers, rows, rheaders, rrows


def target_table(results, wl_titles):
    headers = ['link', 'workload', 'tool', 'against',
               'MB/s ratio (target ≥ %.2f)' % TARGET_SPEED,
               'CPU-s/GiB ratio (target ≤ %.2f)' % TARGET_CPU]
    rows = [[t['link'], wl_titles.get(t['workload'], t['workload']),
             t['tool'], t['reference'],
             _verdict(t['speed_ratio'], t.get('speed_reps'),
                      t.get('speed_verdict')),
             _verdict(t['cpu_ratio'], t.get('cpu_reps'),
                      t.get('cpu_verdict'))]
            for t in results.get('targets', [])]
    return headers, rows


#: The targets' table: per cell the ratio of the medians, its range over
#: the repetitions (repetition r of each tool against repetition r of the
#: other) and how many repetitions meet the target.
TARGETS_TITLE = 'Targets (issue 13, ratios of the same run by repetition)'


def write_outputs(results, args, links, wls, tools, wl_titles, final=True,
                  extras=(), redo=None):
    """Save ``--out``'s results.json; once the run is over (``final``),
    the tables and figures drawn from it, and each of ``extras``
    ((what, function of results and --out) pairs: the tables and figures
    of a benchmark that runs this one, whose command that draws them
    again is ``redo``).  0, or report.RENDER_FAILED when one of them
    could not be written (the results are safe).
    """
    out = args.out
    os.makedirs(out, exist_ok=True)
    summarize(results, links, wls, tools)
    path = os.path.join(out, 'results.json')
    report.write_json(path, results)
    if not final:
        return 0

    def tables():
        write_tables(results, args, wl_titles)

    def figures():
        results['figures'] = write_figures(results, args, links, wls, tools,
                                           wl_titles)
        report.write_json(path, results)
    steps = [tables, figures] + [
        (what, functools.partial(extra, results, out))
        for what, extra in extras]
    return report.render(
        path, redo or 'python -m benchmarks.throughput --render --out %s'
        % out, *steps)


def write_tables(results, args, wl_titles):
    """table.md and table.rst of --out; the tables to stdout too."""
    out = args.out
    headers, rows, rh, rr = tables(results, wl_titles)
    th, tr = target_table(results, wl_titles)
    settings = '\n'.join('* ``%s``: %s' % (t, d)
                         for t, d in results['settings']['tools'].items())
    title = getattr(args, 'title', None) or 'Throughput'
    md = ['# %s (MB/s = 10^6 bytes/s)' % title, '',
          'Command: `%s`' % results['command'], '',
          report.markdown_table(headers, rows, align='lllrrrrrr'), '',
          '## Ratios (medians of the same run)', '',
          report.markdown_table(rh, rr, align='lllr') if rr else '(none)\n',
          '']
    if tr:
        md += ['## ' + TARGETS_TITLE, '',
               report.markdown_table(th, tr, align='llllrr'), '']
    md += ['## Tool settings', '', settings.replace('``', '`'), '']
    report.write_text(os.path.join(out, 'table.md'), '\n'.join(md))
    head = '%s (MB/s = 10\\ :sup:`6` bytes/s)' % title
    rst = [head, '=' * len(head), '',
           'Command::', '', '    ' + results['command'], '',
           report.rst_table(headers, rows), '',
           report.rst_table(rh, rr, title='Ratios (medians of the same run)')
           if rr else '', '']
    if tr:
        rst += [report.rst_table(
            th, tr, title=TARGETS_TITLE), '']
    rst += ['Tool settings', '~' * 13, '', settings, '']
    report.write_text(os.path.join(out, 'table.rst'), '\n'.join(rst))
    print()
    print(report.text_table(headers, rows))
    if rr:
        print(report.text_table(rh, rr))
    if tr:
        print(report.text_table(th, tr))


def write_figures(results, args, links, wls, tools, wl_titles):
    """throughput-WORKLOAD.png and cpu-WORKLOAD.png in --out: paths."""
    out = args.out
    figures = []
    reps = results['settings'].get('reps', args.reps)
    for wl in wls:
        values, cpu = {}, {}
        for s in results['summary']:
            if s['workload'] == wl:
                values.setdefault(s['tool'], {})[s['link']] = s['MBps']
                if s.get('cpu_s_per_GiB'):
                    cpu.setdefault(s['tool'], {})[s['link']] = \
                        s['cpu_s_per_GiB']
        if not values:
            continue
        hlines = {link: (link_rate(link),
                         'line rate %.0f MB/s' % link_rate(link))
                  for link in links if link_rate(link)}
        path = os.path.join(out, 'throughput-%s.png' % wl)
        report.grouped_bars(
            path, links, [t for t in tools if t in values], values,
            ylabel='throughput (MB/s)', xlabel='link',
            title='%s (median, bars: min–max, %d rep%s)' % (
                wl_titles.get(wl, wl), reps,
                '' if reps == 1 else 's'), hlines=hlines)
        figures.append(path)
        if cpu:
            path = os.path.join(out, 'cpu-%s.png' % wl)
            report.grouped_bars(
                path, links, [t for t in tools if t in cpu], cpu,
                ylabel='CPU-s per GiB (both ends)', xlabel='link',
                title='%s: CPU seconds per GiB, client + server '
                '(median, bars: min–max)' % wl_titles.get(wl, wl),
                digits=2)
            figures.append(path)
    return figures


def render(args, extras=(), redo=None):
    """Tables, ratios and plots again from ``--out``'s results.json
    (after a change to the reporting; nothing is measured): 0, or
    report.RENDER_FAILED.
    """
    with open(os.path.join(args.out, 'results.json')) as f:
        results = json.load(f)
    st = results['settings']
    args.reps = st['reps']
    tools = list(st['tools'])
    wl_titles = st.get('wl_titles') or {
        'big': '1 x %s' % workloads.format_size(st['size_big']),
        'small': '%d x %s' % (st['small_count'],
                              workloads.format_size(st['small_size']))}
    args.title = st.get('title')
    results['samples'] = [checked_cpu(x) for x in results['samples']]
    return write_outputs(results, args, st['links'], st['workloads'], tools,
                         wl_titles, extras=extras, redo=redo)


def main(argv=None):
    args = parse_args(argv)
    if args.render:
        return render(args)
    wls = [x for x in args.workloads.split(',') if x]
    size_big = workloads.parse_size(args.size_big)
    small_size = workloads.parse_size(args.small_size)
    datasets = {wl: workloads.Dataset(wl, args.data_dir, size_big,
                                      args.small_count, small_size)
                for wl in wls}
    wl_titles = {
        'big': '1 x %s' % workloads.format_size(size_big),
        'small': '%d x %s' % (args.small_count,
                              workloads.format_size(small_size))}
    return measure(args, datasets, wl_titles, {
        'size_big': size_big, 'small_count': args.small_count,
        'small_size': small_size})


class DestinationBusy(Exception):
    pass


_held = []


def hold_destination(dst_dir):
    """Hold ``<dst_dir>.lock`` (the engine's FileLock) for the rest of
    this process.  Every tool's destination is emptied before and after
    each of its runs, so two runs on one destination root would delete
    each other's copies and report tool failures; the second one is
    refused instead.  Raises DestinationBusy, naming the process that
    holds it.
    """
    path = os.path.abspath(dst_dir)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    lock = engine_lock.FileLock(path, owner='pid %d' % os.getpid())
    if not lock.acquire():
        raise DestinationBusy(
            'another benchmark run (%s) is using the destination %s; '
            'wait for it to end, or give this one another --dst-dir'
            % (lock.holder(), dst_dir))
    _held.append(lock)
    return lock


def measure(args, datasets, wl_titles, settings=None, extras=(),
            redo=None):
    """Run every (link, workload, tool, repetition) of ``args`` over
    ``datasets`` ({workload: object with ensure(), root, files,
    total_bytes, manifest_path, name, timings, remove()}), write the
    outputs to ``args.out`` (and ``extras``, see write_outputs); exit
    status: 1 when a run failed, else that of write_outputs.  Used by
    this module's main and by benchmarks.sparse and
    benchmarks.compressible.
    """
    report.require_plotting()
    links = [x for x in args.links.split(',') if x]
    wls = list(datasets)
    tools = [x for x in args.tools.split(',') if x]
    for t in tools:
        if t not in TOOLS:
            sys.exit('unknown tool %r; known: %s' % (
                t, ', '.join(TOOLS)))
    cmd = report.command_line()
    print('command:', cmd, flush=True)
    try:
        hold_destination(args.dst_dir)
    except DestinationBusy as exc:
        sys.exit(str(exc))

    common.exit_on_signals()

    if any(link != 'loopback' for link in links):
        ok, why = netns.available()
        if not ok:
            sys.exit('network namespaces unavailable: %s' % why)
        stale = netns.cleanup_stale()
        if stale:
            print('removed stale namespaces:', ', '.join(stale))

    missing = peers.missing_tools(tools)
    if missing:
        print('missing executables: %s\ninstall with: %s' % (
            ', '.join('%s (%s)' % m for m in missing), peers.apt_hint()))

    results = {
        'command': cmd, 'machine': report.machine_info(),
        'settings': dict({
            'links': links, 'workloads': wls, 'tools': {}, 'reps': args.reps,
            'mtu': args.mtu, 'warm': args.warm, 'warmup': args.warmup,
            'data_dir': args.data_dir, 'dst_dir': args.dst_dir,
            'wl_titles': wl_titles,
            'title': getattr(args, 'title', None),
            'tbf_burst': {link: netns.tbf_burst(link, args.mtu)
                          for link in links if link_rate(link)},
            'tbf_latency': netns.TBF_LATENCY}, **(settings or {})),
        'versions': {
            'iperf3': report.tool_version(['iperf3', '--version']),
            'globus-url-copy': report.tool_version(['globus-url-copy',
                                                    '-version']),
            'rsync': report.tool_version(['rsync', '--version']),
            'xrdcp': report.tool_version(['xrdcp', '--version'])},
        'datasets': {}, 'samples': [], 'failures': [], 'skipped': {}}

    created_dst_root = not os.path.exists(args.dst_dir)
    os.makedirs(args.dst_dir, exist_ok=True)
    try:
        for wl, ds in datasets.items():
            ds.ensure()
            results['datasets'][wl] = dict({
                'name': ds.name, 'root': ds.root, 'files': len(ds.files),
                'bytes': ds.total_bytes, 'manifest': ds.manifest_path,
                'timings': ds.timings}, **getattr(ds, 'info', {}))
        for link in links:
            lab = make_lab(link, args.mtu)
            try:
                for wl in wls:
                    run_block(args, results, lab, link, wl, datasets[wl],
                              tools)
                    write_outputs(results, args, links, wls, tools,
                                  wl_titles, final=False)
            finally:
                if lab:
                    lab.close()
    finally:
        if created_dst_root:
            shutil.rmtree(args.dst_dir, ignore_errors=True)
        if args.remove_data:
            for ds in datasets.values():
                ds.remove()
    rc = write_outputs(results, args, links, wls, tools, wl_titles,
                       extras=extras, redo=redo)
    for f in results['failures']:
        print('FAILED %(link)s %(workload)s %(tool)s rep %(rep)d: %(error)s'
              % f)
    for t, why in results['skipped'].items():
        print('SKIPPED %s: %s' % (t, why))
    print('outputs in %s: results.json table.md table.rst %s' % (
        args.out, ' '.join(os.path.basename(p)
                           for p in results.get('figures', []))))
    print('command:', cmd)
    if not args.remove_data:
        print('datasets kept for reuse in %s (python -m benchmarks.workloads '
              '--remove ... or rm -r it to free the memory)' % args.data_dir)
    return 1 if results['failures'] else rc


def make_sample(peer, got, **where):
    """One sample: the peer's last run, its CPU seconds (client, server,
    their sum) per run and per GiB, and the bytes on the link.
    """
    nbytes = peer.last['bytes']
    cpu = None
    if got['server'] is not None:
        cpu = got['client'] + got['server']
    link = got.get('link')

    def per_gib(x):
        return None if x is None else x * GiB / nbytes if nbytes else None
    return checked_cpu(dict(
        peer.last, time=time.time(), cpu_s=cpu,
        cpu_client_s=got['client'], cpu_server_s=got['server'],
        cpu_s_per_GiB=per_gib(cpu),
        link_bytes=link['total'] if link else None,
        link_bytes_a_to_b=link['a_to_b'] if link else None,
        link=where.pop('link'), **where))


def checked_cpu(sample):
    """``sample`` without CPU figures if its server's were not captured:
    a server that received the bytes cannot have used no CPU at all (a
    GridFTP session whose process left the server's tree unreaped reads
    0.0).  Such a sample says so in ``cpu_note``.
    """
    if sample.get('bytes') and sample.get('cpu_server_s') is not None \
            and sample['cpu_server_s'] <= 0:
        sample = dict(sample, cpu_s=None, cpu_server_s=None,
                      cpu_s_per_GiB=None,
                      cpu_note='server CPU not captured (read %s)'
                      % sample['cpu_server_s'])
    return sample


def print_sample(sample):
    cpu = sample.get('cpu_s_per_GiB')
    print('%-9s %-6s rep %d  %-18s %8.2f s %9.1f MB/s %s%s' % (
        sample['link'], sample['workload'], sample['rep'], sample['tool'],
        sample['seconds'], sample['MBps'],
        '' if cpu is None else '%6.2f CPU-s/GiB' % cpu,
        '' if sample.get('link_bytes') is None else
        ' %10.1f MB on link' % (sample['link_bytes'] / 1e6)), flush=True)


def warm_up(rounds, active, names, lab, link, wl, ds):
    """``rounds`` untimed runs of every tool, recorded nowhere: a failure
    here is printed, and the repetitions that count find it again.
    """
    for n in range(rounds):
        for tool in names:
            try:
                timed_run(active[tool], ds, lab)
            except peers.PeerError as exc:
                print('warm-up %d %s %s %s failed: %s' % (
                    n + 1, link, wl, tool, str(exc)[:500]), flush=True)
            else:
                print('warm-up %d %s %s %s done' % (n + 1, link, wl, tool),
                      flush=True)


def run_block(args, results, lab, link, wl, ds, tools):
    """All reps of all tools for one (link, workload), interleaved."""
    active = {}
    try:
        for tool in tools:
            if tool in results['skipped']:
                continue
            peer = make_peer(tool, **peer_options(args, tool))
            peer.warm_bytes = warm_bytes(args, ds)
            try:
                peer.setup(lab, ds.root, os.path.join(args.dst_dir, tool))
            except peers.PeerUnavailable as exc:
                results['skipped'][tool] = str(exc)
                print('SKIP %s: %s' % (tool, exc), flush=True)
                continue
            except peers.PeerError as exc:
                results['failures'].append({'link': link, 'workload': wl,
                                            'tool': tool, 'rep': -1,
                                            'error': 'setup: %s' % exc})
                print('FAIL setup %s: %s' % (tool, exc), flush=True)
                continue
            active[tool] = peer
            results['settings']['tools'][tool] = peer.describe()
        names = [t for t in tools if t in active]
        warm_up(args.warmup, active, names, lab, link, wl, ds)
        for rep in range(args.reps):
            k = rep % max(1, len(names))
            order = names[k:] + names[:k]
            for pos, tool in enumerate(order):
                peer = active[tool]
                try:
                    got = timed_run(peer, ds, lab)
                except peers.PeerError as exc:
                    results['failures'].append({
                        'link': link, 'workload': wl, 'tool': tool,
                        'rep': rep, 'error': str(exc)[:4000]})
                    print('FAIL %s %s %s rep %d: %s' % (
                        link, wl, tool, rep, str(exc)[:500]), flush=True)
                    continue
                results['samples'].append(make_sample(
                    peer, got, link=link, workload=wl, rep=rep,
                    position=pos))
                print_sample(results['samples'][-1])
    finally:
        for peer in active.values():
            peer.teardown()


if __name__ == '__main__':
    sys.exit(main())
