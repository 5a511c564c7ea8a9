"""Shared helpers for benchmark scripts: statistics, tables, figures, JSON.

Used by ``benchmarks.throughput`` and meant for the other benchmark scripts
(object-log overhead, recovery time, memory) so that all results look alike::

    from benchmarks import report
    s = report.summarize([1.0, 1.2, 0.9])       # median/min/max/mean/n
    print(report.markdown_table(['tool', 'MB/s'], [['x', '1.0']]))
    report.grouped_bars('fig.png', groups=['loopback', '1gbit'],
                        series=['gridftp', 'rsync'],
                        values={'gridftp': {'loopback': (900, 850, 950)}},
                        ylabel='throughput (MB/s)')
    report.write_json('raw.json', {'command': report.command_line(), ...})

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

MB = 1e6


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


# ------------------------------------------------------------------ figures

PALETTE = ['#1b9e77', '#d95f02', '#7570b3', '#e7298a', '#66a61e',
           '#e6ab02', '#a6761d', '#666666', '#1f78b4', '#b2df8a']
HATCHES = ['', '//', '\\\\', 'xx', '..', 'oo', '--', '++', '**', '||']


def _pyplot():
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
    plt = _pyplot()
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
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
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
