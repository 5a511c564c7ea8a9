"""The benchmarks' reports: statistics, tables, figures, JSON.

Every benchmark reports through this module, so that all results look
alike, and in one order: the results JSON first, then the tables and
figures drawn from it (:func:`render`), so that a figure that cannot be
drawn loses no measurement::

    from benchmarks import report
    report.require_plotting()                   # before measuring
    s = report.summarize([1.0, 1.2, 0.9])       # median/min/max/mean/n
    report.write_json(path, {'command': report.command_line(), ...})
    rc = report.render(path, 'python -m benchmarks.X --from-json ' + path,
                       tables, figures)         # 0, or RENDER_FAILED
    report.write_tables(out + '/results', (['tool', 'MB/s'],
                                           [['x', '1.0']]))
    report.grouped_bars('fig.png', groups=['loopback', '1gbit'],
                        series=['gridftp', 'rsync'],
                        values={'gridftp': {'loopback': (900, 850, 950)}},
                        ylabel='throughput (MB/s)')

Units: MB/s means 10^6 bytes per second everywhere (not MiB/s).
"""

import datetime
import json
import math
import os
import platform
import shlex
import statistics
import subprocess
import sys
import traceback

MB = 1e6
#: Exit status of a benchmark whose results are saved but whose tables
#: or figures could not all be written (see :func:`render`).
RENDER_FAILED = 3
#: Where a benchmark writes its outputs unless --out says otherwise
#: (``OUT_ROOT/<benchmark>``; ``OUT_ROOT/smoke/<benchmark>`` with
#: --smoke): benchmarks/results/raw/ of this checkout, which git ignores.
#: The results kept in the tree (benchmarks/results/<benchmark>.json)
#: are reduced from one run's on purpose.
OUT_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        'results', 'raw')
#: How to get what the figures need.
PLOTTING_HINT = ("install the benchmarks' extra: .venv/bin/pip install -e "
                 "'.[benchmarks]' (or DTN_BENCH=1 tools/bootstrap.sh)")


# ------------------------------------------------------------------ numbers

def summarize(values):
    """{'n', 'median', 'min', 'max', 'mean', 'stdev', 'values'} of a list
    of numbers (None entries are ignored); all None when empty.
    """
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return {'n': 0, 'median': None, 'min': None, 'max': None,
                'mean': None, 'stdev': None, 'values': []}
    return {'n': len(vals), 'median': statistics.median(vals),
            'min': min(vals), 'max': max(vals),
            'mean': statistics.fmean(vals),
            'stdev': statistics.stdev(vals) if len(vals) > 1 else 0.0,
            'values': vals}


def ratio(a, b):
    """a / b, or None when either is missing or b is 0."""
    if a is None or b is None or b == 0:
        return None
    return a / b


