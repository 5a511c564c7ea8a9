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
        --size-big 4G --small-count 1000 \\
        --out doc/source/benchmarks/throughput

Every sample also carries the CPU seconds the tool's client and server
processes used (``cpu_s``, and ``cpu_s_per_GiB``), so that the cost of
dtn-migrate's frame authentication can be read against the same run::

    .venv/bin/python -m benchmarks.throughput --links loopback,10gbit \\
        --workloads big --size-big 4G --reps 5 \\
        --tools dtn-migrate,dtn-migrate-noauth,dtn-migrate-tls \\
        --out doc/source/benchmarks/frame-auth

``dtn-migrate`` tags every frame and object (the default),
``dtn-migrate-noauth`` runs both ends with ``--no-frame-auth``, and
``dtn-migrate-tls`` adds TLS (certificates made for the run) on top of
the tags, for reference.

See benchmarks/README.md for what each number means.
"""

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(_HERE)
if _REPO not in sys.path:
    sys.path.insert(0, _REPO)

from benchmarks import peers, report, workloads  # noqa: E402
from tests.functional import netns  # noqa: E402

DEFAULT_TOOLS = 'dtn-migrate,iperf3,gridftp,rsync,xrdcp'
REFERENCES = ('gridftp', 'iperf3', 'dtn-migrate-noauth')
GiB = 1 << 30


class DtnMigrateVariant(peers.DtnMigrate):
    """dtn-migrate with extra arguments for its sink as well."""

    def __init__(self, name, sink_args=(), tls=False, **kw):
        super().__init__(name=name, **kw)
        self.sink_args = list(sink_args)
        self.tls = tls

    def start_server(self):
        super().start_server()
        if self.tls:
            ca, cert, key = make_certs(self.workdir, 'sink')
            self.sink_args += ['--tls-cert', cert, '--tls-key', key]
            self.extra_args += ['--tls-ca', ca, '--server-name', 'sink']

    def spawn_server(self, argv, *args, **kw):
        return super().spawn_server(list(argv) + self.sink_args, *args,
                                    **kw)


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


TOOLS = dict(peers.PEERS, **{
    # Frame authentication off at both ends (a trusted link).
    'dtn-migrate-noauth': lambda **kw: DtnMigrateVariant(
        'dtn-migrate-noauth', sink_args=('--no-frame-auth',),
        extra_args=('--no-frame-auth',), **kw),
    # TLS as well as frame authentication, for reference.
    'dtn-migrate-tls': lambda **kw: DtnMigrateVariant(
        'dtn-migrate-tls', tls=True, **kw),
})


def make_peer(tool, **options):
    return TOOLS[tool](**options)


def children_cpu():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _proc_stats():
    """{pid: (ppid, CPU ticks of it and of its reaped children)}."""
    stats = {}
    for name in os.listdir('/proc'):
        if not name.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % name) as f:
                fields = f.read().rsplit(')', 1)[1].split()
        except OSError:
            continue
        # After "pid (comm)": state, ppid, ..., utime, stime, cutime,
        # cstime are fields 2, 12, 13, 14, 15 (1-based).
        stats[int(name)] = (int(fields[1]),
                            sum(int(x) for x in fields[11:15]))
    return stats


def process_cpu(proc):
    """CPU seconds of a running server: its process, every live process
    below it (a GridFTP server forks one per session, a netns wrapper
    execs the server below it) and the children they reaped; None if the
    server is gone.
    """
    if proc is None:
        return None
    stats = _proc_stats()
    if proc.pid not in stats:
        return None
    tree, ticks = {proc.pid}, 0
    grew = True
    while grew:
        grew = False
        for pid, (ppid, _) in stats.items():
            if ppid in tree and pid not in tree:
                tree.add(pid)
                grew = True
    ticks = sum(stats[pid][1] for pid in tree)
    return ticks / os.sysconf('SC_CLK_TCK')


def timed_run(peer, ds):
    """Run ``peer`` once; return the CPU seconds its client and server
    used (the server's by /proc, read before it stops).
    """
    if isinstance(peer, peers.DtnMigrate):
        # Its sink restarts for every run: reap the old one first, so
        # that its CPU is not counted as this run's client's.
        peer.stop_server()
        stop, peer.stop_server = peer.stop_server, lambda: None
    else:
        stop = None
    before = children_cpu()
    server_before = process_cpu(peer.server) or 0.0
    try:
        peer.run(ds.files, manifest=ds.manifest_path)
        client = children_cpu() - before
        server = process_cpu(peer.server)
        if server is None:
            return None
        return client + server - server_before
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
    ap.add_argument('--reps', type=int, default=3)
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
    ap.add_argument('--out', default='doc/source/benchmarks/throughput')
    ap.add_argument('--render', action='store_true',
                    help="only write the tables and plots again from "
                    "--out's results.json (no measurement)")
    ap.add_argument('--mtu', type=int, default=1500)
    ap.add_argument('--warm', default='off',
                    help="'auto' = before every timed run, write and delete "
                    "a ballast as large as the dataset in the destination "
                    "file system (see README: VM page reporting); 'off'; "
                    "or a size such as 2G")
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
    return ap.parse_args(argv)


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
    if tool == 'gridftp':
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
                med[tool] = mbps['median']
                if cpu:
                    med[tool, 'cpu'] = cpu['median']
                net = ss[0].get('uses_network', True)
                summary.append({
                    'link': link, 'workload': wl, 'tool': tool,
                    'n': mbps['n'], 'MBps': mbps, 'seconds': secs,
                    'cpu_s_per_GiB': cpu,
                    'line_rate_MBps': rate,
                    'fraction_of_line': (report.ratio(mbps['median'], rate)
                                         if net else None)})
            for tool in tools:
                if not tool.startswith('dtn-migrate') or tool not in med:
                    continue
                row = {'link': link, 'workload': wl, 'tool': tool}
                for ref in REFERENCES:
                    if ref == tool:
                        continue
                    row['%s/%s' % (tool, ref)] = report.ratio(
                        med[tool], med.get(ref))
                    if med.get((ref, 'cpu')):
                        row['%s CPU/%s CPU' % (tool, ref)] = report.ratio(
                            med.get((tool, 'cpu')), med[ref, 'cpu'])
                row['%s/line' % tool] = report.ratio(med[tool], rate)
                ratios.append(row)
    results['summary'] = summary
    results['ratios'] = ratios
    return results


def tables(results, wl_titles):
    headers = ['link', 'workload', 'tool', 'MB/s median (min–max)',
               'seconds (median)', 'of line rate', 'CPU-s/GiB', 'n']
    rows = []
    for s in results['summary']:
        cpu = s.get('cpu_s_per_GiB')
        rows.append([s['link'], wl_titles.get(s['workload'], s['workload']),
                     s['tool'], report.fmt_range(s['MBps']),
                     report.fmt(s['seconds']['median'], 2),
                     report.fmt_pct(s['fraction_of_line']),
                     report.fmt(cpu['median'], 2) if cpu else '–', s['n']])
    rheaders = ['link', 'workload', 'ratio', 'value']
    rrows = []
    for r in results['ratios']:
        for key, val in r.items():
            if '/' in key and val is not None:
                rrows.append([r['link'],
                              wl_titles.get(r['workload'], r['workload']),
                              key, '%.2f' % val])
    return headers, rows, rheaders, rrows


def write_outputs(results, args, links, wls, tools, wl_titles, final=True):
    out = args.out
    os.makedirs(out, exist_ok=True)
    summarize(results, links, wls, tools)
    report.write_json(os.path.join(out, 'results.json'), results)
    if not final:
        return None
    headers, rows, rh, rr = tables(results, wl_titles)
    settings = '\n'.join('* ``%s``: %s' % (t, d)
                         for t, d in results['settings']['tools'].items())
    md = ['# Throughput (MB/s = 10^6 bytes/s)', '',
          'Command: `%s`' % results['command'], '',
          report.markdown_table(headers, rows, align='lllrrrrr'), '',
          '## Ratios (medians of the same run)', '',
          report.markdown_table(rh, rr, align='lllr') if rr else '(none)\n',
          '',
          '## Tool settings', '', settings.replace('``', '`'), '']
    report.write_text(os.path.join(out, 'table.md'), '\n'.join(md))
    rst = ['Throughput (MB/s = 10\\ :sup:`6` bytes/s)', '=' * 44, '',
           'Command::', '', '    ' + results['command'], '',
           report.rst_table(headers, rows), '',
           report.rst_table(rh, rr, title='Ratios (medians of the same run)')
           if rr else '', '', 'Tool settings', '~' * 13, '', settings, '']
    report.write_text(os.path.join(out, 'table.rst'), '\n'.join(rst))
    figures = []
    for wl in wls:
        values = {}
        for s in results['summary']:
            if s['workload'] == wl:
                values.setdefault(s['tool'], {})[s['link']] = s['MBps']
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
                wl_titles.get(wl, wl), args.reps,
                '' if args.reps == 1 else 's'), hlines=hlines)
        figures.append(path)
    results['figures'] = figures
    report.write_json(os.path.join(out, 'results.json'), results)
    return (report.text_table(headers, rows),
            report.text_table(rh, rr) if rr else '')


def render(args):
    """Tables, ratios and plots again from ``--out``'s results.json
    (after a change to the reporting; nothing is measured).
    """
    with open(os.path.join(args.out, 'results.json')) as f:
        results = json.load(f)
    st = results['settings']
    args.reps = st['reps']
    tools = list(st['tools'])
    wl_titles = {
        'big': '1 x %s' % workloads.format_size(st['size_big']),
        'small': '%d x %s' % (st['small_count'],
                              workloads.format_size(st['small_size']))}
    table, rtable = write_outputs(results, args, st['links'],
                                  st['workloads'], tools, wl_titles)
    print(table)
    print(rtable)


def main(argv=None):
    args = parse_args(argv)
    if args.render:
        return render(args)
    links = [x for x in args.links.split(',') if x]
    wls = [x for x in args.workloads.split(',') if x]
    tools = [x for x in args.tools.split(',') if x]
    for t in tools:
        if t not in TOOLS:
            sys.exit('unknown tool %r; known: %s' % (
                t, ', '.join(TOOLS)))
    cmd = report.command_line()
    print('command:', cmd, flush=True)

    def on_term(signum, frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, on_term)

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

    size_big = workloads.parse_size(args.size_big)
    small_size = workloads.parse_size(args.small_size)
    datasets = {wl: workloads.Dataset(wl, args.data_dir, size_big,
                                      args.small_count, small_size)
                for wl in wls}
    wl_titles = {
        'big': '1 x %s' % workloads.format_size(size_big),
        'small': '%d x %s' % (args.small_count,
                              workloads.format_size(small_size))}
    results = {
        'command': cmd, 'machine': report.machine_info(),
        'settings': {
            'links': links, 'workloads': wls, 'tools': {}, 'reps': args.reps,
            'size_big': size_big, 'small_count': args.small_count,
            'small_size': small_size, 'mtu': args.mtu, 'warm': args.warm,
            'data_dir': args.data_dir, 'dst_dir': args.dst_dir,
            'tbf_burst': {link: netns.tbf_burst(link, args.mtu)
                          for link in links if link_rate(link)},
            'tbf_latency': netns.TBF_LATENCY},
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
            results['datasets'][wl] = {
                'name': ds.name, 'root': ds.root, 'files': len(ds.files),
                'bytes': ds.total_bytes, 'manifest': ds.manifest_path,
                'timings': ds.timings}
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
    table, rtable = write_outputs(results, args, links, wls, tools, wl_titles)
    print()
    print(table)
    if rtable.strip():
        print(rtable)
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
    return 1 if results['failures'] else 0


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
        for rep in range(args.reps):
            k = rep % max(1, len(names))
            order = names[k:] + names[:k]
            for pos, tool in enumerate(order):
                peer = active[tool]
                try:
                    cpu = timed_run(peer, ds)
                except peers.PeerError as exc:
                    results['failures'].append({
                        'link': link, 'workload': wl, 'tool': tool,
                        'rep': rep, 'error': str(exc)[:4000]})
                    print('FAIL %s %s %s rep %d: %s' % (
                        link, wl, tool, rep, str(exc)[:500]), flush=True)
                    continue
                sample = dict(peer.last, link=link, workload=wl, rep=rep,
                              position=pos, time=time.time(), cpu_s=cpu,
                              cpu_s_per_GiB=(None if cpu is None else
                                             cpu * GiB / peer.last['bytes']))
                results['samples'].append(sample)
                print('%-9s %-6s rep %d  %-18s %8.2f s %9.1f MB/s %s' % (
                    link, wl, rep, tool, sample['seconds'], sample['MBps'],
                    '' if cpu is None else
                    '%6.2f CPU-s/GiB' % sample['cpu_s_per_GiB']), flush=True)
    finally:
        for peer in active.values():
            peer.teardown()


if __name__ == '__main__':
    sys.exit(main())