def fmt(x, digits=1, none='–'):
    """Format a number for a table; None -> '–'."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return none
    if isinstance(x, str):
        return x
    return '%.*f' % (digits, x)


def fmt_range(s, digits=1):
    """'median (min–max)' from a summarize() dict."""
    if not s or s.get('median') is None:
        return '–'
    return fmt_spread(s['median'], (s['min'], s['max']) if s['n'] > 1
                      else (), digits)


def fmt_spread(value, values, digits=2):
    """'2.00 (1.95–2.25)': VALUE and the range of VALUES (None entries
    ignored; no range with fewer than two); '–' without a value.
    """
    if value is None:
        return '–'
    vals = [v for v in values or () if v is not None]
    if len(vals) < 2:
        return fmt(value, digits)
    return '%s (%s–%s)' % (fmt(value, digits), fmt(min(vals), digits),
                           fmt(max(vals), digits))


def verdict(median, values, ok):
    """Whether a target holds, read over every repetition as well as
    the median: 'met, 5 of 5 repetitions', 'met by the median only, 4 of
    5 repetitions', 'NOT met, 1 of 5 repetitions' (``ok(value)`` says
    whether one value meets the target; None values are not counted).
    A median that meets the target while a repetition misses it is a
    result that noise can flip, and says so.
    """
    if median is None:
        return 'not measured'
    vals = [v for v in values or () if v is not None]
    if not vals:
        return 'met' if ok(median) else 'NOT met'
    good = sum(1 for v in vals if ok(v))
    count = '%d of %d repetitions' % (good, len(vals))
    if not ok(median):
        return 'NOT met, ' + count
    if good == len(vals):
        return 'met, ' + count
    return 'met by the median only, ' + count


def fmt_pct(x, digits=0):
    return '–' if x is None else '%.*f %%' % (digits, 100.0 * x)


# ------------------------------------------------------------------ tables

def markdown_table(headers, rows, align=None):
    """GitHub-flavoured Markdown table.  ``align``: string of 'l'/'r'/'c'
    per column (default: first column left, others right).
    """
    headers = [str(h) for h in headers]
    rows = [[str(c) for c in r] for r in rows]
    align = align or 'l' + 'r' * (len(headers) - 1)
    widths = [max([len(h)] + [len(r[i]) for r in rows])
              for i, h in enumerate(headers)]

    def line(cells):
        out = []
        for c, w, a in zip(cells, widths, align):
            out.append(c.rjust(w) if a == 'r' else
                       c.center(w) if a == 'c' else c.ljust(w))
        return '| ' + ' | '.join(out) + ' |'
    sep = []
    for w, a in zip(widths, align):
        d = '-' * max(w, 3)
        sep.append(d[:-1] + ':' if a == 'r' else
                   ':' + d[1:-1] + ':' if a == 'c' else d)
    return '\n'.join([line(headers), '| ' + ' | '.join(sep) + ' |']
                     + [line(r) for r in rows]) + '\n'


def rst_table(headers, rows, title=None):
    """reStructuredText grid table (renders in Sphinx)."""
    headers = [str(h) for h in headers]
    rows = [[str(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows])
              for i, h in enumerate(headers)]

    def border(ch):
        return '+' + '+'.join(ch * (w + 2) for w in widths) + '+'

    def line(cells):
        return '|' + '|'.join(' ' + c.ljust(w) + ' '
                              for c, w in zip(cells, widths)) + '|'
    out = []
    if title:
        out += [title, '~' * len(title), '']
    out += [border('-'), line(headers), border('=')]
    for r in rows:
        out += [line(r), border('-')]
    return '\n'.join(out) + '\n'


def text_table(headers, rows):
    """Plain aligned columns for the terminal."""
    headers = [str(h) for h in headers]
    rows = [[str(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows])
              for i, h in enumerate(headers)]
    fmt_line = '  '.join('%%-%ds' % w if i == 0 else '%%%ds' % w
                         for i, w in enumerate(widths))
    lines = [fmt_line % tuple(headers),
             '  '.join('-' * w for w in widths)]
    lines += [fmt_line % tuple(r) for r in rows]
    return '\n'.join(lines) + '\n'


def write_tables(base, *tables, note=None, command=None, echo=True):
    """Write ``tables`` ((headers, rows) pairs, in order) to ``base``.md
    and ``base``.rst, with ``note`` above them and the command line
    below; print them too (``echo``).  Returns the two paths; writes
    nothing (None) when no table has a row.
    """
    tables = [(h, r) for h, r in tables if r]
    if not tables:
        return None
    md, rst = [], []
    if note:
        md += [note, '']
        rst += [note, '']
    for headers, rows in tables:
        md.append(markdown_table(headers, rows))
        rst.append(rst_table(headers, rows))
        if echo:
            print(text_table(headers, rows))
    if command:
        md.append('Command: `%s`\n' % command)
        rst.append('Command::\n\n    %s\n' % command)
    return (write_text(base + '.md', '\n'.join(md)),
            write_text(base + '.rst', '\n'.join(rst)))


# ------------------------------------------------------------------ figures

PALETTE = ['#1b9e77', '#d95f02', '#7570b3', '#e7298a', '#66a61e',
           '#e6ab02', '#a6761d', '#666666', '#1f78b4', '#b2df8a']
HATCHES = ['', '//', '\\\\', 'xx', '..', 'oo', '--', '++', '**', '||']


def plotting_available():
    """(True, '') when the figures can be drawn here, else (False, why)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        return False, 'cannot draw the figures (%s): %s' % (
            exc, PLOTTING_HINT)
    return True, ''


def require_plotting():
    """Stop before measuring when the figures could not be drawn after."""
    ok, why = plotting_available()
    if not ok:
        raise SystemExit(why)


def pyplot():
    """matplotlib's pyplot on the Agg backend, in paper style."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    plt.rcParams.update({
        'font.family': 'serif', 'font.size': 9, 'axes.titlesize': 10,
        'axes.labelsize': 9, 'legend.fontsize': 8, 'xtick.labelsize': 8,
        'ytick.labelsize': 8, 'axes.spines.top': False,
        'axes.spines.right': False, 'savefig.dpi': 200,
        'savefig.bbox': 'tight', 'hatch.linewidth': 0.5})
    return plt


def grouped_bars(path, groups, series, values, ylabel='throughput (MB/s)',
                 title=None, xlabel=None, hlines=None, annotate=True,
                 log=False, figsize=(6.4, 3.2), digits=0):
    """Paper-style grouped bar chart.

    :param groups: x-axis categories (e.g. links).
    :param series: one bar per series inside each group (e.g. tools).
    :param values: ``values[series][group] = (median, min, max)`` or a
        summarize() dict; missing entries leave a gap.
    :param hlines: {group: (y, label)} e.g. the line rate of each link,
        drawn as a dashed segment over that group.
    Error bars show min..max.  Writes ``path`` (PNG, or PDF/SVG by suffix).
    """
    plt = pyplot()
    fig, ax = plt.subplots(figsize=figsize)
    n = max(1, len(series))
    width = 0.8 / n
    for i, name in enumerate(series):
        xs, ys, lo, hi = [], [], [], []
        for g, group in enumerate(groups):
            v = values.get(name, {}).get(group)
            if isinstance(v, dict):
                v = (v.get('median'), v.get('min'), v.get('max'))
            elif isinstance(v, (int, float)):
                v = (v, None, None)
            if not v or v[0] is None:
                continue
            med, vmin, vmax = v
            xs.append(g - 0.4 + width * (i + 0.5))
            ys.append(med)
            lo.append(med - (vmin if vmin is not None else med))
            hi.append((vmax if vmax is not None else med) - med)
        if not xs:
            continue
        ax.bar(xs, ys, width * 0.92, label=name,
               color=PALETTE[i % len(PALETTE)],
               hatch=HATCHES[i % len(HATCHES)], edgecolor='black',
               linewidth=0.5, zorder=2)
        ax.errorbar(xs, ys, yerr=[lo, hi], fmt='none', ecolor='black',
                    elinewidth=0.7, capsize=2, zorder=3)
        if annotate:
            for x, y, h in zip(xs, ys, hi):
                ax.annotate(fmt(y, digits), (x, y + h), ha='center',
                            va='bottom', fontsize=6, rotation=90,
                            xytext=(0, 2), textcoords='offset points')
    for g, group in enumerate(groups):
        if hlines and hlines.get(group):
            y, label = hlines[group]
            ax.hlines(y, g - 0.45, g + 0.45, colors='black',
                      linestyles='dashed', linewidth=0.8, zorder=4)
            ax.annotate(label, (g + 0.45, y), ha='right', va='bottom',
                        fontsize=6, xytext=(0, 1), textcoords='offset points')
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups)
    ax.set_ylabel(ylabel)
    if xlabel:
        ax.set_xlabel(xlabel)
    if title:
        ax.set_title(title)
    if log:
        ax.set_yscale('log')
    else:
        ax.set_ylim(bottom=0)
        top = ax.get_ylim()[1]
        ax.set_ylim(top=top * 1.12)
    ax.yaxis.grid(True, linestyle=':', linewidth=0.5, zorder=0)
    ax.legend(ncol=min(len(series), 4), frameon=False, loc='upper center',
              bbox_to_anchor=(0.5, -0.12 if not xlabel else -0.2))
    return save_figure(fig, path)


def range_bar(ax, x, s, i, label=None, text='%.1f s', bottom=None):
    """One bar of a summarize() dict ``s`` at ``x``: its median, in the
    ``i``-th colour and hatch, with a min-max error bar and the median
    written above (``text``; None for none); a stacked one (``bottom``)
    has no error bar.
    """
    ax.bar([x], [s['median']], 0.6, bottom=bottom,
           color=PALETTE[i % len(PALETTE)], hatch=HATCHES[i % len(HATCHES)],
           edgecolor='black', linewidth=0.5, zorder=2, label=label)
    top = s['median'] + (bottom or 0)
    if bottom is None and s.get('min') is not None:
        ax.errorbar([x], [s['median']], yerr=[[s['median'] - s['min']],
                                              [s['max'] - s['median']]],
                    fmt='none', ecolor='black', elinewidth=0.7, capsize=2,
                    zorder=3)
        top = s['max']
    if text:
        ax.annotate(text % s['median'], (x, top), ha='center', va='bottom',
                    fontsize=7, xytext=(0, 2), textcoords='offset points')


def save_figure(fig, path):
    """Write ``fig`` to ``path`` (its directory made) and close it."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path)
    pyplot().close(fig)
    return path


# ------------------------------------------------------------------ output

def write_json(path, obj):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + '.tmp'
    with open(tmp, 'w') as f:
        json.dump(obj, f, indent=1, sort_keys=False, default=str)
        f.write('\n')
    os.replace(tmp, path)
    return path


def render(json_path, redo, *steps):
    """Run ``steps`` (functions writing the tables and figures of the
    results already saved in ``json_path``, or (what it writes, function)
    pairs), every one of them even when one fails: a figure that cannot
    be drawn (no matplotlib, a bad value) loses no measurement.  Returns
    0, or RENDER_FAILED after saying on stderr which step failed and
    why, where the results are, and the command (``redo``) that writes
    the tables and figures again from them.
    """
    if not os.path.exists(json_path):
        raise FileNotFoundError('no results at %s' % json_path)
    failed = []
    for step in steps:
        what, step = step if isinstance(step, tuple) else (
            step.__name__.strip('_').replace('_', ' '), step)
        try:
            step()
        except Exception as exc:  # noqa: B902 - reported, nothing lost
            failed.append(what)
            print('could not write the %s: %s: %s' % (
                what, type(exc).__name__, exc), file=sys.stderr)
            if not isinstance(exc, ImportError):
                traceback.print_exc()
            if isinstance(exc, ImportError):
                print(PLOTTING_HINT, file=sys.stderr)
    if not failed:
        return 0
    print('the results are saved in %s; write the tables and figures '
          'again with: %s' % (json_path, redo), file=sys.stderr, flush=True)
    return RENDER_FAILED


def stopped(results, out, exc):
    """A run that stopped on ``exc``: say so, and save what it measured
    to ``out``/results.json (``complete`` false); exit status 1.
    """
    print('benchmark failed: %s' % exc, file=sys.stderr)
    path = write_json(os.path.join(out, 'results.json'),
                      dict(results, error=str(exc), complete=False))
    print('what it measured is in %s' % path, file=sys.stderr)
    return 1


def add_output(parser, name):
    """``--out`` (by default :func:`default_out` of benchmark ``name``)
    and ``--from-json`` on ``parser``.
    """
    parser.add_argument('--out', default=default_out(name))
    parser.add_argument('--from-json', metavar='JSON',
                        help='redraw the report from a results.json')


def load_json(path):
    """The results a run saved in ``path`` (``--from-json``)."""
    with open(path) as f:
        return json.load(f)


def measure(bench, out, write, errors=Exception):
    """Run ``bench`` (its ``start()``, ``run()``, and ``close()`` in any
    case) and write its ``results`` with ``write(results, out)``: that
    exit status.  A run stopped by one of ``errors`` saves what it
    measured instead (:func:`stopped`).
    """
    try:
        bench.start()
        bench.run()
    except errors as exc:
        return stopped(bench.results, out, exc)
    finally:
        bench.close()
    return write(bench.results, out)


def add_smoke(parser, name, options, about):
    """--smoke on ``parser``: a quick check of benchmark ``name`` (how
    long: ``about``) with ``options`` ({dest: value}), see apply_smoke.
    """
    parser.add_argument('--smoke', action='store_true', help=(
        'a quick check (%s): %s (options given win), --out %s' % (
            about, ' '.join('--%s %s' % (k.replace('_', '-'), v)
                            for k, v in options.items()),
            default_out(name, smoke=True))))


def apply_smoke(args, parser, name, options):
    """With --smoke, ``options`` where the command line left an option
    at its default, and the smoke --out unless one was given.
    """
    if not args.smoke:
        return args
    types = {a.dest: a.type for a in parser._actions}
    for key, value in options.items():
        default = parser.get_default(key)
        if isinstance(default, str) and types.get(key):
            default = types[key](default)      # as argparse gives it
        if getattr(args, key) == default:
            setattr(args, key, value)
    if args.out == parser.get_default('out'):
        args.out = default_out(name, smoke=True)
    return args


def default_out(name, smoke=False):
    """A benchmark's --out by default (see :data:`OUT_ROOT`)."""
    return os.path.join(OUT_ROOT, 'smoke', name) if smoke else \
        os.path.join(OUT_ROOT, name)


def write_text(path, text):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, 'w') as f:
        f.write(text)
    return path


def command_line():
    """The exact command line of this process, shell-quoted."""
    argv = getattr(sys, 'orig_argv', None) or [sys.executable] + sys.argv
    return shlex.join(argv)


def tool_version(argv, timeout=10):
    """First non-empty output line of e.g. ['rsync', '--version']."""
    try:
        p = subprocess.run(argv, capture_output=True, text=True,
                           timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in (p.stdout + '\n' + p.stderr).splitlines():
        if line.strip():
            return line.strip()
    return None


def machine_info():
    info = {'hostname': platform.node(), 'kernel': platform.release(),
            'python': platform.python_version(), 'cpus': os.cpu_count(),
            'date': datetime.datetime.now().astimezone().isoformat(
                timespec='seconds')}
    try:
        with open('/proc/meminfo') as f:
            info['mem_total_kib'] = int(f.readline().split()[1])
        with open('/proc/loadavg') as f:
            info['loadavg'] = f.read().split()[:3]
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('model name'):
                    info['cpu'] = line.split(':', 1)[1].strip()
                    break
    except OSError:
        pass
    return info
